"""The fetch's frontier: where the rows of a batch come from, and where their end is told.

:class:`~nutchy.scheduler.NutchScheduler` keeps the rows it is about to fetch in one queue per
host, domain or IP, and enforces politeness on them; a :class:`Frontier` fills those queues. It
brings rows when the scheduler has room for them (:meth:`Frontier.read`), hears which queues run
low (:meth:`Frontier.low`), which are dropped for the batch (:meth:`Frontier.drop`), whose
requests all ended (:meth:`Frontier.idle`) and which rows have their outcome in the table
(:meth:`Frontier.written`), and says whether more rows may come (:meth:`Frontier.more`).

:class:`LocalFrontier` reads the batch from the web table, for one process (or one partition of
a batch). The rows it brings are read by :class:`BatchReader` in a thread, never on the reactor,
a page at a time, and only the few columns a fetch needs (:data:`FETCH_COLUMNS`). Memory holds at
most the scheduler's capacity (``CONCURRENT_REQUESTS * fetcher.queue.depth.multiplier`` rows),
and at most ``fetcher.threads.per.queue * …multiplier`` of one queue, whatever the size of the
batch. Rows come in key order, so all the rows of a host come together: when a host's queue is
full, the reader notes where that host's rows resume and jumps past them, so the next hosts get
their turn; the host is read again, from the noted key, when its queue runs low. (Nutch shuffles
the whole batch in its MapReduce sort instead.) ``-a resume=true`` skips rows that have a fetch
mark, ``-a partition=k/K`` keeps the rows generate put in partition *k* (``mtdt:_npt_``; computed
from the host when a row has none).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from scrapy.utils.asyncio import run_in_thread

from nutchy._fetch import FetchJob, FetchSettings
from nutchy.core.fetch import FetchEntry, entry_from_page, queue_id
from nutchy.core.generate import partition_for
from nutchy.core.urls import InvalidURL, domain_of, host_of, reverse_url
from nutchy.exceptions import CellDecodeError
from nutchy.jobs._batches import ALL_BATCHES
from nutchy.store.base import Scan, prefix_stop
from nutchy.store.schema import decode_page

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from scrapy.statscollectors import StatsCollector

    from nutchy.store.table import WebTable

__all__ = ["FETCH_COLUMNS", "BatchReader", "Frontier", "FrontierOwner", "LocalFrontier"]

logger = logging.getLogger(__name__)

#: The columns the fetch reads of each row of the batch.
FETCH_COLUMNS: Final = (
    b"f:ts",
    b"f:mod",
    b"f:rpr",
    b"h:ETag",
    b"mk:_gnmrk_",
    b"mk:_ftcmrk_",
    b"mtdt:_npt_",
    b"p:sig",
)
#: The WebPage fields those columns fill.
_FETCH_FIELDS: Final = (
    "fetch_time",
    "modified_time",
    "repr_url",
    "headers",
    "markers",
    "metadata",
    "signature",
)


class Frontier(Protocol):
    """The rows of the batches a fetch fetches, for :class:`~nutchy.scheduler.NutchScheduler`.

    Every method is called on the reactor thread and returns at once; the asynchronous ones do
    their blocking work in threads. A queue is named by its id (``http://host``...), as
    :func:`~nutchy.core.fetch.queue_id` gives it.
    """

    async def start(self, job: FetchJob) -> bool:
        """Begin *job*'s batch (it has a batch id); ``False`` when there is nothing to fetch of
        it (the frontier says why)."""

    def more(self) -> bool:
        """Whether rows of the batch may still come from :meth:`read`."""

    def wants(self, queued: int) -> bool:
        """Whether a :meth:`read` is worth starting now that the scheduler holds *queued* rows
        (the scheduler starts none while another is under way)."""

    async def read(self, budget: int, room: Mapping[str, int]) -> list[tuple[str, FetchEntry]]:
        """At most *budget* more rows, by queue, and for each queue at most its *room* (the
        frontier's per-queue room for a queue not in it). *room* is live: read it on the reactor
        thread, when the read starts."""

    def low(self, queue: str) -> None:
        """The scheduler took a row of *queue*, which holds less than half its room now."""

    def idle(self, queue: str, ready_in: float) -> None:
        """*queue* holds no row and has no request in flight; its next request may start in
        *ready_in* seconds."""

    def drop(self, queue: str) -> None:
        """The rest of *queue*'s rows are left for a later fetch: bring none of them."""

    def stop(self) -> None:
        """Bring no more rows of this batch (a time limit, a write error)."""

    def written(self, entries: Sequence[FetchEntry]) -> None:
        """The outcomes of *entries* are in the table."""

    def skipped(self, entries: Sequence[FetchEntry]) -> None:
        """*entries* ended without an outcome (another component dropped their request): they
        are left for a later fetch."""

    async def lookup(self, url: str, batch_id: str) -> tuple[str | None, FetchEntry, bool]:
        """The queue (``None``: none) and entry of *url*, a followed redirect's target that
        joins *batch_id*, and whether its row is new."""

    async def close(self) -> None:
        """The fetch ends."""


class FrontierOwner(Protocol):
    """What a frontier may ask of the scheduler it fills."""

    def wake(self) -> None:
        """A :meth:`Frontier.read` may bring rows now (the frontier waited for something)."""

    def forget(self, queue: str) -> None:
        """Drop the rows of *queue* the scheduler holds, unfetched: another worker has them."""


# --- reading, in a thread ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What one read should bring: rows of the hosts in *hosts* (key prefix → the key their
    rows resume at, and the queue they waited for) first,
    then rows from the batch cursor *main* (``None``: none), at most *budget* rows in all and at
    most the *room* of each queue (*default_room* for a queue not in it)."""

    hosts: dict[bytes, tuple[bytes, str]]
    main: bytes | None
    budget: int
    room: Mapping[str, int]
    default_room: int
    dropped: frozenset[str] = frozenset()
    #: rows already fetched in this crawl as followed redirects (they joined the batch)
    followed: frozenset[str] = frozenset()


@dataclass(slots=True)
class ReadResult:
    """What one read brought: *items* by queue, the batch cursor after it (``None``: the batch
    is read), where each host read resumes (``None``: the host is read; the queue it waits for
    otherwise), and what was skipped."""

    items: list[tuple[str, FetchEntry]] = field(default_factory=list)
    main: bytes | None = None
    hosts: dict[bytes, tuple[bytes, str] | None] = field(default_factory=dict)
    rows: int = 0
    resumed: int = 0
    other_partition: int = 0
    unresolved: int = 0
    undecodable: int = 0
    dropped: int = 0


#: The skip counters of a :class:`ReadResult`, as named in the ``nutch/fetch/skipped/*`` stats.
SKIPPED: Final = ("resumed", "other_partition", "unresolved", "undecodable", "dropped")


class BatchReader:
    """Reads the rows of a fetch job from the table. Its methods block and run in a thread, one
    at a time; they touch nothing the reactor uses.

    *job* says which rows (its batch, partition), *settings* how rows map to queues; with
    *resume*, rows with a fetch mark are skipped. A row without a partition gets the one
    generate would give it, by *partition_mode* and *partition_seed*.
    """

    def __init__(
        self,
        table: WebTable,
        job: FetchJob,
        settings: FetchSettings,
        *,
        resume: bool,
        partition_mode: str = "byHost",
        partition_seed: int = 0,
    ) -> None:
        self.table = table
        self.job = job
        self.settings = settings
        self.resume = resume
        self.partition_mode = partition_mode
        self.partition_seed = partition_seed
        self.marker = (
            None
            if job.batch_id in (None, ALL_BATCHES)
            else (b"_gnmrk_", job.batch_id.encode("utf-8"))
        )
        self.addresses: dict[str, str | None] = {}
        self.followed: frozenset[str] = frozenset()

    def read(self, plan: ReadPlan) -> ReadResult:
        result = ReadResult(main=plan.main)
        self.followed = plan.followed
        room = dict(plan.room)
        budget = plan.budget
        for prefix, record in plan.hosts.items():
            if budget <= 0:
                result.hosts[prefix] = record  # not read this time
                continue
            budget = self._scan(Scan(start=record[0], prefix=prefix), room, plan, budget, result)
        # The batch cursor: each scan ends at the budget, at the end of the batch, or at a host
        # whose queue is full, past which the next scan starts.
        while result.main is not None and budget > 0:
            budget = self._scan(Scan(start=result.main), room, plan, budget, result, main=True)
        return result

    def rows(self) -> Iterator[tuple[str, FetchEntry]]:
        """Every row of the job, with its queue, in key order (the rows :meth:`read` would skip
        are skipped): what a shared frontier is given of a batch. Memory holds a page."""
        result = ReadResult()
        for key, cells in self.table.store.scan(
            Scan(columns=FETCH_COLUMNS, marker=self.marker), self.table.read_limit
        ):
            entry, queue = self._entry(key, cells, result)
            if entry is not None and queue is not None:
                yield queue, entry

    def _scan(
        self,
        scan: Scan,
        room: dict[str, int],
        plan: ReadPlan,
        budget: int,
        result: ReadResult,
        *,
        main: bool = False,
    ) -> int:
        """Take rows of *scan* while the budget and the queues' room allow; return the budget
        left. For the main cursor, a full queue makes the scan jump past the row's host."""
        host_scan = not main
        rows = self.table.store.scan(
            Scan(
                start=scan.start,
                prefix=scan.prefix,
                columns=FETCH_COLUMNS,
                marker=self.marker,
            ),
            min(self.table.read_limit, max(budget, 16)),
        )
        try:
            for key, cells in rows:
                result.rows += 1
                entry, queue = self._entry(key, cells, result)
                if queue is None or entry is None:
                    if main:
                        result.main = key + b"\x00"
                    continue
                if queue in plan.dropped:
                    result.dropped += 1
                    if main:
                        result.main = key + b"\x00"
                    continue
                if room.get(queue, plan.default_room) <= 0:
                    prefix = key[: key.index(b":") + 1] if b":" in key else key
                    if host_scan:
                        result.hosts[scan.prefix] = (key, queue)
                    else:
                        # The host's queue is full: note where its rows resume, skip the rest.
                        result.hosts[prefix] = (key, queue)
                        result.main = prefix_stop(prefix)
                    return budget
                room[queue] = room.get(queue, plan.default_room) - 1
                result.items.append((queue, entry))
                budget -= 1
                if main:
                    result.main = key + b"\x00"
                if budget <= 0:
                    if host_scan:
                        result.hosts[scan.prefix] = (key + b"\x00", queue)
                    return budget
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        # The scan ran out: the host, or the batch, is read.
        if host_scan:
            result.hosts[scan.prefix] = None
        else:
            result.main = None
        return budget

    def _entry(
        self, key: bytes, cells: dict[bytes, bytes], result: ReadResult
    ) -> tuple[FetchEntry | None, str | None]:
        try:
            entry = entry_from_page(decode_page(key, cells, _FETCH_FIELDS))
        except (CellDecodeError, InvalidURL) as exc:
            result.undecodable += 1
            logger.warning("Skipped row %r: %s", key, exc)
            return None, None
        if entry is None:  # not generated: only with -all
            return None, None
        if entry.key in self.followed:
            return None, None
        if self.resume and entry.fetched:
            result.resumed += 1
            return None, None
        if self.job.partition is not None and self._partition(entry) != self.job.partition:
            result.other_partition += 1
            return None, None
        queue = self.queue_of(entry.url)
        if queue is None:
            result.unresolved += 1
        return entry, queue

    def _partition(self, entry: FetchEntry) -> int:
        if entry.partition is not None:
            return entry.partition
        # A row generated by Nutch carries no partition: compute it as generate does.
        try:
            key = domain_of(entry.url) if self.partition_mode == "byDomain" else host_of(entry.url)
        except InvalidURL:
            key = entry.url
        return partition_for(key, self.job.partitions, self.partition_seed)

    def queue_of(self, url: str) -> str | None:
        """The queue of *url*, or ``None`` when its host does not resolve (``byIP``), in which
        case Nutch drops the URL."""
        mode = self.settings.queue_mode
        try:
            if mode != "byIP":
                return queue_id(url, mode)
            host = host_of(url)
        except InvalidURL:
            return None
        if host not in self.addresses:
            try:
                info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                self.addresses[host] = str(info[0][4][0])
            except (OSError, UnicodeError):
                self.addresses[host] = None
        address = self.addresses[host]
        return None if address is None else queue_id(url, mode, address)

    def lookup(self, url: str, batch_id: str) -> tuple[str | None, FetchEntry, bool]:
        """The queue and entry of a followed redirect's target, and whether its row is new."""
        key = reverse_url(url)
        cells = self.table.store.get(key.encode("utf-8"), FETCH_COLUMNS)
        page = None if cells is None else decode_page(key.encode("utf-8"), cells, _FETCH_FIELDS)
        entry = FetchEntry(key, url, batch_id)
        if page is not None:
            entry = FetchEntry(
                key,
                url,
                batch_id,
                fetch_time=page.fetch_time,
                modified_time=page.modified_time,
                etag=page.headers.get("ETag") or None,
                repr_url=page.repr_url,
            )
        return self.queue_of(url), entry, page is None


# --- the local frontier --------------------------------------------------------------------------


class LocalFrontier:
    """The rows of a batch, read from the web table by this process (see the module docstring).

    *table* is the open web table; *settings* say how many rows the scheduler holds at most
    (``capacity``) and how many of one queue (``queue_room``); *stats* is the crawler's. *resume*,
    *partition_mode* and *partition_seed* are passed on to each batch's :class:`BatchReader`.
    """

    def __init__(
        self,
        table: WebTable,
        settings: FetchSettings,
        *,
        stats: StatsCollector,
        resume: bool = False,
        partition_mode: str = "byHost",
        partition_seed: int = 0,
    ) -> None:
        self.table = table
        self.settings = settings
        self.stats = stats
        self.capacity = settings.capacity
        self.per_queue = settings.queue_room
        self.resume = resume
        self.partition_mode = partition_mode
        self.partition_seed = partition_seed
        self.reader: BatchReader | None = None
        #: the batch cursor (``None``: the batch is read, or no batch started)
        self._cursor: bytes | None = None
        #: hosts whose rows wait for room in their queue: key prefix → resume key, queue
        self._hosts: dict[bytes, tuple[bytes, str]] = {}
        #: queue → the key prefixes of its hosts in ``_hosts``
        self._waiting: dict[str, set[bytes]] = {}
        #: queues that ran low and have hosts waiting
        self._needy: set[str] = set()
        self._dropped: set[str] = set()
        self._followed: set[str] = set()
        self._stopped = False

    async def start(self, job: FetchJob) -> bool:
        self.reader = BatchReader(
            self.table,
            job,
            self.settings,
            resume=self.resume,
            partition_mode=self.partition_mode,
            partition_seed=self.partition_seed,
        )
        self._cursor = b""
        self._hosts = {}
        self._waiting = {}
        self._needy = set()
        self._dropped = set()
        self._followed = set()
        self._stopped = False
        return True

    def more(self) -> bool:
        return not self._stopped and (self._cursor is not None or bool(self._hosts))

    def wants(self, queued: int) -> bool:
        if self._stopped or self.reader is None:
            return False
        return bool(self._needy) or (self._cursor is not None and queued * 2 < self.capacity)

    async def read(self, budget: int, room: Mapping[str, int]) -> list[tuple[str, FetchEntry]]:
        reader = self.reader
        if reader is None or self._stopped or budget <= 0:
            return []
        room = dict(room)  # as it is now, with the queues that ran low since it was asked for
        hosts: dict[bytes, tuple[bytes, str]] = {}
        for queue in list(self._needy):
            self._needy.discard(queue)
            if queue in self._dropped or room.get(queue, self.per_queue) * 2 <= self.per_queue:
                continue  # dropped, or not low any more
            for prefix in self._waiting.pop(queue, ()):
                record = self._hosts.pop(prefix, None)
                if record is not None:
                    hosts[prefix] = record
        queued = sum(self.per_queue - r for r in room.values())
        main = self._cursor if queued * 2 < self.capacity else None
        if not hosts and main is None:
            return []
        plan = ReadPlan(
            hosts=hosts,
            main=main,
            budget=budget,
            room=room,
            default_room=self.per_queue,
            dropped=frozenset(self._dropped),
            followed=frozenset(self._followed),
        )
        result = await run_in_thread(reader.read, plan)
        self._count(result)
        if self._stopped or reader is not self.reader:
            return []
        if plan.main is not None:
            self._cursor = result.main
        taken: dict[str, int] = {}
        for queue, _ in result.items:
            taken[queue] = taken.get(queue, 0) + 1
        for prefix, record in result.hosts.items():
            if record is None:
                continue
            queue = record[1]
            if queue in self._dropped:
                continue
            self._hosts[prefix] = record
            self._waiting.setdefault(queue, set()).add(prefix)
            left = plan.room.get(queue, self.per_queue) - taken.get(queue, 0)
            if (self.per_queue - left) * 2 < self.per_queue:
                self._needy.add(queue)
        return result.items

    def _count(self, result: ReadResult) -> None:
        stats = self.stats
        stats.inc_value("nutch/fetch/rows_read", result.rows)
        for name in SKIPPED:
            count = getattr(result, name)
            if count:
                stats.inc_value(f"nutch/fetch/skipped/{name}", count)

    def low(self, queue: str) -> None:
        if queue in self._waiting:
            self._needy.add(queue)

    def idle(self, queue: str, ready_in: float) -> None:
        pass  # the queue stays this process's

    def drop(self, queue: str) -> None:
        self._dropped.add(queue)
        self._needy.discard(queue)
        for prefix in self._waiting.pop(queue, ()):
            self._hosts.pop(prefix, None)

    def stop(self) -> None:
        self._stopped = True
        self._cursor = None
        self._hosts.clear()
        self._waiting.clear()
        self._needy.clear()

    def written(self, entries: Sequence[FetchEntry]) -> None:
        pass  # the fetch mark in the table is all a resume needs

    def skipped(self, entries: Sequence[FetchEntry]) -> None:
        pass  # no fetch mark: a resume fetches them

    async def lookup(self, url: str, batch_id: str) -> tuple[str | None, FetchEntry, bool]:
        assert self.reader is not None
        # Its row joins the batch: the batch cursor must not fetch it a second time.
        self._followed.add(reverse_url(url))
        return await run_in_thread(self.reader.lookup, url, batch_id)

    async def close(self) -> None:
        self.stop()
