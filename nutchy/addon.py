"""The add-on that turns nutchy on in a Scrapy project: ``ADDONS = {"nutchy.NutchAddon": 0}``.

It registers every ``NUTCH_*`` default (at the ``default`` priority, so the project and ``-s``
override them), makes the ``nutch`` spider available, and switches the fetch on: nutchy's
scheduler and its downloader middlewares (:mod:`nutchy.compression`'s in the place of Scrapy's
``HttpCompressionMiddleware``, and the download handlers of http and https only), the parse
pipeline (``NUTCH_FETCHER_PARSE``) and the updatedb pipeline (``NUTCH_FETCHER_UPDATEDB``). It
does all of it before the crawler exists too (``update_pre_crawler_settings``), so that
``scrapy list`` and ``scrapy settings --get``,
which nutchy's commands make apply it (:mod:`nutchy.commands`), show the spider and the
settings as the crawl has them. The ``nutch_sitemap`` spider (:mod:`nutchy.sitemaps`) comes
with it. For the ``nutch`` spider it then checks the final settings
(:func:`nutchy._checks.check_components`): a ``SCHEDULER``, a downloader middleware order or a
pipeline turned off that would leave the spider crawling nothing stops the crawl at start.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from nutchy._checks import NUTCH_SCHEDULER, check_components, check_table, refuse_to_start
from nutchy.agent import apply_agent, contact_warning
from nutchy.exceptions import ConfigError, TableMissing

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["NutchAddon"]

logger = logging.getLogger(__name__)

# Downloader middleware orders, relative to Scrapy's DOWNLOADER_MIDDLEWARES_BASE:
#: Outside every other middleware (Scrapy's first, OffsiteMiddleware, is 50): it sees each request
#: of a row first, and its final response or exception last, whatever the others did with it.
FETCH_MIDDLEWARE_ORDER = 40
#: After OffsiteMiddleware (50) and before Scrapy's own RobotsTxtMiddleware (100), which the
#: requests of rows skip (``dont_obey_robotstxt``): robots.txt is checked once the request is
#: known to go out, before any header, cookie or proxy work is done for it.
ROBOTS_MIDDLEWARE_ORDER = 90
#: Scrapy's HttpCompressionMiddleware's place, taken by nutchy's (nutchy.compression).
COMPRESSION_MIDDLEWARE_ORDER = 590
#: Download handlers the add-on turns off: the fetch downloads http and https URLs only.
UNUSED_DOWNLOAD_HANDLERS = ("data", "file", "ftp", "s3")
#: Item pipelines: parse first (a project's own pipelines at the usual 300 then see parsed pages).
PARSE_PIPELINE_ORDER = 100
#: The updatedb pipeline sees no items (it acts when a batch ends); it sits after the others.
UPDATEDB_PIPELINE_ORDER = 900
#: The index pipeline sees no items either (it acts once a batch is updated).
INDEX_PIPELINE_ORDER = 950


class NutchAddon:
    """Scrapy add-on of nutchy. *spidercls* is the crawler's spider class (``None`` before a
    crawler exists): the checks of :func:`~nutchy._checks.check_components` are made for the
    ``nutch`` spider only."""

    def __init__(self, spidercls: type | None = None, spider: object = None) -> None:
        self.spidercls = spidercls
        #: The crawler's spider, whose ``fetch_job`` says which table and batch to check.
        self.spider = spider

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.spidercls, getattr(crawler, "spider", None))

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        # Before the spider loader exists: `scrapy crawl nutch` finds nutchy's spider.
        settings.add_to_list("SPIDER_MODULES", "nutchy.spiders")
        settings.add_to_list("SPIDER_MODULES", "nutchy.sitemaps")  # the nutch_sitemap spider
        # And the rest, so that what `scrapy settings --get` shows is what the crawl gets; the
        # crawler's add-on does it again on its own copy of the settings (a no-op, unless the
        # spider's custom_settings changed what it sets).
        cls().update_settings(settings)

    def update_settings(self, settings: BaseSettings) -> None:
        from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware

        from nutchy.compression import NutchHttpCompressionMiddleware
        from nutchy.history import NutchHistoryExtension
        from nutchy.index.pipeline import NutchIndexPipeline
        from nutchy.metrics import NutchMetricsExtension
        from nutchy.middlewares import NutchFetchMiddleware
        from nutchy.pipelines import NutchDbUpdatePipeline, NutchParsePipeline
        from nutchy.robots import NutchRobotsMiddleware
        from nutchy.warc import NutchWarcExtension

        settings.setmodule("nutchy.default_settings", priority="default")
        settings.set("SCHEDULER", NUTCH_SCHEDULER, priority="addon")
        try:
            apply_agent(settings)
        except ConfigError as exc:
            if self.spidercls is not None and _is_nutch_spider(self.spidercls):
                refuse_to_start(exc)
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NutchFetchMiddleware, FETCH_MIDDLEWARE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NutchRobotsMiddleware, ROBOTS_MIDDLEWARE_ORDER
        )
        # Bodies decoded up to the content limit, and one that does not decode recorded.
        # (A project that lists Scrapy's keeps it; nutchy's then finds the bodies decoded.)
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", HttpCompressionMiddleware, None
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NutchHttpCompressionMiddleware, COMPRESSION_MIDDLEWARE_ORDER
        )
        # No file:, ftp:, s3: or data: URL is ever downloaded, whatever reaches the fetch (a
        # project may still name a handler of its own for a scheme).
        handlers = settings.getdict("DOWNLOAD_HANDLERS")
        for scheme in UNUSED_DOWNLOAD_HANDLERS:
            handlers.setdefault(scheme, None)
        settings.set(
            "DOWNLOAD_HANDLERS",
            handlers,
            priority=max(
                settings.getpriority("DOWNLOAD_HANDLERS") or 0, SETTINGS_PRIORITIES["addon"]
            ),
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NutchParsePipeline, PARSE_PIPELINE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NutchDbUpdatePipeline, UPDATEDB_PIPELINE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NutchIndexPipeline, INDEX_PIPELINE_ORDER
        )
        # Off (NotConfigured) unless NUTCH_WARC_ENABLED; warcio is imported only then.
        settings.setdefault_in_component_priority_dict("EXTENSIONS", NutchWarcExtension, 0)
        # Off (NotConfigured) unless NUTCH_METRICS_PORT is a port, or nutchy crawl asks for it.
        settings.setdefault_in_component_priority_dict("EXTENSIONS", NutchMetricsExtension, 0)
        # On for a crawl that generates its batches (no -a batch), unless NUTCH_CRAWL_HISTORY.
        settings.setdefault_in_component_priority_dict("EXTENSIONS", NutchHistoryExtension, 0)
        if self.spidercls is not None and _is_nutch_spider(self.spidercls):
            try:
                table = check_components(settings)
                job = getattr(self.spider, "fetch_job", None)
                if job is not None and settings.get("NUTCH_FRONTIER") != "redis":
                    check_table(settings, job)
            except (ConfigError, TableMissing) as exc:
                refuse_to_start(exc)
            # Where the crawl reads and writes: the first thing to know of a job run elsewhere
            # (scrapyd), and what a relative NUTCH_CRAWL_DIR became.
            logger.info("The web table: %(table)s", {"table": table})
            warning = contact_warning(settings)
            if warning and settings.getbool("NUTCH_HTTP_AGENT_CONTACT_WARNING"):
                logger.warning(warning)


def _is_nutch_spider(spidercls: type) -> bool:
    from nutchy.spiders import NutchSpider

    return issubclass(spidercls, NutchSpider)
