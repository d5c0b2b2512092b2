"""Item pipelines of nutchy: parse during the fetch (``fetcher.parse``), and updatedb.

With ``NUTCH_FETCHER_PARSE`` on, the ``nutch`` spider yields a :class:`FetchedPage` for every
successful fetch, and :class:`NutchParsePipeline` parses it with the code of ``nutchy parse``
(:mod:`nutchy.core.parse`), writes the parse columns and returns the parsed page as a
:class:`~nutchy.items.PageItem`, which the project's own pipelines and the feed exports get.
Pages are parsed in a thread, never on the reactor, and written in batches of
``NUTCH_FETCHER_FLUSH_SIZE``.

With ``NUTCH_FETCHER_UPDATEDB`` on, :class:`NutchDbUpdatePipeline` runs the code of ``nutchy
updatedb`` (:mod:`nutchy.jobs.updatedb`) in a thread on every batch this crawl fetched whole,
once its last row is fetched and parsed. A batch fetched only in part (a time limit, one
partition of several) is left for ``nutchy updatedb ID``: updating it would take the generate
mark off rows that still wait for their fetch.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from nutchy import _pageparse
from nutchy._fetch import batch_fetched, batch_parsed, batch_shares
from nutchy._pageparse import PageParser
from nutchy.exceptions import StoreError
from nutchy.items import PageContentItem, PageItem
from nutchy.jobs._batches import ALL_BATCHES
from nutchy.jobs._cycle import CUT_STATS, cut_summary, finish_batch, update_config
from nutchy.jobs._settings import get_bool
from nutchy.jobs.updatedb import parsed_ahead
from nutchy.store import open_table
from nutchy.store.table import WebTable

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector

    from nutchy._parsework import ParseProcess
    from nutchy.core.fetch import FetchEntry
    from nutchy.outcomes import OutcomeWriter

logger = logging.getLogger(__name__)

__all__ = ["FetchedPage", "NutchDbUpdatePipeline", "NutchParsePipeline", "PageParser"]

#: Pages parsed together at most. The pages of a parse, with their pickles on the way to the
#: parse process and their items on the way back, are held in the fetch's process and in the
#: parse process at once: 32 pages of a documentation site are about 1 MB, where the pages that
#: waited while a parse was under way reached 140 (3.7 MB) on the 2,000-page site of
#: benchmarks/bench_crawl.py.
PARSE_CHUNK = 32


class FetchedPage(_pageparse.FetchedPage):
    """A page the ``nutch`` spider fetched successfully, on its way to the parse pipeline, which
    returns a :class:`~nutchy.items.PageItem` in its place. Pipelines ordered before it (below
    100) see this; its *content* is bytes and is left out of its repr. Its fields are those of
    :class:`nutchy._pageparse.FetchedPage`, which the parse process takes (that module imports
    no Scrapy)."""

    #: The fetch's outcome writer and the page's entry, through which the parse pipeline takes
    #: the page's outcome for the parse process to write (:meth:`OutcomeWriter.claim`); not a
    #: field, never sent to the parse process.
    handover: tuple[OutcomeWriter, FetchEntry] | None = None


class NutchParsePipeline:
    """Parses every :class:`FetchedPage`, writes title, text, outlinks, signature, parse status
    and the parse mark (see docs/parse.md), and returns the page as a
    :class:`~nutchy.items.PageItem` (:class:`~nutchy.items.PageContentItem` with *item_content*),
    so that the pipelines after it and the feed exports see the parsed page. Other items pass
    through untouched.

    Parsing never runs on the reactor: with *start_process* (``NUTCH_FETCHER_PARSE_PROCESS``,
    which starts a :class:`~nutchy._parsework.ParseProcess`), in a process of its own, on another
    core, started with the pipeline for the ``nutch`` spider (*start_now*) and at the first
    page for another; else in a thread of this process. The pages that arrive while a parse is under way are parsed
    together in the next one, with one read of their rows (for the signature move and the
    score). The writes are buffered, and written every *flush_size* pages, when a batch has been
    fetched, and on close (by :class:`PageParser`).
    """

    def __init__(
        self,
        parser: PageParser,
        *,
        stats: StatsCollector,
        start_process: Callable[[], ParseProcess] | None = None,
        start_now: bool = False,
        signals: SignalManager | None = None,
    ) -> None:
        self.parser = parser
        self.table = parser.table
        self.stats = stats
        #: starts the parse process: with the pipeline when *start_now* (the ``nutch``
        #: spider's crawl: the process's start, its imports and the table's opening, half a
        #: second or so of CPU, then runs on the other core while the fetch starts, rather than
        #: between the first page and its parse, which every crawl's first round waited for),
        #: else at the first page (another spider of the project may never yield one)
        self.start_process = start_process
        self.process: ParseProcess | None = None
        if start_process is not None and start_now:
            self.process = start_process()
        self._waiting: list[tuple[FetchedPage, Deferred[PageItem]]] = []
        self._flushes: list[Deferred[None]] = []
        #: parses under way
        self._working = 0
        self._counting = threading.Lock()
        self._store_error_logged = False
        #: the fetch's outcome writer, once a page's outcome was taken from it, and what the
        #: parse process said of the outcomes it got (rows written, rows not), not told it yet
        self._outcomes: OutcomeWriter | None = None
        self._outcome_answers: list[tuple[list[str], list[str]]] = []
        #: where :data:`~nutchy._fetch.batch_shares` is sent
        self.signals = signals
        #: whether the parse process keeps updatedb's shares of the pages: when something
        #: listens for them (known at the first parse, once every component is connected)
        self._shares: bool | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "NUTCH_FETCHER_PARSE"):
            # Without a message: turned off by its setting, which is no reason for a warning
            # (Scrapy's list of enabled pipelines shows it is off).
            raise NotConfigured
        assert crawler.stats is not None
        start_process = None
        if get_bool(settings, "NUTCH_FETCHER_PARSE_PROCESS"):
            from nutchy._parsework import ParseProcess

            start_process = functools.partial(ParseProcess.start, settings)
        from nutchy.spiders import NutchSpider

        pipeline = cls(
            PageParser.from_settings(settings),
            stats=crawler.stats,
            start_process=start_process,
            start_now=crawler.spidercls is not None and issubclass(crawler.spidercls, NutchSpider),
            signals=crawler.signals,
        )
        crawler.signals.connect(pipeline.batch_fetched, signal=batch_fetched)
        return pipeline

    async def batch_fetched(self, batch_id: str, complete: bool) -> None:
        """The batch's last page has come: write what is still held (and the fetch outcomes the
        parse process could not write, before the batch's updatedb), then send the shares the
        parse process kept (:data:`~nutchy._fetch.batch_shares`)."""
        await self._flush()
        if self._outcomes is not None:
            await self._outcomes.drain()
        if self._shares and self.process is not None and self.signals is not None:
            try:
                shares = await run_in_thread(self.process.shares, batch_id)
            except (OSError, EOFError, RuntimeError) as exc:  # updatedb reads the pages
                logger.warning("Cannot take updatedb's shares from the parse process: %s", exc)
                return
            await self.signals.send_catch_log_async(batch_shares, batch_id=batch_id, shares=shares)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, FetchedPage):
            return item
        self._take_outcome(item)
        parsed: Deferred[PageItem] = Deferred()
        self._waiting.append((item, parsed))
        self._work()
        return await maybe_deferred_to_future(parsed)

    def _take_outcome(self, page: FetchedPage) -> None:
        """Have the parse process write *page*'s fetch outcome with its parse, when the outcome
        still waits in the fetch's buffer (:mod:`nutchy.outcomes`)."""
        if page.handover is None or self.start_process is None or page.outcome is not None:
            return
        writer, entry = page.handover
        page.outcome = writer.claim(entry, self._write_outcomes)
        if page.outcome is not None:
            self._outcomes = writer

    def _write_outcomes(self) -> None:
        """Have the parse process write what it holds, unless a write is asked already (the
        fetch's outcome writer calls this while outcomes it gave wait: :meth:`OutcomeWriter.claim`).
        A failure is the parse's, and its outcomes come back to the fetch (:meth:`_parse`)."""
        if not self._flushes:
            deferred_from_coro(self._flush()).addErrback(lambda _: None)

    async def close_spider(self) -> None:
        await self._flush()
        if self.process is not None:
            await run_in_thread(self.process.close)
        await run_in_thread(self.table.close)

    async def _flush(self) -> None:
        """Write the parses held, after the pages waiting are parsed."""
        flushed: Deferred[None] = Deferred()
        self._flushes.append(flushed)
        self._work()
        await maybe_deferred_to_future(flushed)

    def _work(self) -> None:
        """Send the next pages waiting (and the flushes asked) to a parse, unless as many
        parses as may run at once are under way: one in a thread; two in the parse process, so
        that the next pages are already in its pipe when it answers, rather than sent once this
        process has read the answer and handed the items on to Scrapy, which would leave it
        idle meanwhile."""
        depth = 1 if self.process is None else 2
        while (self._waiting or self._flushes) and self._working < depth:
            waiting, flushes = self._take()
            self._working += 1
            deferred_from_coro(self._parse(waiting, flushes))

    async def _parse(
        self, waiting: list[tuple[FetchedPage, Deferred[PageItem]]], flushes: list[Deferred[None]]
    ) -> None:
        """Parse the pages of *waiting*, and write when *flushes* ask or when enough are held;
        then tell each waiter, and send what waits meanwhile."""
        try:
            pages = [page for page, _ in waiting]
            try:
                items = await run_in_thread(self._process, pages, bool(flushes))
            except Exception as exc:  # noqa: BLE001 - each waiter gets it and raises it
                # A bug, not the store (whose errors the parser counts): each item fails with
                # it, and Scrapy logs it. The fetch writes the outcomes the parse process has
                # not said it wrote (it may be gone).
                self._settle_outcomes(failed=True)
                for _, parsed in waiting:
                    parsed.errback(exc)
                for flushed in flushes:
                    flushed.errback(exc)
                return
            self._settle_outcomes()
            for (_, parsed), item in zip(waiting, items, strict=True):
                parsed.callback(item)
            for flushed in flushes:
                flushed.callback(None)
        finally:
            self._working -= 1
            self._work()

    def _take(self) -> tuple[list[tuple[FetchedPage, Deferred[PageItem]]], list[Deferred[None]]]:
        """The next pages to parse (the first :data:`PARSE_CHUNK` waiting), and the flushes
        that wait for them: every flush asked for once no page waits after these, else none."""
        waiting, self._waiting = self._waiting[:PARSE_CHUNK], self._waiting[PARSE_CHUNK:]
        if self._waiting:
            return waiting, []  # the flushes are made with the last pages waiting
        flushes, self._flushes = self._flushes, []
        return waiting, flushes

    def _process(self, pages: list[FetchedPage], write: bool) -> list[PageItem]:
        """Parse *pages* and return their items, writing as :meth:`PageParser.process` does, in
        the parse process or here (in a thread); count what was done."""
        if self.process is None and self.start_process is not None and pages:
            self.process = self.start_process()
        outcomes = None
        if self.process is not None:
            if self._shares is None:
                self._shares = (
                    self.parser.shares is not None
                    and self.signals is not None
                    and _listened(self.signals, batch_shares)
                )
            fields, stats, error, outcomes = self.process.parse(pages, write, shares=self._shares)
        else:
            fields = self.parser.process(pages, write)
            stats, error = self.parser.take()
        kind = PageContentItem if self.parser.item_content else PageItem
        items = [kind(values) for values in fields]
        with self._counting:  # two parses may end at once, each in a thread
            self._count(stats, error)
            if outcomes is not None and (outcomes[0] or outcomes[1]):
                self._outcome_answers.append(outcomes)
        return items

    def _settle_outcomes(self, *, failed: bool = False) -> None:
        """Tell the fetch's outcome writer (on the reactor) which of the outcomes the parse
        process got it wrote, and give it back the others (every one not written yet when
        *failed*: a parse failed, and the process may be gone)."""
        writer = self._outcomes
        if writer is None:
            return
        with self._counting:
            answers, self._outcome_answers = self._outcome_answers, []
        for written, not_written in answers:
            writer.confirm(written)
            if not_written:
                writer.give_back(not_written)
        if failed:
            writer.give_back()

    def _count(self, stats: dict[str, int], error: str | None) -> None:
        """Count *stats*, and say the first store error."""
        for key, n in stats.items():
            self.stats.inc_value(key, n)
        if error is not None and not self._store_error_logged:
            self._store_error_logged = True
            count, _, message = error.partition(" ")
            logger.error(
                "Cannot write the parse of %(n)s pages (left unparsed, for nutchy parse ID"
                " -resume; the next are counted in nutch/parse/not_written): %(error)s",
                {"n": count, "error": message},
            )


class NutchDbUpdatePipeline:
    """Runs updatedb on each batch the crawl fetched whole (see the module docstring).

    It sees no items: the scheduler tells it, through :data:`~nutchy._fetch.batch_parsed`, when a
    batch is fetched and parsed. It first parses what the fetch did not, as ``nutchy parse ID
    -resume`` does: the whole batch with ``NUTCH_FETCHER_PARSE`` off (Nutch's ``bin/crawl`` runs
    parse between fetch and updatedb), and otherwise the pages a crawl that was killed fetched
    without writing their parse, which a resumed fetch (``-a resume=true``) does not fetch again:
    updatedb would take their marks off unparsed. With every page parsed during the fetch that
    is one read of the batch's markers.
    """

    def __init__(self, settings: BaseSettings, stats: StatsCollector) -> None:
        self.settings = settings
        self.stats = stats
        update_config(settings, None)  # a bad setting fails now, not after the first batch
        self.table: WebTable | None = None
        #: the stats of pages cut short, as they were when the last batch was updated
        self._cut_before = dict.fromkeys(CUT_STATS, 0)
        #: the last batch's shares, kept by the parse process (:meth:`batch_shares`)
        self._shares: tuple[str, list[Any]] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "NUTCH_FETCHER_UPDATEDB"):
            # nutchy crawl's fetch children run with it off: no warning (see above).
            raise NotConfigured
        assert crawler.stats is not None
        pipeline = cls(settings, crawler.stats)
        crawler.signals.connect(pipeline.batch_parsed, signal=batch_parsed)
        crawler.signals.connect(pipeline.batch_shares, signal=batch_shares)
        return pipeline

    def batch_shares(self, batch_id: str, shares: list[Any]) -> None:
        """Keep the shares the parse process kept of *batch_id*'s pages, for its updatedb
        (:func:`~nutchy.jobs.updatedb.parsed_ahead`)."""
        self._shares = (batch_id, shares)

    def process_item(self, item: Any) -> Any:
        return item

    async def close_spider(self) -> None:
        if self.table is not None:
            await run_in_thread(self.table.close)

    async def batch_parsed(self, batch_id: str, complete: bool) -> None:
        if not complete:
            return
        try:
            await run_in_thread(self._update, batch_id)
        except StoreError as exc:
            self.stats.inc_value("nutch/updatedb/failed")
            logger.error(
                "Cannot update batch %(batch)s: %(error)s. Once the table can be reached:"
                " nutchy updatedb %(batch)s",
                {"batch": batch_id, "error": exc},
            )
            raise  # the scheduler ends the crawl (nutch_update_failed)

    def _update(self, batch_id: str) -> None:
        """Parse (when the fetch did not) and update the batch (in a thread)."""
        batch = None if batch_id == ALL_BATCHES else batch_id
        started = time.monotonic()
        if self.table is None:
            self.table = open_table(self.settings)
        self.table.checkpoint()  # the fetch's writes, copied into the file beside updatedb
        ahead = None
        if self._shares is not None:
            shared, taken = self._shares
            self._shares = None
            if shared == batch_id:
                ahead = parsed_ahead(batch_id, taken)
        parsed, counts = finish_batch(self.table, self.settings, batch, now=_now_ms(), ahead=ahead)
        if parsed is not None:
            self.stats.inc_value("nutch/parse/parsed", parsed.parsed)
        for name in ("batch_pages", "existing_targets", "new_rows", "not_added"):
            self.stats.inc_value(f"nutch/updatedb/{name}", getattr(counts, name))
        if parsed is not None:
            for stat, count in (
                ("nutch/parse/truncated", parsed.truncated_parsed),
                ("nutch/parse/skipped/truncated", parsed.truncated),
                ("nutch/parse/outlinks_cut", parsed.outlinks_cut),
            ):
                if count:
                    self.stats.inc_value(stat, count)
        early = ""
        if counts.read_ahead:
            early = f" ({counts.read_ahead} pages updated from what the parse process kept)"
        logger.info(
            "Updated batch %(batch)s in %(secs).1f s: %(pages)d pages, %(known)d known and"
            " %(new)d new outlink targets%(ahead)s%(cut)s",
            {
                "batch": batch_id,
                "secs": time.monotonic() - started,
                "pages": counts.batch_pages,
                "known": counts.existing_targets,
                "new": counts.new_rows,
                "ahead": early,
                "cut": self._cut_since_last_batch(),
            },
        )

    def _cut_since_last_batch(self) -> str:
        """The pages of this batch cut short, as ``; 2 truncated (2 parsed up to the cut), 1
        with outlinks cut`` (empty when none was)."""
        now = {name: int(self.stats.get_value(name, 0) or 0) for name in CUT_STATS}
        delta = {name: now[name] - self._cut_before[name] for name in CUT_STATS}
        self._cut_before = now
        return cut_summary(
            delta["nutch/fetch/truncated"],
            delta["nutch/parse/truncated"],
            delta["nutch/parse/skipped/truncated"],
            delta["nutch/parse/outlinks_cut"],
        )


def _listened(signals: SignalManager, signal: object) -> bool:
    """Whether a handler is connected to *signal* on *signals* (Scrapy's signal manager connects
    them with PyDispatcher, with its sender)."""
    from pydispatch import dispatcher  # type: ignore[import-untyped]

    return any(
        True for _ in dispatcher.liveReceivers(dispatcher.getAllReceivers(signals.sender, signal))
    )


def _now_ms() -> int:
    return int(time.time() * 1000)
