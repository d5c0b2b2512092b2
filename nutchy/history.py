"""The crawl history of ``scrapy crawl nutch`` when it runs rounds itself (no ``-a batch``).

:class:`NutchHistoryExtension` appends a line to the crawl's history
(:mod:`nutchy.jobs.history`, ``NUTCH_CRAWL_HISTORY``) each time a round's batch is updated
(:data:`~nutchy._fetch.batch_updated`), as ``nutchy crawl`` does after each round: what the round
fetched by status (the difference of the crawl's ``nutch/fetch/status/…`` stats since the last
round), the URLs its generate selected, the rows its updatedb added, its seconds (``round``: from
the end of the last round, the fetch, parse and updatedb of this one), and the table's
statistics after it, from one scan in a thread. A crawl of a given batch (``-a batch``, and the
fetch children of ``nutchy crawl``, whose parent keeps the history) appends nothing.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from nutchy.exceptions import NutchError
from nutchy.jobs.history import record_round

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

__all__ = ["NutchHistoryExtension"]

logger = logging.getLogger(__name__)

_STATUS = "nutch/fetch/status/"


class NutchHistoryExtension:
    """Appends each round of a generating crawl to its history (see the module docstring);
    *settings* open the table, *stats* are the crawler's."""

    def __init__(self, settings: BaseSettings, stats: StatsCollector) -> None:
        self.settings = settings
        self.stats = stats
        self.round = 0
        self._statuses: dict[str, int] = {}
        self._new_rows = 0
        self._selected = 0
        self._started = time.monotonic()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy.exceptions import NotConfigured

        from nutchy._fetch import batch_updated
        from nutchy.jobs._settings import get_bool

        job = getattr(crawler.spider, "fetch_job", None)
        if (
            job is None
            or not job.generates
            or not get_bool(crawler.settings, "NUTCH_CRAWL_HISTORY")
        ):
            raise NotConfigured  # quietly: an argument would be logged as a warning
        assert crawler.stats is not None
        extension = cls(crawler.settings, crawler.stats)
        crawler.signals.connect(extension.batch_updated, signal=batch_updated)
        return extension

    async def batch_updated(self, batch_id: str) -> None:
        from scrapy.utils.asyncio import run_in_thread

        stats = self.stats.get_stats()
        statuses: dict[str, int] = {}
        for key, value in list(stats.items()):
            if key.startswith(_STATUS) and isinstance(value, int):
                name = key[len(_STATUS) :]
                if value - self._statuses.get(name, 0):
                    statuses[name] = value - self._statuses.get(name, 0)
                self._statuses[name] = value
        new_rows = int(stats.get("nutch/updatedb/new_rows", 0) or 0)
        added, self._new_rows = new_rows - self._new_rows, new_rows
        now = time.monotonic()
        seconds, self._started = now - self._started, now
        self.round += 1
        fetched = sum(statuses.values())
        total = stats.get("nutch/rounds/selected", 0)
        selected = total - self._selected if isinstance(total, int) else fetched
        self._selected = total if isinstance(total, int) else self._selected
        await run_in_thread(
            self._record,
            self.round,
            batch_id,
            {
                "selected": selected,
                "statuses": statuses,
                "new_rows": added,
                "seconds": {"round": seconds},
            },
        )

    def _record(self, number: int, batch_id: str, values: dict[str, Any]) -> None:
        from nutchy.store import open_table

        try:
            with open_table(self.settings) as table:
                record_round(
                    table, self.settings, number, batch_id, now=int(time.time() * 1000), **values
                )
        # The history never stops a crawl: a table gone, a crawl dir that cannot be used (a
        # relative one under scrapyd, where the table is on HBase), a full disk.
        except (NutchError, OSError) as exc:
            logger.warning("Round %d is not in the history: %s", number, exc)
