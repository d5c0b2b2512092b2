"""The fetch's outcome writer: the row updates of fetched rows, written to the table in batches.

Each outcome's row update (built by :class:`~nutchy.middlewares.NutchFetchMiddleware`) is
buffered and written in a thread every ``NUTCH_FETCHER_FLUSH_SIZE`` outcomes, at least every
``NUTCH_FETCHER_FLUSH_INTERVAL`` seconds, and at the end of a batch. The scheduler stops releasing
requests while twice the flush size waits (:meth:`OutcomeWriter.backlogged`), so a crawl killed at
any moment loses at most ``2 * NUTCH_FETCHER_FLUSH_SIZE + CONCURRENT_REQUESTS`` outcomes (those
received but unwritten, and those in flight); their rows keep no fetch mark and
``-a resume=true`` fetches them again.

The outcome of a page fetched with success that the parse pipeline hands to the parse process
(:mod:`nutchy._parsework`) is written there, in the same write as the page's parse columns,
rather than here: the pipeline takes it out of the buffer (:meth:`OutcomeWriter.claim`), while it
is not being written yet, and sends it with the page. It still counts as waiting to be written
(:attr:`~OutcomeWriter.pending`; not counted written, nor acknowledged to a worker's frontier)
until the parse process says it wrote it (:meth:`OutcomeWriter.confirm`); one it could not
write, or that a parse that failed or a parse process that died leaves unconfirmed, comes back
here and is written by this writer (:meth:`OutcomeWriter.give_back`), as if it had never left.
The outcomes claimed do not hold the fetch back (:meth:`OutcomeWriter.backlogged`): what the parse
pipeline holds is bounded by its own buffer (fewer than ``NUTCH_FETCHER_FLUSH_SIZE`` held in the
parse process) and by Scrapy's, which takes no new response while
``SCRAPER_SLOT_MAX_ACTIVE_SIZE`` bytes of them wait for the pipelines. Counting them held the
fetch back some 8% of a crawl's time on the 20-host site of ``benchmarks/bench_crawl.py``. A
crawl killed at any moment thus loses at most ``2 * NUTCH_FETCHER_FLUSH_SIZE +
CONCURRENT_REQUESTS`` outcomes of its own, and those the parse pipeline held.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy.utils.asyncio import create_looping_call, run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from nutchy.exceptions import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from nutchy.core.fetch import FetchEntry
    from nutchy.store.schema import RowUpdate

__all__ = ["OutcomeWriter"]

logger = logging.getLogger(__name__)


class OutcomeWriter:
    """Writes the row updates of fetch outcomes (see the module docstring).

    *write* writes a list of row updates (``WebTable.write``; it blocks, and is called in a
    thread, one call at a time). *written* is called on the reactor thread with the entries of
    each list written, *failed* once a write failed (the writer logs it and counts its updates
    as lost); *stats* is the crawler's.
    """

    def __init__(
        self,
        write: Callable[[list[RowUpdate]], object],
        *,
        flush_size: int,
        flush_interval: float,
        stats: StatsCollector,
        written: Callable[[Sequence[FetchEntry]], None] | None = None,
        failed: Callable[[], None] | None = None,
    ) -> None:
        self._write = write
        self.flush_size = flush_size
        self.flush_interval = flush_interval
        self.stats = stats
        self._written_cb = written
        self._failed_cb = failed
        #: the outcomes buffered, by the id of their entry
        self._buffer: dict[int, tuple[RowUpdate, FetchEntry]] = {}
        #: the outcomes claimed (written by the parse process), by the key of their row, and
        #: what has the parse process write what it holds (see :meth:`claim`)
        self._claimed: dict[str, tuple[RowUpdate, FetchEntry]] = {}
        self._write_claimed: Callable[[], object] | None = None
        #: how many updates the write under way carries (0: none under way)
        self._flushing = 0
        self._flush_done: Deferred[None] | None = None
        self._loop: Any = None
        self._error_logged = False
        #: outcomes written, and outcomes that could not be
        self.written = 0
        self.lost = 0

    def start(self) -> None:
        """Write at least every ``flush_interval`` seconds from now on."""
        loop = create_looping_call(self._tick)
        loop.start(self.flush_interval, now=False)
        self._loop = loop

    def stop(self) -> None:
        """Stop the periodic writes (:meth:`drain` writes the rest)."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    @property
    def pending(self) -> int:
        """Outcomes received and not written yet (buffered or being written)."""
        return len(self._buffer) + self._flushing + len(self._claimed)

    def add(self, update: RowUpdate, entry: FetchEntry) -> None:
        """Buffer *update*, the outcome of *entry*; a full buffer is written."""
        self._buffer[id(entry)] = (update, entry)
        if len(self._buffer) >= self.flush_size:
            self.flush()

    def claim(
        self, entry: FetchEntry, write: Callable[[], object] | None = None
    ) -> RowUpdate | None:
        """Take the outcome of *entry* out of the buffer, for the parse process to write it:
        ``None`` when it is not buffered (being written already, or never added). *write* has
        the parse process write what it holds: it is called every ``flush_interval`` while
        outcomes claimed wait, so that they are written at least as often as the others (a
        worker's frontier waits for them: :meth:`nutchy.frontier.Frontier.written`)."""
        if write is not None:
            self._write_claimed = write
        held = self._buffer.pop(id(entry), None)
        if held is None or held[1].key in self._claimed:
            if held is not None:
                self._buffer[id(entry)] = held
            return None
        self._claimed[entry.key] = held
        return held[0]

    def confirm(self, keys: Sequence[str]) -> None:
        """The outcomes claimed of the rows *keys* are written."""
        entries = [held[1] for key in keys if (held := self._claimed.pop(key, None)) is not None]
        if entries:
            self._count_written(entries)

    def give_back(self, keys: Sequence[str] | None = None) -> None:
        """The outcomes claimed of the rows *keys* (``None``: every one) were not written by
        the parse process: buffer them again, and write them now."""
        for key in list(self._claimed) if keys is None else keys:
            held = self._claimed.pop(key, None)
            if held is not None:
                self._buffer[id(held[1])] = held
        self.flush()

    def backlogged(self) -> bool:
        """Whether twice the flush size waits to be written here: take no more URLs meanwhile
        (the outcomes claimed are not counted: see the module docstring)."""
        return len(self._buffer) + self._flushing >= 2 * self.flush_size

    def _tick(self) -> None:
        self.flush()
        if self._claimed and self._write_claimed is not None:
            self._write_claimed()

    def flush(self) -> None:
        """Write what is buffered, in a thread, unless a write is under way."""
        if self._flushing or not self._buffer:
            return
        updates, entries = self._take()
        self._flushing = len(updates)
        d = deferred_from_coro(run_in_thread(self._timed_write, updates))
        d.addCallbacks(self._flushed, self._flush_failed, callbackArgs=(entries,))

    def _take(self) -> tuple[list[RowUpdate], list[FetchEntry]]:
        held, self._buffer = self._buffer, {}
        return [update for update, _ in held.values()], [entry for _, entry in held.values()]

    def _timed_write(self, updates: list[RowUpdate]) -> float:
        started = time.monotonic()
        self._write(updates)
        return time.monotonic() - started

    def _flushed(self, seconds: float, entries: list[FetchEntry]) -> None:
        # the write's latency, for the metrics (nutchy.metrics)
        self.stats.inc_value("nutch/store/writes")
        self.stats.inc_value("nutch/store/write_us", round(seconds * 1e6))
        self._flushing = 0
        self._count_written(entries)
        self._after_flush()

    def _flush_failed(self, failure: Failure) -> None:
        count, self._flushing = self._flushing, 0
        self.lost += count
        self.stats.inc_value("nutch/store/put_error", count)
        if not self._error_logged:
            self._error_logged = True
            logger.error(
                "Cannot write %(n)d fetch outcomes (their rows are left for -a resume=true):"
                " %(error)s; the fetch stops taking URLs",
                {"n": count, "error": failure.getErrorMessage()},
                # a store's error names what failed; a traceback is for anything else
                exc_info=None if isinstance(failure.value, StoreError) else failure.value,
            )
        if self._failed_cb is not None:
            self._failed_cb()
        self._after_flush()

    def _count_written(self, entries: list[FetchEntry]) -> None:
        self.written += len(entries)
        self.stats.inc_value("nutch/fetch/written", len(entries))
        if self._written_cb is not None:
            self._written_cb(entries)

    def _after_flush(self) -> None:
        done, self._flush_done = self._flush_done, None
        if len(self._buffer) >= self.flush_size:
            self.flush()
        if done is not None:
            done.callback(None)

    async def drain(self) -> None:
        """Wait for the write under way, then write what is left (a failure is logged and
        counted; it does not raise). The outcomes claimed are left to the parse process, which
        writes them when the batch has been fetched (:data:`~nutchy._fetch.batch_fetched`)."""
        while self._flushing:
            self._flush_done = done = self._flush_done or _new_deferred()
            await maybe_deferred_to_future(done)
        if self._buffer:
            updates, entries = self._take()
            try:
                await run_in_thread(self._write, updates)
            except StoreError as exc:
                self.lost += len(updates)
                self.stats.inc_value("nutch/store/put_error", len(updates))
                logger.error("Cannot write the last %d fetch outcomes: %s", len(updates), exc)
            else:
                self._count_written(entries)


def _new_deferred() -> Deferred[None]:
    from twisted.internet.defer import Deferred

    return Deferred()
