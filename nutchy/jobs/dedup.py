"""The dedup job: mark the pages whose content another page has too (``nutchy dedup``).

One scan of the table reads five cells of each row (``f:st``, ``p:sig``, ``s:s``, ``f:ts``,
``mtdt:_dup_``) and turns every fetched page with a signature into an entry of
:mod:`nutchy.core.dedup`. The entries are sorted by an external merge sort: at most
*sort_rows* of them are held in memory, sorted, and spilled to a temporary file as a sorted run;
:func:`heapq.merge` then reads the runs back together, a block of each at a time. The merged
stream comes group by group, best page first, so :func:`~nutchy.core.dedup.decide` holds one
entry per group, and the rows to change are written a chunk at a time. Memory is bounded by
*sort_rows* entries (about 300 bytes each) whatever the table holds: nothing keeps every
signature in memory, on either store. The temporary files hold about 100 bytes per page and
are deleted at the end.

Each change is written with :meth:`~nutchy.store.table.WebTable.modify`, which reads the row's
status and fetch time again (two cells of the embedded store's main record): a row whose status
or fetch time changed since the scan was fetched meanwhile (a fetch writes both, and a new
signature only comes with a fetch) and is left alone, so a dedup running beside a crawl never
overwrites what the crawl wrote.
"""

from __future__ import annotations

import heapq
import logging
import os
import pickle
import struct
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nutchy.core.dedup import (
    CANDIDATES,
    GROUP_MODES,
    Decision,
    DedupCounts,
    Entry,
    decide,
    entry,
    parse_compare_order,
)
from nutchy.core.status import Metadata
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError
from nutchy.jobs._settings import get_choice, get_int
from nutchy.store.base import Scan
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import WebTable

__all__ = ["DedupOptions", "DedupResult", "SortStats", "dedup", "external_sort"]

logger = logging.getLogger(__name__)

_DUP_COLUMN = b"mtdt:" + Metadata.DUPLICATE_OF.encode()
#: The cells the scan reads (with ``mtdt:_dup_``), decoded as schema.py's codecs do.
_COLUMNS = (b"f:st", b"p:sig", b"s:s", b"f:ts")
_INT, _LONG, _FLOAT = struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">f")
#: What a change reads of its row again before it writes: a fetch since the scan changed them.
_CHECK_FIELDS = ("status", "fetch_time")
#: Entries per pickled block of a run: what the merge holds of each run at a time.
_BLOCK = 2048


@dataclass(frozen=True, slots=True)
class DedupOptions:
    """How ``nutchy dedup`` runs: the compare *order* (``deduplication.compare.order``), the
    *group_mode* (``deduplication.group.mode``) and *sort_rows*, the entries held in memory
    before a sorted run is spilled to disk."""

    order: tuple[str, ...] = ("score", "urlLength", "fetchTime")
    group_mode: str = "none"
    sort_rows: int = 200_000

    def __post_init__(self) -> None:
        if self.group_mode not in GROUP_MODES:
            raise ValueError(f"'group_mode' must be one of {GROUP_MODES}, got {self.group_mode!r}")
        if self.sort_rows < 1:
            raise ValueError(f"'sort_rows' must be >= 1, got {self.sort_rows!r}")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DedupOptions:
        name = "NUTCH_DEDUPLICATION_COMPARE_ORDER"
        try:
            order = parse_compare_order(str(settings.get(name)))
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        return cls(
            order=order,
            group_mode=get_choice(settings, "NUTCH_DEDUPLICATION_GROUP_MODE", GROUP_MODES),
            sort_rows=get_int(settings, "NUTCH_DEDUPLICATION_SORT_ROWS", minimum=1),
        )


@dataclass(slots=True)
class SortStats:
    """What :func:`external_sort` spilled: sorted *runs* written, of *spilled_bytes* in all."""

    runs: int = 0
    spilled_bytes: int = 0


def _spill(items: list[Entry], folder: str, stats: SortStats) -> str:
    """Write sorted *items* to a new file of *folder*, in pickled blocks; return its path."""
    fd, path = tempfile.mkstemp(prefix="run-", dir=folder)
    with os.fdopen(fd, "wb") as out:
        for start in range(0, len(items), _BLOCK):
            pickle.dump(items[start : start + _BLOCK], out, protocol=pickle.HIGHEST_PROTOCOL)
        stats.runs += 1
        stats.spilled_bytes += out.tell()
    return path


def _read_run(path: str) -> Iterator[Entry]:
    with open(path, "rb") as run:
        while True:
            try:
                block: list[Entry] = pickle.load(run)  # our own file, written above
            except EOFError:
                return
            yield from block


def external_sort(
    items: Iterable[Entry],
    *,
    run_size: int,
    folder: str | None = None,
    stats: SortStats | None = None,
) -> Iterator[Entry]:
    """*items* in sorted order, holding at most *run_size* of them in memory: sorted runs of
    *run_size* are spilled to files in *folder* (the system's temporary folder by default),
    then merged; *stats*, when given, counts them. Items must be picklable and all different.

    >>> list(external_sort([(3,), (1,), (2,), (0,)], run_size=3))
    [(0,), (1,), (2,), (3,)]
    """
    stats = SortStats() if stats is None else stats
    with tempfile.TemporaryDirectory(prefix="nutchy-sort-", dir=folder) as tmp:
        runs: list[str] = []
        buffer: list[Entry] = []
        for item in items:
            buffer.append(item)
            if len(buffer) >= run_size:
                buffer.sort()
                runs.append(_spill(buffer, tmp, stats))
                buffer = []
        buffer.sort()
        if not runs:
            yield from buffer
            return
        if buffer:
            runs.append(_spill(buffer, tmp, stats))
        del buffer
        yield from heapq.merge(*(_read_run(path) for path in runs))


def _entries(
    table: WebTable, options: DedupOptions, progress: Progress | None, skipped: list[int]
) -> Iterator[Entry]:
    """The entry of every fetched page with a signature, in key order."""
    scan = Scan(columns=[*_COLUMNS, _DUP_COLUMN])
    order, mode = options.order, options.group_mode
    advance = None if progress is None else progress.advance
    for raw, cells in table.store.scan(scan, table.read_limit):
        if advance is not None:
            advance()
        signature = cells.get(b"p:sig")
        if not signature:
            continue
        status = cells.get(b"f:st")
        try:
            # The codecs of schema.py, inlined: this loop reads every row of the table.
            if status is None or _INT.unpack(status)[0] not in CANDIDATES:
                continue
            score = cells.get(b"s:s")
            fetch_time = cells.get(b"f:ts")
            dup = cells.get(_DUP_COLUMN)
            yield entry(
                raw.decode("utf-8"),
                signature,
                0.0 if score is None else _FLOAT.unpack(score)[0],
                0 if fetch_time is None else _LONG.unpack(fetch_time)[0],
                _INT.unpack(status)[0],
                None if dup is None else dup.decode("utf-8"),
                order=order,
                group_mode=mode,
            )
        except (struct.error, UnicodeDecodeError) as exc:
            skipped[0] += 1
            logger.warning("Skipped row %r: a cell does not decode: %s", raw, exc)


@dataclass(slots=True)
class DedupResult:
    """What :func:`dedup` did: the counts of :class:`~nutchy.core.dedup.DedupCounts`, rows
    *written*, rows *changed_meanwhile* (left alone: a fetch changed them after the scan), and
    rows *skipped* because a cell did not decode; *sort* says what the sort spilled to disk."""

    counts: DedupCounts
    written: int = 0
    changed_meanwhile: int = 0
    skipped: int = 0
    sort: SortStats = field(default_factory=SortStats)


def dedup(
    table: WebTable,
    options: DedupOptions | None = None,
    *,
    progress: Progress | None = None,
    folder: str | None = None,
) -> DedupResult:
    """Mark the duplicates of *table* (see the module docstring); *folder* holds the sort's
    temporary files (the system's temporary folder by default)."""
    options = DedupOptions() if options is None else options
    result = DedupResult(DedupCounts())
    skipped = [0]
    pending: dict[str, Decision] = {}

    def change(key: str, page: WebPage | None) -> RowUpdate | None:
        decision = pending[key]
        if page is None or (page.status, page.fetch_time) != (decision.was, decision.fetch_time):
            result.changed_meanwhile += 1  # fetched (or deleted) since the scan: leave it
            return None
        dup = None if decision.duplicate_of is None else decision.duplicate_of.encode("utf-8")
        fields = {} if page.status == decision.status else {"status": decision.status}
        return build_update(key, fields, {"metadata": {Metadata.DUPLICATE_OF: dup}})

    def flush() -> None:
        if pending:
            result.written += table.modify(list(pending), _CHECK_FIELDS, change)
            pending.clear()

    entries = _entries(table, options, progress, skipped)
    ordered = external_sort(entries, run_size=options.sort_rows, folder=folder, stats=result.sort)
    for decision in decide(ordered, result.counts):
        pending[decision.key] = decision
        if len(pending) >= table.write_limit:
            flush()
    flush()
    result.skipped = skipped[0]
    return result
