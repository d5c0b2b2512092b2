"""robots.txt for the fetch: fetched once a day per host, parsed with Protego, every page checked.

:class:`NutchRobotsMiddleware` (order 90) fetches ``/robots.txt`` the first time a page of a
``scheme://host:port`` is requested, through the engine (so it passes the other downloader
middlewares), unless the crawl's host memory holds a fresh answer (below), and keeps the
verdict. It follows up to five redirects, to any host,
and the rules of the file it ends at apply (RFC 9309 §2.3.1.2; Nutch follows one); more, a loop,
or a redirect to a scheme other than http and https, is a robots.txt that is unavailable, which
allows everything. It reads at most ``NUTCH_HTTP_ROBOTS_MAX_SIZE`` bytes (500 KiB, as Google):
the download stops there, a compressed file is decoded to that size and no further
(:mod:`nutchy.compression`), and the rules past it are ignored. Each page of a host is then:

- denied when the rules disallow it for ``ROBOTSTXT_USER_AGENT`` (or ``USER_AGENT``): the
  request ends with :exc:`RobotsDenied`, which :class:`~nutchy.middlewares.NutchFetchMiddleware`
  records as ROBOTS_DENIED (crawl status GONE) without any request to the host;
- denied the same way when the host's ``Crawl-delay`` exceeds ``fetcher.max.crawl.delay``;
- otherwise let through, carrying the host's Crawl-delay (``meta["nutch_crawl_delay"]``) for
  the scheduler to apply to its queue.

A robots.txt request is a request to the host: it goes through the host's fetch queue's download
slot, and when it was fetched (not found in a cache), the page that asked for it goes back to the
scheduler (``meta["nutch_after_robots"]``), which starts it only after the host's delay (its
Crawl-delay, now known) from the end of the robots.txt request, counted at the server as any
other gap.

Answers are kept with an expiry (``NUTCH_HTTP_ROBOTS_EXPIRY``, at most 24 hours, RFC 9309 §2.4):
in this process, and in the crawl's host memory (:mod:`nutchy.store.hosts`), where every other
process of the crawl (the next round's, another fetcher's, another worker's) finds them instead
of asking the host again. A fetch that failed, and a 5xx, are not shared: the next process asks.

The answer to robots.txt decides as in Nutch (:func:`nutchy.core.fetch.robots_verdict`): 200 is
parsed, 403 forbids everything unless ``http.robots.403.allow``, other codes and failed fetches
allow everything. A 5xx or 429 defers the host (``http.robots.503.defer.visits``, Nutch 1.x): the
page goes back to the scheduler, which holds its queue for
``http.robots.503.defer.visits.delay`` and asks again, up to ``...retries`` times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from protego import Protego
from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from nutchy._fetch import (
    META_AFTER_ROBOTS,
    META_CRAWL_DELAY,
    META_DEFER,
    META_ENTRY,
    META_QUEUE,
    META_ROBOTS,
    FetchSettings,
)
from nutchy.compression import META_DECODED_LIMIT
from nutchy.core.fetch import robots_verdict
from nutchy.exceptions import StoreError
from nutchy.store.hosts import RobotsRecord

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from nutchy.store.hosts import HostMemory

__all__ = ["NutchRobotsMiddleware", "RobotsDenied", "RobotsRules"]

logger = logging.getLogger(__name__)

Download = Callable[[Request], Coroutine[Any, Any, "Response"]]

#: Redirects of robots.txt followed (RFC 9309 §2.3.1.2: at least five).
ROBOTS_REDIRECTS = 5
_REDIRECT_CODES = frozenset((301, 302, 303, 307, 308))
# Request meta of a robots.txt request: the bytes received so far (private to this module).
_RECEIVED = "_nutch_robots_received"


class RobotsDenied(IgnoreRequest):
    """A page that robots.txt forbids (*reason* ``"disallowed"``), or whose host asks for a
    Crawl-delay longer than ``fetcher.max.crawl.delay`` (*reason* ``"crawl-delay"``)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: robots.txt {reason}")
        self.url = url
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """The robots.txt verdict of one host for one user agent: its *parser* (``None`` when one
    *rule*, ``"allow"`` or ``"deny"``, holds for every URL), its *crawl_delay* in seconds (or
    ``None``), and whether the host is to be *deferred*."""

    parser: Protego | None = None
    rule: str | None = "allow"
    crawl_delay: float | None = None
    deferred: bool = False

    def allowed(self, url: str, agent: str) -> bool:
        if self.parser is not None:
            return bool(self.parser.can_fetch(url, agent))
        return self.rule != "deny"


class NutchRobotsMiddleware:
    """Applies robots.txt to the requests of rows (see the module docstring).

    *download* fetches a request through the engine (``crawler.engine.download_async``);
    *agent* is the user agent whose rules apply. Answers are kept *expiry* seconds (0: for the
    life of the process, and not shared); *memory*, when given, opens the crawl's host memory
    (called in a thread, once), where answers are shared with the other processes of the crawl.
    *clock* gives the time in seconds since the epoch.
    """

    def __init__(
        self,
        settings: FetchSettings,
        *,
        download: Download,
        agent: str,
        stats: StatsCollector,
        expiry: float = 0.0,
        memory: Callable[[], HostMemory] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.download = download
        self.agent = agent
        self.stats = stats
        self.expiry = expiry
        self._open_memory = memory if expiry > 0 else None
        self._memory: HostMemory | None = None
        self._memory_failed = False
        self._clock = clock
        #: origin → its rules, and until when they hold (s since the epoch; inf: for the crawl)
        self._rules: dict[str, tuple[RobotsRules, float]] = {}
        #: origin → the requests waiting for the robots.txt being fetched, with whether it was
        #: requested from the host
        self._waiting: dict[str, list[Deferred[tuple[RobotsRules, bool]]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from nutchy.store.hosts import open_host_memory_from_settings

        settings = crawler.settings

        def download(request: Request) -> Coroutine[Any, Any, Response]:
            # The engine exists once the crawl runs; middlewares are built before it.
            return crawler.engine.download_async(request)

        agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or ""
        fetch_settings = FetchSettings.from_settings(settings)
        middleware = cls(
            fetch_settings,
            download=download,
            agent=str(agent),
            stats=crawler.stats,
            expiry=fetch_settings.robots_expiry,
            memory=lambda: open_host_memory_from_settings(settings),
        )
        crawler.signals.connect(middleware.bytes_received, signal=signals.bytes_received)
        crawler.signals.connect(middleware._spider_closed, signal=signals.spider_closed)
        return middleware

    async def _spider_closed(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            await run_in_thread(memory.close)

    def bytes_received(self, data: bytes, request: Request) -> None:
        """Stop the download of a robots.txt once more than ``NUTCH_HTTP_ROBOTS_MAX_SIZE`` bytes
        have come; the response keeps what came."""
        meta = request.meta
        if not meta.get(META_ROBOTS):
            return
        received = meta.get(_RECEIVED, 0) + len(data)
        meta[_RECEIVED] = received
        if 0 <= self.settings.robots_max_size < received:
            raise StopDownload(fail=False)

    def process_request(
        self, request: Request
    ) -> Request | Coroutine[Any, Any, Request | None] | None:
        if request.meta.get(META_ENTRY) is None:
            return None
        parts = urlsplit(request.url)
        origin = f"{parts.scheme}://{parts.netloc}"
        known = self._rules.get(origin)
        if known is not None and known[1] > self._clock():
            return self._check(request, known[0])  # the usual case: no coroutine needed
        return self._fetch_then_check(request, origin)

    async def _fetch_then_check(self, request: Request, origin: str) -> Request | None:
        waiters = self._waiting.get(origin)
        if waiters is not None:  # another page of the host is fetching robots.txt already
            waiter: Deferred[tuple[RobotsRules, bool]] = Deferred()
            waiters.append(waiter)
            rules, requested = await maybe_deferred_to_future(waiter)
        else:
            self._waiting[origin] = []
            rules, until, requested = RobotsRules(rule="allow"), 0.0, True
            try:
                rules, until, requested = await self._rules_of(request, origin)
            finally:
                if until:
                    self._rules[origin] = (rules, until)
                for waiter in self._waiting.pop(origin):
                    waiter.callback((rules, requested))
        return self._check(request, rules, after_robots=requested)

    async def _rules_of(self, request: Request, origin: str) -> tuple[RobotsRules, float, bool]:
        """The rules of *origin*, until when they hold (0: not to be kept), and whether
        robots.txt was requested from the host for them (not found in the host memory)."""
        now = self._clock()
        record = await self._recall(origin)
        if record is not None and now - record.fetched / 1000 < self.expiry:
            self.stats.inc_value("nutch/fetch/robots/remembered")
            rules, keep = self._rules_from(record.status, record.body)
            return rules, (record.fetched / 1000 + self.expiry) if keep else 0.0, False
        rules, keep, record = await self._fetch(request, origin)
        if record is not None:
            await self._remember(origin, record)
        until = (now + self.expiry if self.expiry > 0 else float("inf")) if keep else 0.0
        return rules, until, True

    async def _fetch(
        self, request: Request, origin: str
    ) -> tuple[RobotsRules, bool, RobotsRecord | None]:
        """The rules of *origin*, whether they hold for a while, and the answer to share with
        the other processes of the crawl (``None``: none)."""
        robots = Request(
            f"{origin}/robots.txt",
            meta={
                META_ROBOTS: True,
                # The host's own download slot: a robots.txt request is a request to the host,
                # started no sooner than its delay allows.
                "download_slot": request.meta.get(META_QUEUE, origin),
                "dont_obey_robotstxt": True,
                "dont_retry": True,
                "dont_redirect": True,  # followed below
                "handle_httpstatus_all": True,
                "download_timeout": self.settings.timeout,
                META_DECODED_LIMIT: self.settings.robots_max_size,
            },
            dont_filter=True,
        )
        self.stats.inc_value("nutch/fetch/robots/fetched")
        try:
            response = await self._download_following(robots)
        except Exception as exc:  # noqa: BLE001 - every failure has the same verdict
            # Any failure allows everything, as in Nutch. Unlike Nutch 2.x, the verdict is kept:
            # a host whose robots.txt times out would otherwise cost a timeout per page.
            logger.info(
                "Cannot fetch %(url)s (%(error)s): allowing everything",
                {"url": robots.url, "error": exc},
            )
            self.stats.inc_value("nutch/fetch/robots/error")
            return RobotsRules(rule="allow"), True, None
        if response is None:
            # RFC 9309 §2.3.1.2: past five redirects (or in a loop) robots.txt is unavailable,
            # and an unavailable robots.txt allows everything (§2.3.1.3).
            logger.info(
                "%(url)s redirects more than %(n)d times, or in a loop: allowing everything",
                {"url": robots.url, "n": ROBOTS_REDIRECTS},
            )
            self.stats.inc_value("nutch/fetch/robots/redirect_exceeded")
            return RobotsRules(rule="allow"), True, None
        self.stats.inc_value(f"nutch/fetch/robots/status/{response.status}")
        body = response.body
        limit = self.settings.robots_max_size
        if 0 <= limit < len(body) or "download_stopped" in response.flags:
            self.stats.inc_value("nutch/fetch/robots/truncated")
            if limit >= 0:
                body = body[:limit]
        rules, keep = self._rules_from(response.status, body)
        record = RobotsRecord(round(self._clock() * 1000), response.status, body)
        return rules, keep, record if keep else None

    def _rules_from(self, status: int, body: bytes) -> tuple[RobotsRules, bool]:
        """The rules a robots.txt answer gives, and whether they hold for a while."""
        verdict = robots_verdict(status, self.settings.robots_403_allow, self.settings.robots_defer)
        if verdict.defer:
            return RobotsRules(rule=None, deferred=True), False
        if not verdict.parse:
            return RobotsRules(rule=verdict.rule), verdict.cache
        parser = Protego.parse(body.decode("utf-8", "replace"))
        delay = parser.crawl_delay(self.agent)
        return RobotsRules(parser, crawl_delay=None if delay is None else float(delay)), True

    async def _download_following(self, request: Request) -> Response | None:
        """The answer to *request* (a robots.txt) once its redirects are followed, up to
        :data:`ROBOTS_REDIRECTS`; ``None`` past them, in a loop, or towards a scheme that is
        not fetched."""
        seen = {request.url}
        for _ in range(ROBOTS_REDIRECTS + 1):
            response = await self.download(request)
            location = response.headers.get(b"Location")
            if response.status not in _REDIRECT_CODES or not location:
                return response
            target = urljoin(request.url, location.decode("latin-1").strip())
            if urlsplit(target).scheme not in ("http", "https") or target in seen:
                return None
            seen.add(target)
            self.stats.inc_value("nutch/fetch/robots/redirect")
            meta = {k: v for k, v in request.meta.items() if k != _RECEIVED}
            request = request.replace(url=target, meta=meta)
        return None

    # --- the host memory ------------------------------------------------------------------------

    def _memory_of(self) -> HostMemory | None:
        """The host memory, opened on first use (in a thread); ``None`` when there is none."""
        if self._memory is None and self._open_memory is not None and not self._memory_failed:
            self._memory = self._open_memory()
        return self._memory

    async def _recall(self, origin: str) -> RobotsRecord | None:
        if self._open_memory is None or self._memory_failed:
            return None
        try:
            found = await run_in_thread(lambda: self._robots_recalled(origin))
        except StoreError as exc:
            self._forget_memory(exc)
            return None
        return found

    def _robots_recalled(self, origin: str) -> RobotsRecord | None:
        memory = self._memory_of()
        return None if memory is None else memory.robots([origin]).get(origin)

    async def _remember(self, origin: str, record: RobotsRecord) -> None:
        if self._open_memory is None or self._memory_failed:
            return

        def keep() -> None:
            memory = self._memory_of()
            if memory is not None:
                memory.keep_robots({origin: record})

        try:
            await run_in_thread(keep)
        except StoreError as exc:
            self._forget_memory(exc)

    def _forget_memory(self, exc: Exception) -> None:
        """The host memory failed: go on without it (robots.txt is fetched once per process, as
        it was), and say so once."""
        self._memory_failed = True
        self.stats.inc_value("nutch/fetch/robots/memory_error")
        logger.warning(
            "Cannot share robots.txt answers with the other processes of the crawl: %s", exc
        )

    def _check(
        self, request: Request, rules: RobotsRules, *, after_robots: bool = False
    ) -> Request | None:
        if after_robots:
            # The scheduler owes the host its delay from now, whatever the verdict.
            request.meta[META_AFTER_ROBOTS] = True
        if rules.deferred:
            self.stats.inc_value("nutch/fetch/robots/deferred")
            deferred = request.copy()
            deferred.meta[META_DEFER] = self.settings.robots_defer_delay
            return deferred
        if not rules.allowed(request.url, self.agent):
            self.stats.inc_value("nutch/fetch/robots/denied")
            raise RobotsDenied(request.url, "disallowed")
        if rules.crawl_delay is not None:
            limit = self.settings.max_crawl_delay
            if 0 <= limit < rules.crawl_delay:
                self.stats.inc_value("nutch/fetch/robots/crawl_delay_too_long")
                raise RobotsDenied(request.url, "crawl-delay")
            request.meta[META_CRAWL_DELAY] = rules.crawl_delay
        if after_robots:
            # Back to the scheduler, which starts it once the delay after robots.txt is over.
            return request.copy()
        return None
