"""updatehostdb and readhostdb: the host database (:mod:`nutchy.core.hostdb`, docs/hostdb.md).

:func:`update_hostdb` reads the web table in one streaming scan of six cells a row (``f:st``,
``f:prot``, ``mtdt:_rs_``, ``mtdt:_nft_``, and ``f:ts`` and ``s:s`` so that every row comes), keeping one :class:`~nutchy.core.hostdb.HostStats`
per host and nothing per row, then writes every host's entry to the host table and removes the
entries of hosts that have no row any more. Only nutchy's own columns (``mtdt:nutchy.*``) are
written or removed: what Nutch or a user keeps in a host row (``mtdt:q_mt`` and the others)
stays as it is.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nutchy.core.hostdb import HostGate, HostStats, is_nutchy_column
from nutchy.core.status import Metadata
from nutchy.core.urls import InvalidURL, reverse_host, reversed_host, unreverse_host
from nutchy.exceptions import ConfigError, NutchError
from nutchy.jobs import _settings
from nutchy.jobs.readdb import _when, printable
from nutchy.store import open_host_store
from nutchy.store.base import Scan
from nutchy.store.hosts import HostMemory, open_host_memory_from_settings
from nutchy.store.schema import RowUpdate, field_named

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.base import Store
    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

__all__ = [
    "HEADER",
    "HostDbError",
    "UpdateResult",
    "describe_update",
    "host_gate",
    "host_line",
    "host_record",
    "read_hosts",
    "suspended_hosts",
    "update_hostdb",
    "update_hostdb_of",
]

_STATUS: Final = (field_named("status").column, field_named("status").codec.decode)
_PROT: Final = (field_named("protocol_status").column, field_named("protocol_status").codec.decode)
_RT: Final = b"mtdt:" + Metadata.RESPONSE_TIME.encode()
_AT: Final = b"mtdt:" + Metadata.FETCHED_AT.encode()
#: ``f:ts`` and ``s:s`` are not used, but a scan returns only rows holding a column it asks for,
#: and every row has them (inject writes both): an injected row has neither status nor fetch.
_COLUMNS: Final = (_STATUS[0], _PROT[0], _RT, _AT, b"f:ts", b"s:s")
#: The error times kept per host at least (see :class:`~nutchy.core.hostdb.HostStats`).
MIN_CAP: Final = 64


class HostDbError(NutchError):
    """A host database that cannot be read: the command prints it in one line."""


@dataclass(slots=True)
class UpdateResult:
    """What :func:`update_hostdb` did: rows read (*undecodable* of them skipped), hosts written,
    hosts removed (no row left in the web table)."""

    rows: int = 0
    undecodable: int = 0
    hosts: int = 0
    removed: int = 0


def update_hostdb(
    table: WebTable,
    hosts: Store,
    *,
    now: int,
    cap: int = MIN_CAP,
    progress: Progress | None = None,
    memory: HostMemory | None = None,
) -> UpdateResult:
    """Recompute every host's entry of the host table *hosts* from *table*, at *now* (ms).

    *cap* bounds the consecutive errors counted per host (and the error times kept for it). The
    host table is created if missing. Memory holds one entry per host, whatever the number of
    rows, with the schemes and ports its rows use; with *memory* (the crawl's shared robots.txt
    cache, :mod:`nutchy.store.hosts`) each host gets the status of its latest robots.txt
    answer there, looked up by those origins. The host table is written :attr:`~nutchy.store.table.WebTable.write_limit` hosts at a
    time.
    """
    result = UpdateResult()
    stats: dict[bytes, HostStats] = {}
    origins: dict[bytes, set[bytes]] = {}
    decode_status, decode_prot = _STATUS[1], _PROT[1]
    scan = Scan(columns=_COLUMNS)
    for key, cells in table.store.scan(scan, table.read_limit):
        result.rows += 1
        if progress is not None:
            progress.advance()
        try:
            text = key.decode("utf-8")
            host = reversed_host(text).lower().encode("utf-8")
            raw = cells.get(_STATUS[0])
            status = 0 if raw is None else decode_status(raw)
            raw = cells.get(_PROT[0])
            code = None if raw is None else decode_prot(raw).code
            raw = cells.get(_RT)
            response_time = None if raw is None else int.from_bytes(raw, "big", signed=True)
            raw = cells.get(_AT)
            fetched_at = None if raw is None else int.from_bytes(raw, "big", signed=True)
        except (InvalidURL, UnicodeDecodeError, ValueError, struct.error, IndexError) as exc:
            result.undecodable += 1
            logger.warning("Skipped row %r: %s", key, exc)
            continue
        entry = stats.get(host)
        if entry is None:
            entry = stats[host] = HostStats()
            origins[host] = set()
        if memory is not None:
            # "<reversed host>:<scheme>[:<port>]<path>": the scheme and port, as "scheme:port".
            rest = key[len(host) + 1 :]
            end = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
            origins[host].add(rest[:end])
        entry.add(status, code, fetched_at=fetched_at, response_time=response_time, cap=cap)
    if memory is not None:
        _robots(stats, origins, memory)
    hosts.create()
    old = dict(hosts.scan(Scan(columns=[b"mtdt"]), table.read_limit))
    updates: list[RowUpdate] = []
    for host, entry in stats.items():
        entry.finish(cap)
        puts = entry.cells(updated=now)
        stale = {c for c in old.pop(host, {}) if is_nutchy_column(c) and c not in puts}
        updates.append(RowUpdate(host, puts=puts, deletes=stale))
        _flush(hosts, updates, table.write_limit)
    for host, cells in old.items():
        stale = {c for c in cells if is_nutchy_column(c)}
        if stale:
            result.removed += 1
            updates.append(RowUpdate(host, deletes=stale))
            _flush(hosts, updates, table.write_limit)
    _flush(hosts, updates, 1)
    result.hosts = len(stats)
    return result


def update_hostdb_of(
    table: WebTable, settings: BaseSettings, *, now: int, progress: Progress | None = None
) -> tuple[UpdateResult, str]:
    """:func:`update_hostdb` into the host table of *settings*, counting consecutive errors up
    to max(:data:`MIN_CAP`, ``NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE`` + 1); returns what it
    did and the host table's name."""
    limit = _settings.get_int(settings, "NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE", -1)
    hosts = open_host_store(settings)
    memory = open_host_memory_from_settings(settings)
    try:
        result = update_hostdb(
            table, hosts, now=now, cap=max(MIN_CAP, limit + 1), progress=progress, memory=memory
        )
        return result, hosts.table_name
    finally:
        memory.close()
        hosts.close()


def describe_update(result: UpdateResult, name: str) -> str:
    """What :func:`update_hostdb` did, in one line."""
    text = f"{result.rows} rows read, {result.hosts} hosts written to {name}"
    if result.removed:
        text += f", {result.removed} hosts with no row left removed"
    if result.undecodable:
        text += f"; {result.undecodable} rows skipped (a cell does not decode)"
    return text


def _robots(
    stats: dict[bytes, HostStats], origins: dict[bytes, set[bytes]], memory: HostMemory
) -> None:
    """Give each host the latest robots.txt answer of its origins that *memory* holds."""
    wanted: dict[str, bytes] = {}
    for host, schemes in origins.items():
        name = unreverse_host(host.decode("utf-8"))
        for scheme_port in schemes:
            scheme, _, port = scheme_port.decode("utf-8", "replace").partition(":")
            wanted[f"{scheme}://{name}{':' + port if port else ''}"] = host
    names = list(wanted)
    for i in range(0, len(names), 1000):
        for origin, record in memory.robots(names[i : i + 1000]).items():
            entry = stats[wanted[origin]]
            if record.fetched >= entry.robots_fetched:
                entry.robots_status, entry.robots_fetched = record.status, record.fetched


def _flush(hosts: Store, updates: list[RowUpdate], limit: int) -> None:
    if len(updates) >= max(1, limit):
        hosts.write(updates)
        updates.clear()


def read_hosts(hosts: Store, host: str | None = None) -> Iterator[tuple[str, HostStats]]:
    """The host table's entries, host by host in key order (reversed host), as ``(host,
    stats)``; only *host*'s with *host*. Rows with no nutchy entry (a host row of Nutch's
    alone) are left out."""
    if not hosts.exists():
        raise HostDbError(
            f"there is no host database {hosts.table_name!r}: run 'nutchy updatehostdb' first"
        )
    if host is not None:
        key = reverse_host(host.strip().lower()).encode("utf-8")
        cells = hosts.get(key, [b"mtdt"])
        if cells and any(is_nutchy_column(c) for c in cells):
            yield host.strip().lower(), HostStats.from_cells(cells)
        return
    for key, cells in hosts.scan(Scan(columns=[b"mtdt"])):
        if any(is_nutchy_column(c) for c in cells):
            yield unreverse_host(key.decode("utf-8", "replace")), HostStats.from_cells(cells)


def host_gate(settings: BaseSettings) -> HostGate:
    """The :class:`~nutchy.core.hostdb.HostGate` of the settings (docs/hostdb.md)."""
    delay = _settings.get_float(settings, "NUTCH_GENERATE_HOSTDB_DELAY")
    if delay < 0:
        raise ConfigError(f"NUTCH_GENERATE_HOSTDB_DELAY must be >= 0, got {delay!r}")
    rate = _settings.get_float(settings, "NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE")
    if not (rate == -1 or 0 <= rate <= 1):
        raise ConfigError(
            f"NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE must be -1 (off) or in [0, 1], got {rate!r}"
        )
    return HostGate(
        max_errors=_settings.get_int(settings, "NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE", -1),
        max_error_rate=rate,
        min_fetched=_settings.get_int(settings, "NUTCH_GENERATE_HOSTDB_MIN_FETCHED", 1),
        delay=int(delay * 1000),
    )


def suspended_hosts(hosts: Store, gate: HostGate, *, now: int) -> frozenset[str]:
    """The hosts *gate* leaves out at *now* (ms), by the host table *hosts*; none when the gate
    is off or there is no host table."""
    if not gate.enabled or not hosts.exists():
        return frozenset()
    return frozenset(host for host, stats in read_hosts(hosts) if gate.suspends(stats, now=now))


#: The columns of ``nutchy readhostdb``'s table, tab-separated.
HEADER: Final = (
    "host\trows\tfetched\terrors\terror_rate\t404_rate\tmean_rt_ms\trobots_denied"
    "\tconsecutive_errors\tlast_fetch\tby_status\trobots_status"
)


def host_line(host: str, stats: HostStats) -> str:
    """One host as a line of :data:`HEADER`'s columns."""
    mean = stats.mean_response_time
    by_status = ",".join(f"{name}={n}" for name, n in stats.status_names().items())
    return "\t".join(
        (
            printable(host),
            str(stats.rows),
            str(stats.fetched),
            str(stats.errors),
            f"{stats.error_rate:.3f}",
            f"{stats.not_found_rate:.3f}",
            "-" if mean is None else str(mean),
            str(stats.robots_denied),
            str(stats.consecutive_errors),
            _when(stats.last_fetch) if stats.last_fetch else "-",
            by_status,
            str(stats.robots_status) if stats.robots_status else "-",
        )
    )


def host_record(host: str, stats: HostStats) -> dict[str, object]:
    """One host as a JSON object (``readhostdb -json``)."""
    return {
        "host": host,
        "rows": stats.rows,
        "by_status": stats.status_names(),
        "fetched": stats.fetched,
        "errors": stats.errors,
        "error_rate": round(stats.error_rate, 6),
        "not_found": stats.not_found,
        "not_found_rate": round(stats.not_found_rate, 6),
        "robots_denied": stats.robots_denied,
        "robots_status": stats.robots_status or None,
        "robots_fetched": stats.robots_fetched or None,
        "mean_response_time_ms": stats.mean_response_time,
        "consecutive_errors": stats.consecutive_errors,
        "last_fetch": stats.last_fetch or None,
        "last_success": stats.last_success or None,
        "updated": stats.updated,
    }
