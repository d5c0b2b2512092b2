"""The add-on that turns nutchy on in a Scrapy project: ``ADDONS = {"nutchy.NutchAddon": 0}``.

It registers every ``NUTCH_*`` default (at the ``default`` priority, so the project and ``-s``
override them and ``scrapy settings --get`` shows them), makes the ``nutch`` spider available,
and switches the fetch on: nutchy's scheduler and its two downloader middlewares, the parse
pipeline (``NUTCH_FETCHER_PARSE``) and the updatedb pipeline (``NUTCH_FETCHER_UPDATEDB``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["NutchAddon"]

# Downloader middleware orders, relative to Scrapy's DOWNLOADER_MIDDLEWARES_BASE:
#: Outside every other middleware (Scrapy's first, OffsiteMiddleware, is 50): it sees each request
#: of a row first, and its final response or exception last, whatever the others did with it.
FETCH_MIDDLEWARE_ORDER = 40
#: After OffsiteMiddleware (50) and before Scrapy's own RobotsTxtMiddleware (100), which the
#: requests of rows skip (``dont_obey_robotstxt``): robots.txt is checked once the request is
#: known to go out, before any header, cookie or proxy work is done for it.
ROBOTS_MIDDLEWARE_ORDER = 90
#: Item pipelines: parse first (a project's own pipelines at the usual 300 then see parsed pages).
PARSE_PIPELINE_ORDER = 100
#: The updatedb pipeline sees no items (it acts when a batch ends); it sits after the others.
UPDATEDB_PIPELINE_ORDER = 900


class NutchAddon:
    """Scrapy add-on of nutchy."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        # Before the spider loader exists: `scrapy crawl nutch` finds nutchy's spider.
        settings.add_to_list("SPIDER_MODULES", "nutchy.spiders")

    def update_settings(self, settings: BaseSettings) -> None:
        from nutchy.middlewares import NutchFetchMiddleware
        from nutchy.pipelines import NutchDbUpdatePipeline, NutchParsePipeline
        from nutchy.robots import NutchRobotsMiddleware

        settings.setmodule("nutchy.default_settings", priority="default")
        settings.set("SCHEDULER", "nutchy.scheduler.NutchScheduler", priority="addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NutchFetchMiddleware, FETCH_MIDDLEWARE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NutchRobotsMiddleware, ROBOTS_MIDDLEWARE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NutchParsePipeline, PARSE_PIPELINE_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", NutchDbUpdatePipeline, UPDATEDB_PIPELINE_ORDER
        )
