"""The index item pipeline: ``scrapy crawl nutch`` indexes each batch once updatedb is done.

With ``NUTCH_FETCHER_INDEX`` on (and the updatedb pipeline, ``NUTCH_FETCHER_UPDATEDB``),
:class:`NutchIndexPipeline` runs the code of ``nutchy index ID`` (:mod:`nutchy.jobs.index`) in a
thread on every batch the crawl fetched whole and updated, when the scheduler sends
:data:`~nutchy._fetch.batch_updated`. It sees no items. A batch whose indexing fails is logged
with the command that indexes it later (``nutchy index ID``), counted in
``nutch/index/failed``, and the crawl goes on: the index is made from the table, which holds
everything it needs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import run_in_thread

from nutchy._fetch import batch_updated
from nutchy.exceptions import NutchError
from nutchy.index.chain import load_filters, load_writers
from nutchy.jobs._batches import ALL_BATCHES
from nutchy.jobs._settings import get_bool
from nutchy.jobs.index import index
from nutchy.store import open_table

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from nutchy.index.chain import IndexingFilters
    from nutchy.index.writers import IndexWriter
    from nutchy.store.table import WebTable

__all__ = ["NutchIndexPipeline"]

logger = logging.getLogger(__name__)


class NutchIndexPipeline:
    """Indexes each batch the crawl updated (see the module docstring). Its filters and writers
    are built when the crawl starts, so a bad setting or a missing library stops it there."""

    def __init__(
        self,
        settings: BaseSettings,
        filters: IndexingFilters,
        writers: Sequence[IndexWriter],
        stats: StatsCollector,
    ) -> None:
        self.settings = settings
        self.filters = filters
        self.writers = writers
        self.stats = stats
        self.table: WebTable | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "NUTCH_FETCHER_INDEX"):
            raise NotConfigured
        if not get_bool(settings, "NUTCH_FETCHER_UPDATEDB"):
            raise NotConfigured(
                "NUTCH_FETCHER_INDEX needs NUTCH_FETCHER_UPDATEDB: run nutchy updatedb ID,"
                " then nutchy index ID"
            )
        assert crawler.stats is not None
        pipeline = cls(settings, load_filters(settings), load_writers(settings), crawler.stats)
        crawler.signals.connect(pipeline.batch_updated, signal=batch_updated)
        return pipeline

    def process_item(self, item: Any) -> Any:
        return item

    async def close_spider(self) -> None:
        if self.table is not None:
            await run_in_thread(self.table.close)

    async def batch_updated(self, batch_id: str) -> None:
        try:
            await run_in_thread(self._index, batch_id)
        except NutchError as exc:
            self.stats.inc_value("nutch/index/failed")
            logger.error(
                "Cannot index batch %(batch)s: %(error)s. Once that is fixed: nutchy index"
                " %(batch)s",
                {"batch": batch_id, "error": exc},
            )

    def _index(self, batch_id: str) -> None:
        """Index the batch (in a thread)."""
        if self.table is None:
            self.table = open_table(self.settings)
        batch = None if batch_id == ALL_BATCHES else batch_id
        counts = index(self.table, batch, filters=self.filters, writers=self.writers)
        for name in ("indexed", "deleted", "filtered"):
            self.stats.inc_value(f"nutch/index/{name}", getattr(counts, name))
        logger.info(
            "Indexed batch %(batch)s: %(indexed)d pages indexed, %(deleted)d deleted",
            {"batch": batch_id, "indexed": counts.indexed, "deleted": counts.deleted},
        )
