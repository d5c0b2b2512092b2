"""Item pipelines of nutchy: parse during the fetch (``fetcher.parse``), and updatedb.

With ``NUTCH_FETCHER_PARSE`` on, the ``nutch`` spider yields a :class:`FetchedPage` for every
successful fetch, and :class:`NutchParsePipeline` parses it with the code of ``nutchy parse``
(:mod:`nutchy.core.parse`) and writes the parse columns. Pages are parsed and written in a
thread, in batches of ``NUTCH_FETCHER_FLUSH_SIZE``, never on the reactor.

With ``NUTCH_FETCHER_UPDATEDB`` on, :class:`NutchDbUpdatePipeline` runs the code of ``nutchy
updatedb`` (:mod:`nutchy.jobs.updatedb`) in a thread on every batch this crawl fetched whole,
once its last row is fetched and parsed. A batch fetched only in part (a time limit, one
partition of several) is left for ``nutchy updatedb ID``: updating it would take the generate
mark off rows that still wait for their fetch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import run_in_thread

from nutchy._fetch import ALL_BATCHES, batch_fetched, batch_parsed
from nutchy.core.parse import ParseConfig, is_truncated, parse_change, parse_content
from nutchy.core.signature import Signature
from nutchy.core.status import CrawlStatus, Mark
from nutchy.core.webpage import WebPage
from nutchy.exceptions import StoreError
from nutchy.jobs._cycle import finish_batch, parse_config, signature, update_config
from nutchy.jobs._settings import get_bool, get_float, get_int
from nutchy.store import open_table
from nutchy.store.schema import build_update
from nutchy.store.table import WebTable

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["FetchedPage", "NutchDbUpdatePipeline", "NutchParsePipeline"]


@dataclass
class FetchedPage:
    """A page the ``nutch`` spider fetched successfully, on its way to the parse pipeline."""

    key: str
    url: str
    batch_id: str
    base_url: str | None
    content_type: str | None
    headers: dict[str, str] = field(repr=False)
    content: bytes = field(repr=False)
    truncated: bool = False


class NutchParsePipeline:
    """Parses every :class:`FetchedPage` and writes title, text, outlinks, signature, parse status
    and the parse mark (see docs/parse.md). Other items pass through untouched."""

    def __init__(
        self,
        table: WebTable,
        *,
        config: ParseConfig,
        signature: Signature,
        skip_truncated: bool,
        timeout: float,
        flush_size: int,
        stats: StatsCollector,
    ) -> None:
        self.table = table
        self.config = config
        self.signature = signature
        self.skip_truncated = skip_truncated
        self.timeout = timeout
        self.flush_size = flush_size
        self.stats = stats
        self.pending: list[FetchedPage] = []
        self._store_error_logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "NUTCH_FETCHER_PARSE"):
            # Without a message: turned off by its setting, which is no reason for a warning
            # (Scrapy's list of enabled pipelines shows it is off).
            raise NotConfigured
        assert crawler.stats is not None
        pipeline = cls(
            open_table(settings),
            config=parse_config(settings),
            signature=signature(settings),
            skip_truncated=get_bool(settings, "NUTCH_PARSER_SKIP_TRUNCATED"),
            timeout=get_float(settings, "NUTCH_PARSER_TIMEOUT"),
            flush_size=get_int(settings, "NUTCH_FETCHER_FLUSH_SIZE", 1),
            stats=crawler.stats,
        )
        crawler.signals.connect(pipeline.batch_fetched, signal=batch_fetched)
        return pipeline

    async def batch_fetched(self, batch_id: str, complete: bool) -> None:
        """The batch's last page has come: write what is still held."""
        await self._flush()

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, FetchedPage):
            return item
        self.pending.append(item)
        if len(self.pending) >= self.flush_size:
            await self._flush()
        return item

    async def close_spider(self) -> None:
        await self._flush()
        await run_in_thread(self.table.close)

    async def _flush(self) -> None:
        pages, self.pending = self.pending, []
        if pages:
            await run_in_thread(self._parse_and_write, pages)

    def _parse_and_write(self, pages: list[FetchedPage]) -> None:
        """Parse *pages* and write the results (in a thread). When the table cannot be read or
        written, the pages are left unparsed (``nutchy parse ID -resume`` parses those whose
        fetch was written; the others are fetched again) and the crawl goes on: whether the
        fetch can is the scheduler's to decide."""
        try:
            stored = self.table.get_many(
                [p.key for p in pages], ["signature", "prev_signature", "markers"]
            )
        except StoreError as exc:
            self._not_written(len(pages), exc)
            return
        updates = []
        for fetched in pages:
            row = stored.get(fetched.key) or WebPage(fetched.key)
            page = WebPage(
                fetched.key,
                status=CrawlStatus.FETCHED,
                base_url=fetched.base_url,
                content=fetched.content,
                content_type=fetched.content_type,
                headers=fetched.headers,
                signature=row.signature,
                prev_signature=row.prev_signature,
                metadata={"truncated-content": b"true"} if fetched.truncated else {},
                markers={**row.markers, Mark.FETCH: fetched.batch_id},
            )
            if self.skip_truncated and is_truncated(page):
                self.stats.inc_value("nutch/parse/skipped/truncated")
                continue
            config = self.config
            if self.timeout >= 0:
                config = replace(
                    config, clock=time.monotonic, deadline=time.monotonic() + self.timeout
                )
            content_type = fetched.headers.get("Content-Type") or fetched.content_type
            result = parse_content(
                fetched.base_url or fetched.url, fetched.content, content_type, config
            )
            self.stats.inc_value(f"nutch/parse/status/{result.status.major}/{result.status.minor}")
            change = parse_change(page, result, self.signature)
            updates.append(build_update(fetched.key, change.fields, change.entries, change.replace))
        try:
            self.table.write(updates)
        except StoreError as exc:
            self._not_written(len(updates), exc)
        except Exception:
            self.stats.inc_value("nutch/store/put_error", len(updates))
            logger.exception("Could not write the parse of %(n)d pages", {"n": len(updates)})

    def _not_written(self, count: int, exc: StoreError) -> None:
        """The parse of *count* pages was not written because of *exc*: counted, and said once
        (the store's message names it; a store gone away fails every write after)."""
        self.stats.inc_value("nutch/store/put_error", count)
        self.stats.inc_value("nutch/parse/not_written", count)
        if not self._store_error_logged:
            self._store_error_logged = True
            logger.error(
                "Cannot write the parse of %(n)d pages (left unparsed, for nutchy parse ID"
                " -resume; the next are counted in nutch/parse/not_written): %(error)s",
                {"n": count, "error": exc},
            )


class NutchDbUpdatePipeline:
    """Runs updatedb on each batch the crawl fetched whole (see the module docstring).

    It sees no items: the scheduler tells it, through :data:`~nutchy._fetch.batch_parsed`, when a
    batch is fetched and parsed. With ``NUTCH_FETCHER_PARSE`` off, it first parses the batch as
    ``nutchy parse`` does (Nutch's ``bin/crawl`` runs parse between fetch and updatedb).
    """

    def __init__(self, settings: BaseSettings, stats: StatsCollector) -> None:
        self.settings = settings
        self.stats = stats
        self.parse = not get_bool(settings, "NUTCH_FETCHER_PARSE")
        update_config(settings, None)  # a bad setting fails now, not after the first batch
        self.table: WebTable | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "NUTCH_FETCHER_UPDATEDB"):
            # nutchy crawl's fetch children run with it off: no warning (see above).
            raise NotConfigured
        assert crawler.stats is not None
        pipeline = cls(settings, crawler.stats)
        crawler.signals.connect(pipeline.batch_parsed, signal=batch_parsed)
        return pipeline

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
        parsed, counts = finish_batch(
            self.table, self.settings, batch, now=_now_ms(), parse=self.parse
        )
        if parsed is not None:
            self.stats.inc_value("nutch/parse/parsed", parsed.parsed)
        for name in ("batch_pages", "existing_targets", "new_rows", "not_added"):
            self.stats.inc_value(f"nutch/updatedb/{name}", getattr(counts, name))
        logger.info(
            "Updated batch %(batch)s in %(secs).1f s: %(pages)d pages, %(known)d known and"
            " %(new)d new outlink targets",
            {
                "batch": batch_id,
                "secs": time.monotonic() - started,
                "pages": counts.batch_pages,
                "known": counts.existing_targets,
                "new": counts.new_rows,
            },
        )


def _now_ms() -> int:
    return int(time.time() * 1000)
