"""robots.txt for the fetch: fetched once per host, parsed with Protego, and every page checked.

:class:`NutchRobotsMiddleware` (order 90) fetches ``/robots.txt`` the first time a page of a
``scheme://host:port`` is requested, through the engine (so it passes the other downloader
middlewares), and keeps the verdict for the crawl. It follows up to five redirects, to any host,
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

The answer to robots.txt decides as in Nutch (:func:`nutchy.core.fetch.robots_verdict`): 200 is
parsed, 403 forbids everything unless ``http.robots.403.allow``, other codes and failed fetches
allow everything. A 5xx or 429 defers the host (``http.robots.503.defer.visits``, Nutch 1.x): the
page goes back to the scheduler, which holds its queue for
``http.robots.503.defer.visits.delay`` and asks again, up to ``...retries`` times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from protego import Protego
from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from nutchy._fetch import (
    META_CRAWL_DELAY,
    META_DEFER,
    META_ENTRY,
    META_QUEUE,
    META_ROBOTS,
    FetchSettings,
)
from nutchy.compression import META_DECODED_LIMIT
from nutchy.core.fetch import robots_verdict

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

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
    *agent* is the user agent whose rules apply.
    """

    def __init__(
        self, settings: FetchSettings, *, download: Download, agent: str, stats: StatsCollector
    ) -> None:
        self.settings = settings
        self.download = download
        self.agent = agent
        self.stats = stats
        self._rules: dict[str, RobotsRules] = {}
        #: origin → the requests waiting for the robots.txt being fetched
        self._waiting: dict[str, list[Deferred[RobotsRules]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings

        def download(request: Request) -> Coroutine[Any, Any, Response]:
            # The engine exists once the crawl runs; middlewares are built before it.
            return crawler.engine.download_async(request)

        agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or ""
        middleware = cls(
            FetchSettings.from_settings(settings),
            download=download,
            agent=str(agent),
            stats=crawler.stats,
        )
        crawler.signals.connect(middleware.bytes_received, signal=signals.bytes_received)
        return middleware

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
        rules = self._rules.get(origin)
        if rules is not None:
            return self._check(request, rules)  # the usual case: no coroutine needed
        return self._fetch_then_check(request, origin)

    async def _fetch_then_check(self, request: Request, origin: str) -> Request | None:
        waiters = self._waiting.get(origin)
        if waiters is not None:  # another page of the host is fetching robots.txt already
            waiter: Deferred[RobotsRules] = Deferred()
            waiters.append(waiter)
            rules = await maybe_deferred_to_future(waiter)
        else:
            self._waiting[origin] = []
            try:
                rules, cache = await self._fetch(request, origin)
            except BaseException:
                rules, cache = RobotsRules(rule="allow"), False
                raise
            finally:
                if cache:
                    self._rules[origin] = rules
                for waiter in self._waiting.pop(origin):
                    waiter.callback(rules)
        return self._check(request, rules)

    async def _fetch(self, request: Request, origin: str) -> tuple[RobotsRules, bool]:
        """The rules of *origin*, and whether they hold for the rest of the crawl."""
        robots = Request(
            f"{origin}/robots.txt",
            meta={
                META_ROBOTS: True,
                # Its own download slot: as in Nutch, fetching robots.txt does not count
                # against the host's politeness delay.
                "download_slot": f"{request.meta.get(META_QUEUE, origin)} robots.txt",
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
            return RobotsRules(rule="allow"), True
        if response is None:
            # RFC 9309 §2.3.1.2: past five redirects (or in a loop) robots.txt is unavailable,
            # and an unavailable robots.txt allows everything (§2.3.1.3).
            logger.info(
                "%(url)s redirects more than %(n)d times, or in a loop: allowing everything",
                {"url": robots.url, "n": ROBOTS_REDIRECTS},
            )
            self.stats.inc_value("nutch/fetch/robots/redirect_exceeded")
            return RobotsRules(rule="allow"), True
        self.stats.inc_value(f"nutch/fetch/robots/status/{response.status}")
        verdict = robots_verdict(
            response.status, self.settings.robots_403_allow, self.settings.robots_defer
        )
        if verdict.defer:
            return RobotsRules(rule=None, deferred=True), False
        if not verdict.parse:
            return RobotsRules(rule=verdict.rule), verdict.cache
        body = response.body
        limit = self.settings.robots_max_size
        if 0 <= limit < len(body) or "download_stopped" in response.flags:
            self.stats.inc_value("nutch/fetch/robots/truncated")
            if limit >= 0:
                body = body[:limit]
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

    def _check(self, request: Request, rules: RobotsRules) -> Request | None:
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
        return None
