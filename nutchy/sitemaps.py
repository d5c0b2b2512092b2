"""Sitemaps into the web table: the ``nutch_sitemap`` spider and its pipeline.

``nutchy sitemap`` runs this spider in a child process (as ``nutchy crawl`` runs its fetches);
inside a Scrapy project with nutchy's add-on it is also ``scrapy crawl nutch_sitemap``:

- ``-a sitemaps=FILE`` (one sitemap URL a line, ``#`` comments) or ``-a sitemaps=URL,URL``:
  sitemaps to read;
- ``-a robots=true``: every host of the table, through its robots.txt: each ``Sitemap:`` line it
  names, or ``/sitemap.xml`` when it names none (``NUTCH_SITEMAP_TRY_DEFAULT``);
- ``-a strict=false``: take URLs a sitemap is not entitled to list (another host, or outside its
  folder; :func:`nutchy.core.sitemap.may_list`), which are refused by default;
- ``-a filter=false``, ``-a normalize=false``: as inject's ``-noFilter`` and ``-noNorm``.

The spider reads sitemaps with Scrapy's own reader (:class:`scrapy.spiders.SitemapSpider`, which
streams the XML and unzips ``.xml.gz`` within a size bound), follows sitemap indexes to
``NUTCH_SITEMAP_INDEX_DEPTH_MAX`` levels, takes at most ``NUTCH_SITEMAP_URLS_MAX`` URLs from one
sitemap and downloads at most ``NUTCH_SITEMAP_SIZE_MAX`` bytes of one (decoded bytes too). It is
polite as the fetch is: robots.txt obeyed, one request at a time per host,
``NUTCH_FETCHER_SERVER_DELAY`` apart. :class:`NutchSitemapPipeline` writes the entries, a few
thousand at a time in a thread, with :func:`nutchy.core.sitemap.sitemap_change`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.spiders import SitemapSpider
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from nutchy.core.sitemap import SitemapEntry, make_entry, may_list, sitemap_change
from nutchy.core.urls import InvalidURL, normalize_url, reverse_url, unreverse_url
from nutchy.exceptions import ConfigError, StoreError
from nutchy.jobs import _settings
from nutchy.resolver import AddressGuard
from nutchy.spiders import leave_out_unused_components
from nutchy.store import open_table
from nutchy.store.base import Scan
from nutchy.store.hosts import RobotsRecord, open_host_memory
from nutchy.store.schema import RowUpdate, build_update, columns_for

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from nutchy.core.sitemap import Made
    from nutchy.core.urlfilter import RegexURLFilter
    from nutchy.core.webpage import WebPage
    from nutchy.store.base import Store
    from nutchy.store.schema import Cells
    from nutchy.store.table import WebTable

__all__ = [
    "NutchSitemapGuardMiddleware",
    "NutchSitemapPipeline",
    "NutchSitemapRobotsMiddleware",
    "NutchSitemapSpider",
    "SitemapEntries",
]

logger = logging.getLogger(__name__)

#: Encoded new rows kept for reuse, by hints (lastmod, interval, priority).
_TEMPLATES: Final = 4096
#: Entries handed to the pipeline at a time.
CHUNK: Final = 2000
#: Meta keys of the spider's requests.
META_DEPTH: Final = "nutch_sitemap_depth"
META_ROBOTS_HOST: Final = "nutch_sitemap_robots_host"
#: Fields of a row that :func:`~nutchy.core.sitemap.sitemap_change` reads.
ROW_FIELDS: Final = (
    "status",
    "fetch_time",
    "prev_fetch_time",
    "fetch_interval",
    "modified_time",
    "stm_priority",
    "markers",
)
_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


@dataclass(slots=True)
class SitemapEntries:
    """The item of the spider: entries of one sitemap, as Scrapy's reader gives them."""

    sitemap: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    #: The host whose robots.txt named the sitemap, if one did.
    robots_host: str | None = None


def _flag(name: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ConfigError(f"-a {name} must be true or false, got {value!r}")


def sitemap_urls(value: str) -> list[str]:
    """The sitemap URLs of ``-a sitemaps=VALUE``: a file of them, one a line, or URLs
    separated by commas or newlines."""
    if "://" not in value:
        path = Path(value)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the sitemap list {value}: {exc}") from None
        lines = text.splitlines()
    else:
        lines = value.splitlines() if "\n" in value else value.split(",")
    urls = [line.strip() for line in lines]
    return [url for url in urls if url and not url.startswith("#")]


class NutchSitemapSpider(SitemapSpider):
    """Read sitemaps, and give their entries to :class:`NutchSitemapPipeline`."""

    name = "nutch_sitemap"
    # Scrapy's own scheduler and robots.txt middleware: not the fetch's table-driven ones.
    custom_settings: dict[str, Any] | None = {
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "DOWNLOADER_MIDDLEWARES": {
            "nutchy.middlewares.NutchFetchMiddleware": None,
            "nutchy.robots.NutchRobotsMiddleware": None,
            "nutchy.sitemaps.NutchSitemapGuardMiddleware": 40,
            # In the place of Scrapy's (100), which it is, but for the robots.txt answers the
            # spider holds already.
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
            "nutchy.sitemaps.NutchSitemapRobotsMiddleware": 100,
        },
        "ITEM_PIPELINES": {
            "nutchy.pipelines.NutchParsePipeline": None,
            "nutchy.pipelines.NutchDbUpdatePipeline": None,
            "nutchy.sitemaps.NutchSitemapPipeline": 100,
        },
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY_JITTER": 0,
        "COOKIES_ENABLED": False,
        # One chunk of entries at a time through the pipeline: the callback's generator is not
        # read further meanwhile, so memory holds a chunk, whatever the sitemap's size.
        "CONCURRENT_ITEMS": 1,
    }

    def __init__(
        self,
        sitemaps: str = "",
        robots: str | bool = False,
        strict: str | bool = True,
        filter: str | bool = True,
        normalize: str | bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sitemap_urls = sitemap_urls(sitemaps) if sitemaps else []
        self.robots = _flag("robots", robots)
        self.strict = _flag("strict", strict)
        self.filter_urls = _flag("filter", filter)
        self.normalize = _flag("normalize", normalize)
        if not self.sitemap_urls and not self.robots:
            raise ConfigError("nothing to read: give -a sitemaps=FILE|URLS, or -a robots=true")
        self.urls_max = 50_000
        self.depth_max = 2
        self.try_default = True
        #: the robots.txt answers (their bodies) the spider holds, by ``scheme://host[:port]``:
        #: those of the crawl's host memory it found, and those it asked for with 200
        #: (:class:`NutchSitemapRobotsMiddleware` obeys them without asking again)
        self.robots_answers: dict[str, bytes] = {}

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        # Scrapy's RemoteControl left out, as the fetch leaves it out: its module's import of
        # aiohttp cost each sitemap read 0.36 s of CPU (a re-crawl of nutchy crawl, py-spy). So
        # is its cookies middleware (cookies are off): its import of tldextract, requests and
        # urllib3 cost the sitemap read in the fetch's process 0.11 s (cProfile).
        leave_out_unused_components(settings)
        # Politeness as the fetch's: one request at a time to a host, the server delay apart.
        delay = settings.get("NUTCH_FETCHER_SERVER_DELAY")
        if delay is not None:
            settings.set(
                "DOWNLOAD_DELAY",
                _settings.get_float(settings, "NUTCH_FETCHER_SERVER_DELAY"),
                priority="spider",
            )
        # Scrapy's download handlers, its decompression middleware and its sitemap reader's
        # gunzip all stop at DOWNLOAD_MAXSIZE.
        if settings.get("NUTCH_SITEMAP_SIZE_MAX") is not None:
            size_max = _settings.get_int(settings, "NUTCH_SITEMAP_SIZE_MAX", 1)
            settings.set("DOWNLOAD_MAXSIZE", size_max, priority="spider")
            warn = settings.getint("DOWNLOAD_WARNSIZE")
            settings.set("DOWNLOAD_WARNSIZE", min(warn, size_max) if warn else 0, priority="spider")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.urls_max = _settings.get_int(settings, "NUTCH_SITEMAP_URLS_MAX", 1)
        spider.depth_max = _settings.get_int(settings, "NUTCH_SITEMAP_INDEX_DEPTH_MAX", 0)
        spider.try_default = _settings.get_bool(settings, "NUTCH_SITEMAP_TRY_DEFAULT")
        return spider

    async def start(self) -> AsyncIterator[Any]:
        for url in self.sitemap_urls:
            yield self._request(url, 0, None)
        if self.robots:
            roots, known = await run_in_thread(self._roots)
            stats = self.crawler.stats
            stats.set_value("nutch/sitemap/hosts", len(roots))
            for root in roots:
                host = urlsplit(root).hostname
                record = known.get(root.rstrip("/"))
                if record is not None:
                    # The fetch read this robots.txt lately (the crawl's shared host memory):
                    # its Sitemap lines, and its rules, without asking for it again.
                    stats.inc_value("nutch/sitemap/robots_remembered")
                    self.robots_answers[root.rstrip("/")] = record.body
                    for url in self._robots_sitemaps(
                        root + "robots.txt", record.status, record.body
                    ):
                        yield self._request(url, 0, host)
                    continue
                yield Request(
                    root + "robots.txt",
                    callback=self._parse_sitemap,
                    errback=self._failed,
                    meta={
                        "dont_obey_robotstxt": True,
                        "handle_httpstatus_all": True,
                        META_ROBOTS_HOST: host,
                    },
                )

    def _roots(self) -> tuple[list[str], dict[str, RobotsRecord]]:
        """``scheme://host[:port]/`` of every row of the table, in key order, and the robots.txt
        answers of their origins that the crawl's host memory holds and are not older than
        ``NUTCH_HTTP_ROBOTS_EXPIRY``."""
        known: dict[str, RobotsRecord] = {}
        settings = self.crawler.settings
        table = open_table(settings)
        try:
            if not table.exists():
                return [], known
            roots = table_roots(table.store)
            expiry = _settings.get_int(settings, "NUTCH_HTTP_ROBOTS_EXPIRY", 0)
            oldest = int(time.time() * 1000) - expiry * 1000
            memory = open_host_memory(table.store)
            try:
                origins = [root.rstrip("/") for root in roots]
                for start in range(0, len(origins), 1000):
                    answers = memory.robots(origins[start : start + 1000])
                    known.update((o, r) for o, r in answers.items() if r.fetched >= oldest)
            except StoreError as exc:
                logger.warning("The crawl's robots.txt answers cannot be read (%s)", exc)
            finally:
                memory.close()
        finally:
            table.close()
        return roots, known

    def _request(self, url: str, depth: int, robots_host: str | None) -> Request:
        return Request(
            url,
            callback=self._parse_sitemap,
            errback=self._failed,
            meta={META_DEPTH: depth, META_ROBOTS_HOST: robots_host},
        )

    def _failed(self, failure: Failure) -> None:
        self.crawler.stats.inc_value("nutch/sitemap/failed")
        request = getattr(failure, "request", None)
        logger.warning(
            "Cannot read the sitemap %(url)s: %(error)s",
            {"url": getattr(request, "url", "?"), "error": failure.getErrorMessage()},
        )

    def _parse_sitemap(self, response: Response) -> Iterable[Any]:
        stats = self.crawler.stats
        robots_host = response.meta.get(META_ROBOTS_HOST)
        if response.url.endswith("/robots.txt") and META_DEPTH not in response.meta:
            return self._from_robots(response, robots_host)
        if response.status != 200:
            stats.inc_value("nutch/sitemap/failed")
            logger.warning("Cannot read the sitemap %s: HTTP %s", response.url, response.status)
            return ()
        body = self._get_sitemap_body(response)
        reader = _reader(body) if body else None
        if reader is None:
            stats.inc_value("nutch/sitemap/invalid")
            logger.warning("Not a sitemap (or over NUTCH_SITEMAP_SIZE_MAX): %s", response.url)
            return ()
        depth = response.meta.get(META_DEPTH, 0)
        if reader.type == "sitemapindex":
            stats.inc_value("nutch/sitemap/read")
            return self._from_index(response.url, reader, depth, robots_host)
        if reader.type == "urlset":
            stats.inc_value("nutch/sitemap/read")
            return self._from_urlset(response.url, reader, robots_host)
        stats.inc_value("nutch/sitemap/invalid")
        logger.warning("Not a sitemap (root element %r): %s", reader.type, response.url)
        return ()

    def _from_robots(self, response: Response, host: str | None) -> Iterator[Request]:
        if response.status == 200:
            # Its rules too: Scrapy's robots.txt middleware would ask the same URL again. (Not
            # another status: this request follows no redirect, which that middleware's does.)
            parts = urlsplit(response.url)
            self.robots_answers[f"{parts.scheme}://{parts.netloc}"] = response.body
        for url in self._robots_sitemaps(response.url, response.status, response.body):
            yield self._request(url, 0, host)

    def _robots_sitemaps(self, robots_url: str, status: int, body: bytes) -> list[str]:
        """The sitemaps a robots.txt answer names; ``/sitemap.xml`` when it names none (or is no
        robots.txt) and ``NUTCH_SITEMAP_TRY_DEFAULT`` is on."""
        urls: list[str] = []
        if status == 200:
            urls = list(sitemap_urls_from_robots(body, base_url=robots_url))
        self.crawler.stats.inc_value("nutch/sitemap/robots_sitemaps", len(urls))
        if not urls and self.try_default:
            urls = [urljoin(robots_url, "/sitemap.xml")]
        return urls

    def _from_index(
        self, url: str, reader: Sitemap, depth: int, robots_host: str | None
    ) -> Iterator[Request]:
        if depth >= self.depth_max:
            self.crawler.stats.inc_value("nutch/sitemap/index_too_deep")
            logger.warning(
                "Not following the sitemap index %s: NUTCH_SITEMAP_INDEX_DEPTH_MAX is %d",
                url,
                self.depth_max,
            )
            return
        for entry in reader:
            loc = str(entry.get("loc") or "").strip()
            if loc.startswith(("http://", "https://")):
                yield self._request(loc, depth + 1, robots_host)

    def _from_urlset(
        self, url: str, reader: Sitemap, robots_host: str | None
    ) -> Iterator[SitemapEntries]:
        stats = self.crawler.stats
        item = SitemapEntries(url, robots_host=robots_host)
        taken = 0
        for entry in reader:
            loc = str(entry.get("loc") or "")
            if self.strict and not may_list(loc, url, robots_host):
                stats.inc_value("nutch/sitemap/refused")
                continue
            if taken >= self.urls_max:
                stats.inc_value("nutch/sitemap/over_limit")
                continue
            taken += 1
            item.entries.append(entry)
            if len(item.entries) >= CHUNK:
                yield item
                item = SitemapEntries(url, robots_host=robots_host)
        if item.entries:
            yield item
        stats.inc_value("nutch/sitemap/urls", taken)


#: The columns whose rows :func:`table_roots` reads (a row with none of them is not listed).
_ROOT_COLUMNS: Final = columns_for(("fetch_time", "status", "score"))
#: Rows :func:`table_roots` reads at a time: at first, and again after a page of few origins.
ROOTS_PAGE: Final = 16
#: ... and at most, after pages of many origins (one row or two each).
ROOTS_PAGE_MAX: Final = 1024


def table_roots(store: Store) -> list[str]:
    """``scheme://host[:port]/`` of every row of the table of *store*, in key order, without
    reading every row: a scan of a few keys at a time that steps over the rest of the last
    origin it saw, so that a host of a thousand rows costs a read of a few. Pages grow while
    they hold about one origin a row (a table of small hosts is read on, as a plain scan
    would), and shrink again when one holds few. A key that is no URL's is passed over.

    A key's origin is its text before the first ``/`` (reversed host, scheme and port:
    ``com.foo:http:8080``). Every key of an origin is the origin alone or the origin, ``/`` and
    the rest, so all of them sort before the origin followed by ``0`` (the byte after ``/``),
    from where the scan goes on."""
    roots: list[str] = []
    start = b""
    page = ROOTS_PAGE
    while True:
        keys = [key for key, _ in store.scan(Scan(start=start, columns=_ROOT_COLUMNS, limit=page))]
        if not keys:
            return roots
        origins: list[bytes] = []
        for key in keys:
            slash = key.find(b"/")
            origin = key if slash < 0 else key[:slash]
            if origins and origins[-1] == origin:
                continue
            origins.append(origin)
            try:
                root = unreverse_url(origin.decode("utf-8")) + "/"
            except (InvalidURL, UnicodeDecodeError):
                continue
            if not roots or roots[-1] != root:
                roots.append(root)
        if len(keys) < page:
            return roots
        # Every key of the last origin sorts before this one ("0" follows "/").
        start = origins[-1] + b"0"
        page = min(page * 4, ROOTS_PAGE_MAX) if 2 * len(origins) > len(keys) else ROOTS_PAGE


class NutchSitemapGuardMiddleware:
    """The fetch's address guard (``NUTCH_ADDRESS_GUARD_ENABLED``, docs/fetch.md) for the
    sitemap spider's requests: robots.txt, sitemaps and every redirect connect only to the
    addresses the guard allows; a refused one fails (counted as failed)."""

    def __init__(self, guard: AddressGuard) -> None:
        self.guard = guard

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        guard = AddressGuard.from_settings(crawler.settings)
        if guard is None:
            # off by default: no reason given, so that Scrapy does not warn of it at each run
            raise NotConfigured
        return cls(guard)

    def process_request(self, request: Request) -> None:
        from twisted.internet import reactor

        self.guard.install(reactor)  # before anything connects: a no-op once installed
        self.guard.check_url(request.url)  # a host written as a refused address


class NutchSitemapRobotsMiddleware(RobotsTxtMiddleware):
    """Scrapy's robots.txt middleware, for the ``nutch_sitemap`` spider: the rules of a host
    whose robots.txt answer the spider holds (:attr:`NutchSitemapSpider.robots_answers`: one the
    fetch keeps in the crawl's host memory, or the one the spider asked for to find the host's
    ``Sitemap:`` lines) come from that answer, parsed as Scrapy parses the one it fetches
    (``ROBOTSTXT_PARSER``, for ``ROBOTSTXT_USER_AGENT``), rather than from one more request to
    the host; the other hosts' robots.txt is fetched by Scrapy's code, as before. A subclass,
    so that every verdict, stat and log line is Scrapy's own."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._parser_class = load_object(crawler.settings.get("ROBOTSTXT_PARSER"))
        self._held: dict[str, RobotParser] = {}

    async def robot_parser(self, request: Request) -> RobotParser | None:
        answers = getattr(self.crawler.spider, "robots_answers", None)
        if answers:
            parts = urlparse_cached(request)
            origin = f"{parts.scheme}://{parts.netloc}"
            parser = self._held.get(origin)
            if parser is None and origin in answers:
                parser = build_from_crawler(self._parser_class, self.crawler, answers[origin])
                self._held[origin] = parser
            if parser is not None:
                return parser
        return await super().robot_parser(request)


def _reader(body: bytes) -> Sitemap | None:
    try:
        return Sitemap(body)
    except Exception:  # noqa: BLE001 (lxml raises several kinds on what is not XML)
        return None


@dataclass(slots=True)
class _Counts:
    injected: int = 0
    updated: int = 0
    due: int = 0
    known: int = 0
    filtered: int = 0
    malformed: int = 0
    future: int = 0


class NutchSitemapPipeline:
    """Write sitemap entries to the web table (creating it when missing)."""

    def __init__(
        self,
        table: WebTable,
        *,
        url_filter: RegexURLFilter | None,
        normalize: bool,
        default_interval: int,
        default_score: float,
        min_interval: int,
        max_interval: int,
        crawler: Crawler | None = None,
    ) -> None:
        self.table = table
        self.url_filter = url_filter
        self.normalize = normalize
        self.default_interval = default_interval
        self.default_score = default_score
        self.min_interval = min_interval
        self.max_interval = max_interval
        self.crawler = crawler
        self._lock = threading.Lock()
        self._created = False
        self._templates: dict[tuple[int | None, int | None, float | None], Cells] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        spider = crawler.spider
        if not isinstance(spider, NutchSitemapSpider):
            raise NotConfigured("only for the nutch_sitemap spider")
        settings = crawler.settings
        return cls(
            open_table(settings),
            url_filter=_settings.url_filter(settings) if spider.filter_urls else None,
            normalize=spider.normalize,
            default_interval=_settings.get_int(settings, "NUTCH_DB_FETCH_INTERVAL_DEFAULT", 1),
            default_score=_settings.get_float(settings, "NUTCH_DB_SCORE_INJECTED"),
            min_interval=_settings.get_int(
                settings, "NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_MIN_INTERVAL", 1
            ),
            max_interval=_settings.get_int(settings, "NUTCH_DB_FETCH_INTERVAL_MAX", 1),
            crawler=crawler,
        )

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, SitemapEntries):
            return item
        counts = await run_in_thread(self.write, item.entries)
        if self.crawler is not None and self.crawler.stats is not None:
            for name, value in asdict(counts).items():
                self.crawler.stats.inc_value(f"nutch/sitemap/{name}", value)
        return item

    async def close_spider(self) -> None:
        await run_in_thread(self.table.close)

    def write(self, raw_entries: list[dict[str, Any]], now: int | None = None) -> _Counts:
        """Write *raw_entries* (one sitemap's, as Scrapy's reader gives them) at *now* (ms)."""
        now = int(time.time() * 1000) if now is None else now
        counts = _Counts()
        entries: dict[str, SitemapEntry] = {}
        for raw in raw_entries:
            entry = make_entry(raw, now=now)
            counts.future += entry.future
            url = entry.url
            try:
                url = normalize_url(url) if self.normalize else url
                key = reverse_url(url)
            except InvalidURL:
                counts.malformed += 1
                continue
            if self.url_filter is not None and not self.url_filter.accepts(url):
                counts.filtered += 1
                continue
            entries[key] = entry
        if not entries:
            return counts

        def made(entry: SitemapEntry, page: WebPage | None) -> Made | None:
            return sitemap_change(
                entry,
                page,
                now=now,
                default_interval=self.default_interval,
                default_score=self.default_score,
                min_interval=self.min_interval,
                max_interval=self.max_interval,
            )

        def change(key: str, page: WebPage | None) -> RowUpdate | None:
            got = made(entries[key], page)
            if got is None:
                counts.known += 1
                return None
            if page is None:
                counts.injected += 1
            else:
                counts.updated += 1
                counts.due += "fetch_time" in got[0]
            return build_update(key, *got)

        with self._lock:
            if not self._created:
                self.table.create()
                self._created = True
            keys = sorted(entries)
            # Known URLs are changed under modify, which reads each row once; the new ones it
            # finds (most of them, the first time) are written after it as inject writes seeds:
            # rows with the same hints share their encoded cells, and the store writes only
            # those it does not hold.
            new: list[str] = []

            def change_known(key: str, page: WebPage | None) -> RowUpdate | None:
                if page is None:
                    new.append(key)
                    return None
                return change(key, page)

            self.table.modify(keys, ROW_FIELDS, change_known)
            if new:
                updates = [
                    RowUpdate(key.encode(), self._template(entries[key], made)) for key in new
                ]
                written = self.table.store.insert_new(updates)
                counts.injected += written
                if written < len(new):
                    # Rows another writer made meanwhile get the hints too (with the rows just
                    # written, which they leave as they are: insert_new does not say which were
                    # which).
                    self.table.modify(new, ROW_FIELDS, change)
        return counts

    def _template(
        self, entry: SitemapEntry, made: Callable[[SitemapEntry, WebPage | None], Made | None]
    ) -> Cells:
        """The cells of a new row of *entry*, shared by the rows with the same hints."""
        hints = (entry.lastmod, entry.interval, entry.priority)
        cells = self._templates.get(hints)
        if cells is None:
            got = made(entry, None)
            assert got is not None  # a new row is always written
            cells = build_update("", *got).puts
            if len(self._templates) >= _TEMPLATES:
                self._templates.clear()
            self._templates[hints] = cells
        return cells
