"""``nutchy sitemap``: read sitemaps into the web table, in a child process.

The child runs the ``nutch_sitemap`` spider (:mod:`nutchy.sitemaps`) and reports its Scrapy
stats; :func:`read_sitemaps` returns them as a :class:`SitemapReport`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Final

from nutchy.jobs.crawl import FetchRun, start_child

__all__ = ["SITEMAP_STAT", "SitemapReport", "read_sitemaps", "sitemap_report"]

#: The prefix of the spider's stats.
SITEMAP_STAT: Final = "nutch/sitemap/"
#: The counts a report shows, in this order, with their labels.
LABELS: Final = (
    ("read", "sitemaps read"),
    ("failed", "sitemaps failed"),
    ("invalid", "not sitemaps"),
    ("urls", "URLs listed"),
    ("injected", "new URLs"),
    ("updated", "rows updated"),
    ("due", "made due"),
    ("known", "unchanged"),
    ("refused", "other sites"),
    ("over_limit", "over the limit"),
    ("filtered", "filtered"),
    ("malformed", "malformed"),
    ("future", "lastmod ahead"),
    ("index_too_deep", "deep indexes"),
)


@dataclass
class SitemapReport:
    """How the child ended, and what it counted (``nutch/sitemap/<name>`` stats)."""

    code: int
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)


def read_sitemaps(spider_args: dict[str, Any], overrides: dict[str, Any]) -> SitemapReport:
    """Run ``python -m nutchy._sitemaprun`` with *spider_args* (``sitemaps``, ``robots``,
    ``strict``, ``filter``, ``normalize``) and the settings *overrides*; wait for it."""
    command = [
        sys.executable,
        "-m",
        "nutchy._sitemaprun",
        json.dumps(spider_args),
        json.dumps(overrides),
    ]
    run: FetchRun = start_child(command)()
    return sitemap_report(run.code, run.stats)


def sitemap_report(code: int, stats: dict[str, Any]) -> SitemapReport:
    """The report of a sitemap crawl that ended with *code* and Scrapy *stats*."""
    counts = {
        key[len(SITEMAP_STAT) :]: int(value)
        for key, value in stats.items()
        if key.startswith(SITEMAP_STAT) and isinstance(value, (int, float))
    }
    return SitemapReport(code, counts, stats)
