"""Sitemaps: what one ``<url>`` entry of a sitemap changes in the web table.

The sitemap protocol (sitemaps.org) gives each URL up to three hints: ``lastmod`` (when the page
last changed, a W3C datetime), ``changefreq`` (how often it is likely to change) and ``priority``
(0.0 to 1.0, relative to the site's other URLs). Nutch 1.x's sitemap job turns them into a
modified time, a fetch interval and a score; Nutch 2.4 keeps the priority in ``s:sp``. nutchy
does both, and also uses them on rows the table already holds (:func:`sitemap_change`).

>>> entry = make_entry({"loc": "http://a.com/x", "lastmod": "2024-05-01",
...                     "changefreq": "daily", "priority": "0.8"}, now=1_800_000_000_000)
>>> entry.lastmod, entry.interval, entry.priority
(1714521600000, 86400, 0.8)

Entries of another site are refused unless the sitemap may speak for it (:func:`may_list`).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import struct
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from nutchy.core.status import CrawlStatus, Mark, Metadata
from nutchy.core.webpage import WebPage

__all__ = [
    "CHANGEFREQ_SECONDS",
    "FUTURE_TOLERANCE_MS",
    "Made",
    "SitemapEntry",
    "make_entry",
    "may_list",
    "parse_lastmod",
    "sitemap_change",
]

#: ``changefreq`` in seconds, as Nutch's sitemap jobs map it (2.4's values: a month is 30.4 days;
#: ``always`` is an hour and ``never`` a year, both then kept within the interval bounds).
CHANGEFREQ_SECONDS: Final = {
    "always": 3600,
    "hourly": 3600,
    "daily": 86400,
    "weekly": 604800,
    "monthly": 2628000,
    "yearly": 31536000,
    "never": 31536000,
}
#: A ``lastmod`` later than now by more than this (clocks differ) is ignored as wrong.
FUTURE_TOLERANCE_MS: Final = 86_400_000

_YEAR: Final = re.compile(r"\d{4}\Z")
_MONTH: Final = re.compile(r"\d{4}-\d{2}\Z")


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>`` of a sitemap, its hints read: ``None`` where absent or unreadable."""

    url: str
    #: ms since the epoch.
    lastmod: int | None = None
    #: seconds.
    interval: int | None = None
    priority: float | None = None
    #: The ``lastmod`` was later than now (ignored, and counted).
    future: bool = False


@functools.lru_cache(maxsize=4096)  # a sitemap's entries share a few dates
def parse_lastmod(text: str) -> int | None:
    """A W3C datetime (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` or a full date and time with a
    zone; a time without a zone is taken as UTC) in ms since the epoch, or ``None``.

    >>> parse_lastmod("2024"), parse_lastmod("2024-02"), parse_lastmod("2024-02-03T04:05:06Z")
    (1704067200000, 1706745600000, 1706933106000)
    >>> parse_lastmod("2024-02-03T04:05+01:00"), parse_lastmod("yesterday")
    (1706929500000, None)
    """
    text = text.strip()
    if _YEAR.match(text):
        text += "-01-01"
    elif _MONTH.match(text):
        text += "-01"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    try:
        return int(when.timestamp() * 1000)
    except (OverflowError, OSError, ValueError):
        return None


def _priority(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None  # NaN too


def make_entry(fields: dict[str, Any], *, now: int) -> SitemapEntry:
    """The entry of *fields*, one ``<url>`` as Scrapy's sitemap reader gives it (``loc``,
    ``lastmod``, ``changefreq``, ``priority``: stripped strings), read at time *now* (ms)."""
    lastmod = parse_lastmod(str(fields.get("lastmod") or ""))
    future = lastmod is not None and lastmod > now + FUTURE_TOLERANCE_MS
    changefreq = str(fields.get("changefreq") or "").strip().lower()
    return SitemapEntry(
        url=str(fields["loc"]).strip(),
        lastmod=None if future else lastmod,
        interval=CHANGEFREQ_SECONDS.get(changefreq),
        priority=_priority(str(fields.get("priority") or "")),
        future=future,
    )


def may_list(url: str, sitemap_url: str, robots_host: str | None = None) -> bool:
    """Whether the sitemap at *sitemap_url* may list *url* (sitemaps.org's rule, and Nutch's
    "strict" mode): same scheme, host and port, and a path below the sitemap's folder; or, for a
    sitemap that the robots.txt of *robots_host* named, any URL of that host (cross-submission
    through robots.txt).

    >>> may_list("http://a.com/docs/x", "http://a.com/docs/sitemap.xml")
    True
    >>> may_list("http://a.com/x", "http://a.com/docs/sitemap.xml")
    False
    >>> may_list("http://a.com/x", "http://cdn.b.net/a-sitemap.xml", robots_host="a.com")
    True
    """
    target = urlsplit(url)
    if robots_host is not None and target.hostname == robots_host:
        return True
    source = urlsplit(sitemap_url)
    if (target.scheme, target.netloc.lower()) != (source.scheme, source.netloc.lower()):
        return False
    folder = source.path[: source.path.rfind("/") + 1] or "/"
    return (target.path or "/").startswith(folder)


#: What an entry writes to a row: scalar fields, and map entries (as ``build_update`` takes them).
Made = tuple[dict[str, int | float], dict[str, dict[str, str | bytes | None]]]


def sitemap_change(
    entry: SitemapEntry,
    page: WebPage | None,
    *,
    now: int,
    default_interval: int,
    default_score: float,
    min_interval: int,
    max_interval: int,
) -> Made | None:
    """The fields and map entries that *entry* writes to its row (*page*, ``None`` when the
    URL is new), or ``None`` when it changes nothing.

    A new URL becomes a row as a seed does (due at *now*, ``dist`` 0, ``_injmrk_`` ``y``),
    with the entry's interval (*default_interval* without one), its priority as score and
    OPIC cash (*default_score* without one), its lastmod as modified time and the priority in
    ``s:sp``. A row the table holds keeps its score (OPIC's cash is its own); it gets the
    entry's interval and ``s:sp``, and when the entry's lastmod is later than both its modified
    time and its last fetch, a row fetched before is made due at *now*: the page changed since
    it was fetched. A row in a batch (``_gnmrk_``) keeps its fetch time: the batch fetches it.
    Intervals are kept within *min_interval* and *max_interval* (seconds).

    >>> e = SitemapEntry("http://a.com/", lastmod=5_000, interval=86400, priority=0.5)
    >>> sitemap_change(e, None, now=9_000, default_interval=60, default_score=1.0,
    ...                min_interval=60, max_interval=7776000)[0]
    {'fetch_time': 9000, 'fetch_interval': 86400, 'score': 0.5, 'modified_time': 5000, 'stm_priority': 0.5}
    """
    interval = entry.interval
    if interval is not None:
        interval = min(max(interval, min_interval), max_interval)
    fields: dict[str, int | float] = {}
    entries: dict[str, dict[str, str | bytes | None]] = {}
    if page is None:
        score = default_score if entry.priority is None else entry.priority
        fields = {
            "fetch_time": now,
            "fetch_interval": default_interval if interval is None else interval,
            "score": score,
        }
        if entry.lastmod is not None:
            fields["modified_time"] = entry.lastmod
        if entry.priority is not None:
            fields["stm_priority"] = entry.priority
        entries = {
            "metadata": {Metadata.CASH: struct.pack(">f", score)},
            "markers": {Mark.DISTANCE: "0", Mark.INJECT: Mark.INJECT_SEED},
        }
        return fields, entries
    if interval is not None and interval != page.fetch_interval:
        fields["fetch_interval"] = interval
    if entry.priority is not None and not math.isclose(
        entry.priority, page.stm_priority, rel_tol=1e-6
    ):
        fields["stm_priority"] = entry.priority
    fetched_before = page.status in (CrawlStatus.FETCHED, CrawlStatus.NOTMODIFIED)
    if (
        entry.lastmod is not None
        and fetched_before
        and entry.lastmod > max(page.modified_time, page.prev_fetch_time)
        and page.fetch_time > now
        and Mark.GENERATE not in page.markers
    ):
        fields["fetch_time"] = now
    return (fields, entries) if fields else None
