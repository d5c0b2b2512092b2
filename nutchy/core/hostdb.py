"""The host database: what the web table says of each host, and which hosts to leave alone.

``nutchy updatehostdb`` reads every row of the web table once and keeps one :class:`HostStats`
per host (never one entry per row): rows by crawl status, rows fetched, their errors, 404s and
robots.txt denials, the mean response time, and when the host was last fetched. The result is
written to the host table, Nutch 2.x's ``host`` (``<crawlId>_host``, row key the reversed host
as :func:`nutchy.core.urls.reverse_host` gives it), as decimal strings in the ``mtdt`` family
under keys of nutchy's own (:data:`KEYS`), as Nutch keeps its ``q_mt``/``q_cd``/``q_mcd`` there.
Nutch 2.x reads only those three keys, so a Nutch sharing the table is not disturbed, and nutchy
never writes or removes them.

What a row tells (:meth:`HostStats.add`): its crawl status (``f:st``); whether it was fetched
(it has a protocol status, ``f:prot``); whether that fetch failed with an exception (protocol
status EXCEPTION: no answer, a timeout, an HTTP code Nutch has no status for such as 5xx or
403), found nothing (NOTFOUND, a 404) or was refused by robots.txt (ROBOTS_DENIED); its
response time (``mtdt:_rs_``, Nutch's key) and when it was fetched (``mtdt:_nft_``, nutchy's,
written by every fetch; rows fetched by Nutch lack it and count in everything but the times).

A host's *consecutive errors* are the rows whose last fetch failed with an exception after the
host's last fetch that did not (Nutch 1.x ``fetcher.max.exceptions.per.queue`` counts a queue's
exceptions within one fetch; this is the same count carried across rounds). Keeping it needs the
times of the latest errors of a host, at most *cap* of them: a host with more shows *cap*.

>>> stats = HostStats()
>>> stats.add(2, 1, fetched_at=1000, response_time=40)
>>> stats.add(0x22, 16, fetched_at=2000, response_time=None)
>>> stats.add(0x22, 16, fetched_at=3000, response_time=None)
>>> stats.add(3, 14, fetched_at=500, response_time=20)
>>> stats.rows, stats.fetched, stats.errors, stats.not_found, stats.mean_response_time
(4, 4, 2, 1, 30)
>>> stats.finish(cap=64)
>>> stats.consecutive_errors, stats.last_fetch, stats.last_success
(2, 3000, 1000)
>>> back = HostStats.from_cells(stats.cells(updated=5))
>>> back.updated, back.consecutive_errors, back.mean_response_time, back.by_status
(5, 2, 30, {2: 1, 34: 2, 3: 1})
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Final

from nutchy.core.status import CrawlStatus, ProtocolStatusCode

__all__ = [
    "FAMILIES",
    "KEYS",
    "PREFIX",
    "HostGate",
    "HostStats",
    "is_nutchy_column",
]

#: The families of Nutch 2.x's host table (its Gora mapping): only ``mtdt`` is written.
FAMILIES: Final = (b"mtdt", b"il", b"ol")
#: What every column nutchy writes in the host table starts with.
PREFIX: Final = b"mtdt:nutchy."
#: The scalar keys, after :data:`PREFIX`; rows by status are ``status.<code>``.
KEYS: Final = (
    "rows",
    "fetched",
    "errors",
    "notfound",
    "robots_denied",
    "rt_count",
    "rt_mean",
    "last_fetch",
    "last_success",
    "consecutive_errors",
    "robots_status",
    "robots_fetched",
    "updated",
)
_STATUS: Final = "status."


def is_nutchy_column(column: bytes) -> bool:
    """Whether *column* of the host table is one nutchy writes (and may remove)."""
    return column.startswith(PREFIX)


@dataclass(slots=True)
class HostStats:
    """What the web table says of one host (see the module docstring).

    Times are ms since the epoch, 0 when unknown. *rt_total* and *rt_count* sum the response
    times (ms) of the rows that have one. *updated* is when ``updatehostdb`` wrote the entry.
    """

    rows: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    fetched: int = 0
    errors: int = 0
    not_found: int = 0
    robots_denied: int = 0
    rt_total: int = 0
    rt_count: int = 0
    last_fetch: int = 0
    last_success: int = 0
    consecutive_errors: int = 0
    #: The HTTP status of the host's robots.txt as the fetch last got it (0: not known), and
    #: when (ms): from the crawl's shared robots.txt cache (:mod:`nutchy.store.hosts`).
    robots_status: int = 0
    robots_fetched: int = 0
    updated: int = 0
    #: The times of the latest failed fetches (a heap, oldest first), while rows are added.
    _error_times: list[int] = field(default_factory=list, compare=False, repr=False)

    def add(
        self,
        status: int,
        protocol_code: int | None,
        *,
        fetched_at: int | None,
        response_time: int | None,
        cap: int = 64,
    ) -> None:
        """Count one row: its crawl *status*, the code of its protocol status (``None``: never
        fetched), when it was fetched and its response time (ms), when known. *cap* bounds the
        error times kept (see :meth:`finish`)."""
        self.rows += 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        if protocol_code is None:
            return
        self.fetched += 1
        if response_time is not None and response_time >= 0:
            self.rt_total += response_time
            self.rt_count += 1
        if protocol_code == ProtocolStatusCode.NOTFOUND:
            self.not_found += 1
        elif protocol_code == ProtocolStatusCode.ROBOTS_DENIED:
            self.robots_denied += 1
        failed = protocol_code == ProtocolStatusCode.EXCEPTION
        if failed:
            self.errors += 1
        if not fetched_at:
            return
        self.last_fetch = max(self.last_fetch, fetched_at)
        if not failed:
            self.last_success = max(self.last_success, fetched_at)
        elif fetched_at > self.last_success:
            times = self._error_times
            if len(times) < cap:
                heapq.heappush(times, fetched_at)
            elif fetched_at > times[0]:
                heapq.heapreplace(times, fetched_at)

    def finish(self, cap: int = 64) -> None:
        """Count the consecutive errors once every row is added: the failed fetches after the
        last fetch that did not fail, at most *cap*."""
        newer = [t for t in self._error_times if t > self.last_success]
        self.consecutive_errors = min(len(newer), cap)
        self._error_times = []

    @property
    def mean_response_time(self) -> int | None:
        """The mean response time in ms, ``None`` when no row has one."""
        return round(self.rt_total / self.rt_count) if self.rt_count else None

    @property
    def error_rate(self) -> float:
        """Failed fetches per row fetched (0.0 when none was fetched)."""
        return self.errors / self.fetched if self.fetched else 0.0

    @property
    def not_found_rate(self) -> float:
        """404s per row fetched (0.0 when none was fetched)."""
        return self.not_found / self.fetched if self.fetched else 0.0

    def cells(self, *, updated: int) -> dict[bytes, bytes]:
        """The host table's cells for these statistics, written at *updated* (ms)."""
        mean = self.mean_response_time
        values = {
            "rows": self.rows,
            "fetched": self.fetched,
            "errors": self.errors,
            "notfound": self.not_found,
            "robots_denied": self.robots_denied,
            "rt_count": self.rt_count,
            "rt_mean": 0 if mean is None else mean,
            "last_fetch": self.last_fetch,
            "last_success": self.last_success,
            "consecutive_errors": self.consecutive_errors,
            "robots_status": self.robots_status,
            "robots_fetched": self.robots_fetched,
            "updated": updated,
        }
        out = {PREFIX + name.encode(): str(value).encode() for name, value in values.items()}
        for code, count in self.by_status.items():
            out[PREFIX + f"{_STATUS}{code}".encode()] = str(count).encode()
        return out

    @classmethod
    def from_cells(cls, cells: dict[bytes, bytes]) -> HostStats:
        """The statistics a host row holds; a value that is not a decimal number reads as 0."""
        values: dict[str, int] = {}
        by_status: dict[int, int] = {}
        for column, raw in cells.items():
            if not column.startswith(PREFIX):
                continue
            name = column[len(PREFIX) :].decode("utf-8", "replace")
            number = _decimal(raw)
            if name.startswith(_STATUS):
                code = name[len(_STATUS) :]
                if code.lstrip("-").isdigit():
                    by_status[int(code)] = number
            elif name in KEYS:
                values[name] = number
        stats = cls(
            rows=values.get("rows", 0),
            by_status=by_status,
            fetched=values.get("fetched", 0),
            errors=values.get("errors", 0),
            not_found=values.get("notfound", 0),
            robots_denied=values.get("robots_denied", 0),
            rt_count=values.get("rt_count", 0),
            last_fetch=values.get("last_fetch", 0),
            last_success=values.get("last_success", 0),
            consecutive_errors=values.get("consecutive_errors", 0),
            robots_status=values.get("robots_status", 0),
            robots_fetched=values.get("robots_fetched", 0),
            updated=values.get("updated", 0),
        )
        stats.rt_total = values.get("rt_mean", 0) * stats.rt_count
        return stats

    def status_names(self) -> dict[str, int]:
        """Rows by status, by Nutch's status names, in code order."""
        names = {}
        for code in sorted(self.by_status):
            try:
                name = CrawlStatus(code).name.lower()
            except ValueError:
                name = f"unknown_{code}"
            names[name] = self.by_status[code]
        return names


def _decimal(raw: bytes) -> int:
    try:
        return int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return 0


@dataclass(frozen=True, slots=True)
class HostGate:
    """Which hosts generate leaves out, from the host database.

    A host is left out while it is *suspended*: *max_errors* (``fetcher.max.exceptions.per
    .queue``, -1 off) consecutive errors or more, or an error rate above *max_error_rate* (-1
    off) over at least *min_fetched* fetched rows; and its last fetch is less than *delay* ms
    old. Once the delay has passed the host is generated again; a fetch that fails again
    suspends it again (after the next ``updatehostdb``), one that succeeds clears it.

    >>> gate = HostGate(max_errors=3, delay=1000)
    >>> gate.suspends(HostStats(consecutive_errors=3, last_fetch=5000), now=5500)
    True
    >>> gate.suspends(HostStats(consecutive_errors=3, last_fetch=5000), now=6000)
    False
    >>> gate.suspends(HostStats(consecutive_errors=2, last_fetch=5000), now=5500)
    False
    """

    max_errors: int = -1
    max_error_rate: float = -1.0
    min_fetched: int = 10
    delay: int = 86_400_000

    @property
    def enabled(self) -> bool:
        return self.max_errors >= 0 or self.max_error_rate >= 0

    def suspends(self, stats: HostStats, *, now: int) -> bool:
        """Whether generate leaves the host of *stats* out at *now* (ms)."""
        if stats.last_fetch + self.delay <= now:
            return False
        if 0 <= self.max_errors <= stats.consecutive_errors and stats.consecutive_errors:
            return True
        return (
            self.max_error_rate >= 0
            and stats.fetched >= self.min_fetched
            and stats.error_rate > self.max_error_rate
        )
