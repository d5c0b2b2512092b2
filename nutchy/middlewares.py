"""The fetch's downloader middleware: every request of a row ends here as a Nutch outcome.

:class:`NutchFetchMiddleware` sits outside every other downloader middleware (order 40, before
Scrapy's first at 50), so it sees each request of a row before the others and its final
response or exception after them. For each one it:

- makes the request conditional (``If-Modified-Since`` only for a known modified time,
  ``If-None-Match`` from the stored ETag) and Nutch-like: no redirect followed by Scrapy, no
  retry, every HTTP status handed back, ``http.timeout``;
- cuts the body at ``http.content.limit`` while it downloads (:exc:`~scrapy.exceptions.StopDownload`
  from the ``bytes_received`` signal, so the rest is never transferred) and marks it truncated;
- maps the response or the exception to Nutch's ProtocolStatus and CrawlStatus
  (:mod:`nutchy.core.fetch`), builds the row's update, and sends :data:`nutchy._fetch.fetch_finished`,
  which the scheduler counts, writes and uses for the queue's politeness;
- records redirects the Nutch way, and follows them within the fetch when
  ``http.redirect.max`` > 0 (loops and overlong chains are not followed);
- fetches only ``http`` and ``https`` URLs: any other scheme (a ``file:`` seed injected with
  ``-noFilter``, a redirect to ``ftp:``) is recorded as PROTO_NOT_FOUND without a request;
- records a body that its ``Content-Encoding`` cannot decode
  (:mod:`nutchy.compression`) as a failed fetch, and one decoded past the content limit as
  truncated.

Every request of a row ends in exactly one recorded outcome, whatever happens to it: an exception
raised by any downloader middleware, in ``process_request``, ``process_response`` or the download
itself, reaches the request's errback (:meth:`NutchFetchMiddleware.download_failed`, set here),
which records it as a failed fetch when nothing else did. The errback also keeps Scrapy from
logging such a failure as an error with a traceback: it is an outcome, recorded.

Responses reach the spider with their outcome in ``response.meta["nutch_outcome"]``: those
recorded as FETCHED, or every one when the spider's ``nutch_every_response`` is true; the others
are dropped quietly once recorded (:exc:`AnswerRecorded`). A request that ends in an exception is
recorded, then dropped quietly (an :exc:`~scrapy.exceptions.IgnoreRequest`), as Nutch logs a
failed fetch and moves on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
    StopDownload,
)
from twisted.internet import error as tx_error

from nutchy._fetch import (
    META_CHAIN,
    META_ENTRY,
    META_EXPIRED,
    META_FETCH_TIME,
    META_FOLLOW,
    META_NEW_ROW,
    META_OUTCOME,
    META_ROBOTS,
    FetchSettings,
    fetch_finished,
)
from nutchy.compression import DECODED_TRUNCATED, META_DECODE_ERROR, META_DECODED_LIMIT, UNDECODABLE
from nutchy.core.fetch import (
    FetchEntry,
    FetchOutcome,
    conditional_headers,
    exception_status,
    fetch_change,
    http_outcome,
    parse_retry_after,
    redirect_loop,
)
from nutchy.core.status import CrawlStatus, Mark, ProtocolStatus, ProtocolStatusCode
from nutchy.core.urls import InvalidURL, host_of, normalize_url
from nutchy.jobs import _settings
from nutchy.resolver import AddressGuard, AddressRefused, Refusal
from nutchy.robots import RobotsDenied
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector
    from twisted.python.failure import Failure

    from nutchy.core.urlfilter import RegexURLFilter

__all__ = ["AnswerRecorded", "FetchFailed", "NutchFetchMiddleware"]

logger = logging.getLogger(__name__)

# Scrapy meta key of the bytes received so far (private to this module).
_RECEIVED = "_nutch_received"
# Request meta: the request's outcome was recorded (private to this module).
_RECORDED = "_nutch_recorded"
#: The schemes the fetch downloads.
FETCHED_SCHEMES = ("http", "https")


class UnsupportedScheme(IgnoreRequest):
    """A row whose URL is neither ``http`` nor ``https``: never downloaded."""


class FetchFailed(IgnoreRequest):
    """A fetch that ended without a response; its outcome (*outcome*) is recorded already.

    Raised from :meth:`NutchFetchMiddleware.process_exception`, so Scrapy drops the request
    without logging it as an error, as Nutch logs a failed fetch at INFO and moves on.
    """

    def __init__(self, outcome: FetchOutcome) -> None:
        super().__init__(outcome.status.args[0] if outcome.status.args else outcome.status.name)
        self.outcome = outcome


class AnswerRecorded(IgnoreRequest):
    """An answer that is not a page fetched with success (a 304, a 404, a redirect recorded...):
    its outcome (*outcome*) is recorded, and the spider has no use for it.

    Raised from :meth:`NutchFetchMiddleware.process_response` unless the spider asks for every
    answer (``nutch_every_response``), so that Scrapy drops it quietly instead of handing it to
    the spider and its middlewares.
    """

    def __init__(self, outcome: FetchOutcome) -> None:
        super().__init__(outcome.status.name)
        self.outcome = outcome


class NutchFetchMiddleware:
    """Turns the requests of rows into Nutch fetch outcomes (see the module docstring).

    *settings* are the fetch's settings; *url_filter* filters redirect targets (``None``: none
    is filtered); *signals* and *stats* are the crawler's. With *every_response* false, only
    the answers recorded as FETCHED go on to the spider (see :exc:`AnswerRecorded`).
    """

    def __init__(
        self,
        settings: FetchSettings,
        *,
        signals: SignalManager,
        stats: StatsCollector,
        url_filter: RegexURLFilter | None,
        every_response: bool = True,
        address_guard: AddressGuard | None = None,
    ) -> None:
        self.settings = settings
        self.every_response = every_response
        self.signals = signals
        self.stats = stats
        self.url_filter = url_filter
        #: Refuses addresses that are not public (NUTCH_ADDRESS_GUARD_ENABLED), or ``None``.
        self.address_guard = address_guard

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        middleware = cls(
            FetchSettings.from_settings(crawler.settings),
            signals=crawler.signals,
            stats=crawler.stats,
            url_filter=_settings.url_filter(crawler.settings),
            # The spider exists before the engine builds its middlewares.
            every_response=getattr(crawler.spider, "nutch_every_response", True),
            address_guard=AddressGuard.from_settings(crawler.settings),
        )
        crawler.signals.connect(middleware.bytes_received, signal=signals.bytes_received)
        return middleware

    # --- requests ------------------------------------------------------------------------------

    def process_request(self, request: Request) -> None:
        guard = self.address_guard
        if guard is not None:
            guard.install(_reactor())  # before anything connects: a no-op once installed
        entry = request.meta.get(META_ENTRY)
        if entry is None or request.meta.get(META_ROBOTS):
            return
        if request.errback is None:
            request.errback = self.download_failed
        scheme = request.url.partition(":")[0].lower()
        if scheme not in FETCHED_SCHEMES:
            raise UnsupportedScheme(f"{scheme}: only http and https URLs are fetched")
        if guard is not None:
            guard.check_url(request.url)  # AddressRefused for a host written as such an address
        for name, value in conditional_headers(entry).items():
            request.headers.setdefault(name, value)
        meta = request.meta
        meta.setdefault("dont_redirect", True)  # redirects are recorded, or followed below
        meta.setdefault("dont_retry", True)  # a failed fetch is retried by a later round
        meta.setdefault("handle_httpstatus_all", True)  # every status is an outcome
        meta.setdefault("dont_obey_robotstxt", True)  # nutchy.robots decides
        meta.setdefault("download_timeout", self.settings.timeout)
        # nutchy.compression decodes the body up to the content limit, and no further.
        meta.setdefault(META_DECODED_LIMIT, self.settings.content_limit)
        if self.settings.content_limit >= 0:
            # The body stops at the limit (bytes_received below), so a large announced size is
            # no reason to warn. DOWNLOAD_MAXSIZE still cancels a response announced larger.
            meta.setdefault("download_warnsize", 0)

    def bytes_received(self, data: bytes, request: Request) -> None:
        """Count the body's bytes as they arrive, and stop the download once more than
        ``http.content.limit`` have come; the response keeps what came and is flagged
        ``download_stopped``."""
        meta = request.meta
        if META_ENTRY not in meta:
            return
        received = meta.get(_RECEIVED, 0) + len(data)
        meta[_RECEIVED] = received
        if 0 <= self.settings.content_limit < received:
            raise StopDownload(fail=False)

    # --- outcomes ------------------------------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Request | Response:
        entry: FetchEntry | None = request.meta.get(META_ENTRY)
        if entry is None or request.meta.get(META_ROBOTS):
            return response
        self._drop_expired(request)
        now = _now()
        if UNDECODABLE in response.flags and response.status == 200:
            # As in Nutch, a page whose body does not unzip is a failed fetch, tried again
            # later; any other answer is what its status says.
            self.process_exception(request, _Undecodable(request.meta.get(META_DECODE_ERROR, "")))
        outcome = self._outcome(entry, request, response)
        target = self._redirect_target(entry, outcome)
        retry_after = None
        if response.status in (429, 503):
            value = response.headers.get(b"Retry-After")
            retry_after = parse_retry_after(_text(value) if value else None, now)
        self._finish(
            request,
            outcome,
            self._update(request, entry, outcome, target, now),
            retry_after=retry_after,
            throttled=response.status == 429,
            response=response,
        )
        follow = self._follow(request, entry, target)
        if follow is not None:
            return follow
        request.meta[META_OUTCOME] = outcome
        request.meta[META_FETCH_TIME] = now
        if not self.every_response and outcome.crawl_status != CrawlStatus.FETCHED:
            raise AnswerRecorded(outcome)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        entry: FetchEntry | None = request.meta.get(META_ENTRY)
        if entry is None or request.meta.get(META_ROBOTS):
            return
        self._drop_expired(request)
        requested = True
        refusal = self._refusal(request, exception)
        if isinstance(exception, RobotsDenied):
            outcome = FetchOutcome(ProtocolStatus(ProtocolStatusCode.ROBOTS_DENIED))
            requested = False
        elif isinstance(exception, UnsupportedScheme):
            outcome = FetchOutcome(
                ProtocolStatus(ProtocolStatusCode.PROTO_NOT_FOUND, (str(exception),))
            )
            requested = False
            self.stats.inc_value("nutch/fetch/exception/scheme")
        elif refusal is not None:
            outcome = self._address_refused(entry, refusal)
            requested = False
        elif isinstance(exception, IgnoreRequest):
            # Dropped by another component: nothing is known of the page; it stays unfetched.
            self._finish(request, None, None)
            return
        else:
            reason, message = describe_exception(exception)
            outcome = FetchOutcome(exception_status(reason, message))
            self.stats.inc_value(f"nutch/fetch/exception/{reason}")
            logger.info(
                "Fetch of %(url)s failed: %(status)s",
                {
                    "url": entry.url,
                    "status": outcome.status.args[0],
                },
            )
        update = self._update(request, entry, outcome, None, _now())
        self._finish(request, outcome, update, requested=requested)
        raise FetchFailed(outcome) from exception

    def _drop_expired(self, request: Request) -> None:
        """Drop quietly the answer of a request that the scheduler's watchdog recorded already."""
        if request.meta.get(META_EXPIRED):
            request.meta[_RECORDED] = True
            self.stats.inc_value("nutch/fetch/watchdog/late")
            raise IgnoreRequest("recorded by the watchdog")

    def download_failed(self, failure: Failure) -> None:
        """The errback of the requests of rows: a failure that no ``process_exception`` saw (an
        exception raised in a downloader middleware's ``process_response``, such as a body its
        ``Content-Encoding`` cannot decode in a middleware of the project's) is recorded as a
        failed fetch; one already recorded is dropped quietly."""
        request: Request = failure.request  # type: ignore[attr-defined]
        if request.meta.get(_RECORDED) or META_ENTRY not in request.meta:
            return
        exception = failure.value
        if not isinstance(exception, Exception):
            return
        self.stats.inc_value("nutch/fetch/exception/after_download")
        with contextlib.suppress(FetchFailed):
            self.process_exception(request, exception)

    def _refusal(self, request: Request, exception: Exception) -> Refusal | None:
        """The address guard's refusal that *exception* stands for, if any: its own, or a
        failed name lookup whose every address the guard refused."""
        if isinstance(exception, AddressRefused):
            return exception.refusal
        if self.address_guard is None or describe_exception(exception)[0] != "dns":
            return None
        return self.address_guard.refusal_of(request.url)

    def _address_refused(self, entry: FetchEntry, refusal: Refusal) -> FetchOutcome:
        """ACCESS_DENIED (crawl status GONE), for a row whose host the address guard refused."""
        self.stats.inc_value("nutch/fetch/address_refused")
        self.stats.inc_value(f"nutch/fetch/address_refused/{refusal.reason}")
        logger.info(
            "Refused %(url)s: %(refusal)s (NUTCH_ADDRESS_GUARD_ENABLED)",
            {"url": entry.url, "refusal": refusal},
        )
        return FetchOutcome(
            ProtocolStatus(ProtocolStatusCode.ACCESS_DENIED, (f"address refused: {refusal}",))
        )

    def _outcome(self, entry: FetchEntry, request: Request, response: Response) -> FetchOutcome:
        # A body of another length than what came over the wire was decoded (Content-Encoding):
        # its Content-Length is that of the encoded body, and is not stored (Nutch 2.4,
        # NUTCH-2548), so that a parser comparing it with the content is not misled.
        encoded = request.meta.get(_RECEIVED, 0) != len(response.body)
        headers: list[tuple[str, str]] = []
        for name, values in response.headers.items():
            if values and not (encoded and name == b"Content-Length"):
                headers.append((_text(name), _text(values[0])))
        latency = request.meta.get("download_latency")
        settings = self.settings
        return http_outcome(
            entry.url,
            response.status,
            headers,
            response.body,
            content_limit=settings.content_limit,
            truncated="download_stopped" in response.flags or DECODED_TRUNCATED in response.flags,
            response_time=(
                round(latency * 1000)
                if settings.store_response_time and latency is not None
                else None
            ),
            address=(
                str(response.ip_address) if settings.store_ip and response.ip_address else None
            ),
        )

    def _redirect_target(self, entry: FetchEntry, outcome: FetchOutcome) -> str | None:
        """The redirect's target as it is recorded: normalized and filtered, not the URL itself,
        and on the same host when ``db.ignore.external.links``; ``None`` otherwise."""
        redirect = outcome.redirect
        if redirect is None:
            return None
        try:
            target = normalize_url(redirect[0])
            same_host = host_of(target) == host_of(entry.url)
        except InvalidURL:
            self.stats.inc_value("nutch/fetch/redirect/invalid")
            return None
        if target == entry.url:
            return None
        if self.url_filter is not None and not self.url_filter.accepts(target):
            self.stats.inc_value("nutch/fetch/redirect/filtered")
            return None
        if self.settings.ignore_external_links and not same_host:
            self.stats.inc_value("nutch/fetch/redirect/external")
            return None
        return target

    def _update(
        self,
        request: Request,
        entry: FetchEntry,
        outcome: FetchOutcome,
        target: str | None,
        now: int,
    ) -> RowUpdate:
        change = fetch_change(
            entry,
            outcome,
            now=now,
            store_content=self.settings.store_content,
            redirect_target=target,
        )
        if META_CHAIN in request.meta and len(request.meta[META_CHAIN]) > 1:
            # A followed redirect's target: it joins the batch, so that parse and updatedb
            # process it with the rest.
            change.entries["markers"][Mark.GENERATE] = entry.batch_id
            change.fields["batch_id"] = entry.batch_id
            if request.meta.get(META_NEW_ROW):
                change.fields["fetch_interval"] = self.settings.fetch_interval_default
        return build_update(entry.key, *change)

    def _follow(self, request: Request, entry: FetchEntry, target: str | None) -> Request | None:
        """The request that follows a redirect to *target* within this fetch, or ``None``."""
        if target is None or self.settings.redirect_max <= 0:
            return None
        chain: list[str] = request.meta.get(META_CHAIN) or [entry.url]
        if redirect_loop(chain, target):
            self.stats.inc_value("nutch/fetch/redirect/loop")
            return None
        if len(chain) > self.settings.redirect_max:
            self.stats.inc_value("nutch/fetch/redirect/exceeded")
            return None
        self.stats.inc_value("nutch/fetch/redirect/followed")
        return Request(
            target,
            meta={META_FOLLOW: (target, entry.batch_id), META_CHAIN: [*chain, target]},
            dont_filter=True,
        )

    def _finish(
        self,
        request: Request,
        outcome: FetchOutcome | None,
        update: RowUpdate | None,
        *,
        retry_after: float | None = None,
        throttled: bool = False,
        requested: bool = True,
        response: Response | None = None,
    ) -> None:
        request.meta[_RECORDED] = True
        self.signals.send_catch_log(
            fetch_finished,
            request=request,
            outcome=outcome,
            update=update,
            retry_after=retry_after,
            throttled=throttled,
            requested=requested,
            response=response,
        )


class _Undecodable(Exception):
    """A body that its ``Content-Encoding`` does not decode (reason ``decoding``)."""


def describe_exception(exception: BaseException) -> tuple[str, str]:
    """A short reason (``timeout``, ``dns``, ``refused``, ``reset``, ``tls``, or the exception's
    class name) and a message for a failed download, found through the exception, its causes
    and, for Twisted's response failures, the reasons it wraps."""
    message = str(exception) or type(exception).__name__
    if isinstance(exception, _Undecodable):
        return "decoding", message
    for exc in _causes(exception):
        if isinstance(
            exc,
            (DownloadTimeoutError, tx_error.TimeoutError, tx_error.TCPTimedOutError, TimeoutError),
        ):
            return "timeout", message
        if isinstance(exc, (CannotResolveHostError, tx_error.DNSLookupError)):
            return "dns", message
        if isinstance(exc, (DownloadConnectionRefusedError, tx_error.ConnectionRefusedError)):
            return "refused", message
        if type(exc).__module__.split(".")[0] in ("OpenSSL", "ssl", "service_identity"):
            return "tls", message
    for exc in _causes(exception):
        if isinstance(
            exc,
            (
                tx_error.ConnectionLost,
                tx_error.ConnectionDone,
                tx_error.ConnectionAborted,
                ConnectionError,
            ),
        ) or type(exc).__name__ in (
            "ResponseFailed",
            "ResponseNeverReceived",
            "DownloadFailedError",
            "ResponseDataLossError",
        ):
            return "reset", message
    return type(exception).__name__, message


def _causes(exception: BaseException) -> list[BaseException]:
    """*exception*, its causes and contexts, and the failures Twisted's ``ResponseFailed`` and
    ``ResponseNeverReceived`` wrap, depth first."""
    found: list[BaseException] = []
    todo: list[BaseException] = [exception]
    while todo and len(found) < 32:
        exc = todo.pop()
        if any(exc is seen for seen in found):
            continue
        found.append(exc)
        reasons: Any = getattr(exc, "reasons", None)
        if isinstance(reasons, list):
            todo.extend(
                r.value for r in reasons if isinstance(getattr(r, "value", None), BaseException)
            )
        todo.extend(n for n in (exc.__cause__, exc.__context__) if n is not None)
    return found


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _now() -> int:
    return int(time.time() * 1000)


def _reactor() -> Any:
    """The running reactor (imported late: importing it earlier would install one)."""
    from twisted.internet import reactor

    return reactor
