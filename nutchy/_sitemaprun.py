"""Read sitemaps into the table: ``python -m nutchy._sitemaprun SPIDER_ARGS_JSON [SETTINGS_JSON]``.

``nutchy sitemap`` runs the ``nutch_sitemap`` spider (:mod:`nutchy.sitemaps`) in a child process,
as ``nutchy crawl`` runs its fetches, because Twisted's reactor cannot be started twice in one
process. The child reads nutchy's defaults, the Scrapy project's settings (when there is a
project), then the overrides given as a JSON object, and writes its Scrapy stats as JSON to the
file that ``NUTCHY_FETCH_REPORT`` names. It exits with 1 when the crawl could not start.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from nutchy._fetchrun import _write_report
from nutchy.config import load_settings


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(args) <= 2:
        print(
            "usage: python -m nutchy._sitemaprun SPIDER_ARGS_JSON [SETTINGS_JSON]", file=sys.stderr
        )
        return 2
    from scrapy.crawler import CrawlerProcess

    from nutchy.sitemaps import NutchSitemapSpider

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
