"""Read sitemaps into the table: ``python -m nutchy._sitemaprun SPIDER_ARGS_JSON [SETTINGS_JSON]``.

``nutchy sitemap`` runs the ``nutch_sitemap`` spider (:mod:`nutchy.sitemaps`) in a child process,
as ``nutchy crawl`` runs its fetches, because Twisted's reactor cannot be started twice in one
process. The child reads nutchy's defaults, the Scrapy project's settings (when there is a
project), then the overrides given as a JSON object, and writes its Scrapy stats as JSON to the
file that ``NUTCHY_FETCH_REPORT`` names. It exits with 1 when the crawl could not start.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nutchy._fetchrun import _write_report
from nutchy._imports import import_download_handler
from nutchy.config import load_settings

if TYPE_CHECKING:
    from nutchy._fetchrun import FetchThread

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(args) <= 2:
        print(
            "usage: python -m nutchy._sitemaprun SPIDER_ARGS_JSON [SETTINGS_JSON]", file=sys.stderr
        )
        return 2
    from scrapy.crawler import CrawlerProcess

    from nutchy.sitemaps import NutchSitemapSpider

    import_download_handler()  # before the crawler's: Scrapy's import of it costs more
    spider_args = json.loads(args[0])
    overrides = json.loads(args[1]) if len(args) == 2 else {}
    settings = load_settings(overrides)
    settings.set("ADDONS", {**settings.getdict("ADDONS"), "nutchy.NutchAddon": 0}, "cmdline")
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(NutchSitemapSpider)
    process.crawl(crawler, **spider_args)
    process.start()
    if process.bootstrap_failed:
        return 1
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    _write_report(stats)
    return 0


def read_in_thread(
    thread: FetchThread, spider_args: Mapping[str, Any]
) -> tuple[int, dict[str, Any]]:
    """Read sitemaps as :func:`main` does, but as a second crawler of the Scrapy process of
    *thread*, the fetch of ``nutchy crawl`` in the crawl's own process, on its reactor (which
    runs for the whole crawl): no interpreter and no Scrapy to start for it. Block until its
    crawl ends; return 0 and its Scrapy stats, or 1 and what stats it has when it could not
    start, or when the fetch ended before it (a signal stops both)."""
    from nutchy.sitemaps import NutchSitemapSpider

    ended = threading.Event()
    outcome: dict[str, Any] = {"code": 1, "stats": {}}

    def start() -> None:
        process = thread.process
        assert process is not None
        crawler = process.create_crawler(NutchSitemapSpider)

        def done(result: Any) -> None:
            if getattr(result, "value", None) is not None:  # a Failure: it could not start
                logger.error("The sitemap crawl could not start: %s", result.value)
            elif getattr(crawler, "spider", None) is not None:
                outcome["code"] = 0
            if crawler.stats is not None:
                outcome["stats"] = crawler.stats.get_stats()
            ended.set()

        try:
            crawler.crawl(**spider_args).addBoth(done)
        except Exception:
            logger.exception("The sitemap crawl could not start")
            ended.set()

    # The fetch's reactor, once it runs: imported before the fetch thread installs its own, it
    # would be Twisted's default, and the fetch's would fail. Looked for every 5 ms: the crawl
    # waits for nothing else (every 50 ms cost it 25 ms on average).
    reactor = None
    while reactor is None or not reactor.running:
        if thread.poll() is not None:
            return 1, {}
        ended.wait(0.005)
        if thread.process is not None:
            reactor = sys.modules.get("twisted.internet.reactor")
    reactor.callFromThread(start)
    while not ended.wait(0.2):
        if thread.poll() is not None:  # the reactor is gone: the crawl will not end
            return 1, {}
    return int(outcome["code"]), dict(outcome["stats"])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
