"""Fetch: what one fetch of a row means, in Nutch 2.x's terms, and what is written for it.

This module turns the raw facts of a fetch (an HTTP status code and headers, an exception, a
robots.txt rule) into Nutch's ``ProtocolStatus`` and ``CrawlStatus``, and those into the columns
of the row (reference: ``HttpBase.getProtocolOutput`` and ``FetcherReducer.output`` of Nutch 2.x).
The Scrapy adapters (:mod:`nutchy.middlewares`, :mod:`nutchy.scheduler`) only gather the facts and
apply the result.

>>> http_status(404, "http://example.com/x").name
'NOTFOUND'
>>> crawl_status_of(http_status(301, "http://example.com/", "/new").code).name
'REDIR_PERM'
>>> http_status(301, "http://example.com/a/b", "../c").args
('http://example.com/c',)

The columns written for a fetch (:func:`fetch_change`), as inputs of
:func:`nutchy.store.schema.build_update`:

- always: ``f:st`` (the crawl status), ``f:pts`` (the row's previous ``f:ts``), ``f:ts`` (now),
  ``f:prot``, ``mk:_ftcmrk_`` (the value of ``mk:_gnmrk_``) and ``mtdt:_nft_`` (now, nutchy
  only: ``f:ts`` holds it only until updatedb), the last two as single entries;
- for any HTTP response: the ``h`` family, replaced by the response's headers (a 304 instead
  updates the stored headers, see below), ``mtdt:_rs_`` (response time, ms) and ``mtdt:_ip_``
  (server address) when known;
- for SUCCESS and redirects only: ``f:cnt``, ``f:typ`` and ``f:bas``, and the truncation marks
  ``mtdt:truncated-content`` / ``mtdt:truncated-content-reason`` (set or removed);
- for a redirect whose target is kept: ``ol`` replaced by the single entry ``target → ""``,
  ``mtdt:___rdrdsc__ = "y"`` and ``f:rpr`` (:func:`choose_repr`).

Where nutchy departs from Nutch 2.x (docs/fetch.md lists each with its reason):
``If-Modified-Since`` is sent only for a known modified time, ``If-None-Match`` is sent from the
stored ETag, and a 304 updates the stored headers instead of replacing them.
"""

from __future__ import annotations

import email.utils
import functools
import mimetypes
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple
from urllib.parse import urljoin, urlsplit

from nutchy.core.status import (
    CrawlStatus,
    Mark,
    Metadata,
    ProtocolStatus,
    ProtocolStatusCode,
)
from nutchy.core.urls import InvalidURL, domain_of, host_of
from nutchy.core.webpage import WebPage

__all__ = [
    "QUEUE_MODES",
    "TRUNCATED_KEY",
    "TRUNCATED_REASON_KEY",
    "FetchEntry",
    "FetchOutcome",
    "RobotsVerdict",
    "RowChange",
    "canonical_header",
    "choose_repr",
    "conditional_headers",
    "crawl_status_of",
    "entry_from_page",
    "exception_status",
    "fetch_change",
    "http_outcome",
    "http_status",
    "parse_retry_after",
    "queue_id",
    "redirect_loop",
    "robots_verdict",
]

#: Valid values of ``fetcher.queue.mode``.
QUEUE_MODES: Final = ("byHost", "byDomain", "byIP")

#: ``mtdt`` keys that mark content cut at ``http.content.limit`` (the names of Nutch 1.x's
#: ``Response.TRUNCATED_CONTENT`` and ``TRUNCATED_CONTENT_REASON``; Nutch 2.x ignores them).
TRUNCATED_KEY: Final = "truncated-content"
TRUNCATED_REASON_KEY: Final = "truncated-content-reason"

_P = ProtocolStatusCode

# HttpBase.getProtocolOutput: the 3xx codes that are temporary redirects; every other 3xx but 304
# is a permanent one (300, 301, 305, 308, ...).
_TEMP_REDIRECTS: Final = frozenset({302, 303, 307})

# FetcherReducer.output: the crawl status of each protocol status. Everything else (EXCEPTION,
# RETRY, BLOCKED, FAILED, unknown codes) is RETRY.
_CRAWL_STATUS: Final = {
    _P.SUCCESS: CrawlStatus.FETCHED,
    _P.MOVED: CrawlStatus.REDIR_PERM,
    _P.TEMP_MOVED: CrawlStatus.REDIR_TEMP,
    _P.NOTMODIFIED: CrawlStatus.NOTMODIFIED,
    _P.GONE: CrawlStatus.GONE,
    _P.NOTFOUND: CrawlStatus.GONE,
    _P.ACCESS_DENIED: CrawlStatus.GONE,
    _P.ROBOTS_DENIED: CrawlStatus.GONE,
}

# Header names whose usual spelling is not the capitalized form of each dash-separated word.
_HEADER_SPELLING: Final = {
    "etag": "ETag",
    "www-authenticate": "WWW-Authenticate",
    "content-md5": "Content-MD5",
    "te": "TE",
    "dnt": "DNT",
    "p3p": "P3P",
    "x-xss-protection": "X-XSS-Protection",
    "x-ua-compatible": "X-UA-Compatible",
}

_MEDIA_TYPE_RE: Final = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")


# --- protocol and crawl statuses -----------------------------------------------------------------


def http_status(code: int, url: str, location: str | None = None) -> ProtocolStatus:
    """The ProtocolStatus of an HTTP response, as Nutch's ``HttpBase`` gives it.

    *location* is the ``Location`` header (for a 3xx); it is resolved against *url*, and an empty
    or missing one resolves to *url* itself.

    >>> http_status(200, "http://a.example/").name, http_status(204, "http://a.example/").args
    ('SUCCESS', ('Http code=204, url=http://a.example/',))
    >>> http_status(307, "http://a.example/", "http://b.example/").name
    'TEMP_MOVED'
    >>> http_status(410, "http://a.example/x").args
    ('Http: 410 url=http://a.example/x',)
    """
    if code == 200:
        return ProtocolStatus(_P.SUCCESS)
    if 300 <= code < 400:
        target = urljoin(url, location or "")
        if code == 304:
            return ProtocolStatus(_P.NOTMODIFIED, (target,))
        return ProtocolStatus(_P.TEMP_MOVED if code in _TEMP_REDIRECTS else _P.MOVED, (target,))
    if code == 400:
        return ProtocolStatus(_P.GONE, (url,))
    if code == 401:
        return ProtocolStatus(_P.ACCESS_DENIED, (f"Authentication required: {url}",))
    if code == 404:
        return ProtocolStatus(_P.NOTFOUND, (url,))
    if code == 410:
        return ProtocolStatus(_P.GONE, (f"Http: 410 url={url}",))
    return ProtocolStatus(_P.EXCEPTION, (f"Http code={code}, url={url}",))


def exception_status(reason: str, message: str) -> ProtocolStatus:
    """The ProtocolStatus of a fetch that got no HTTP response: EXCEPTION, with *reason* (a short
    kind such as ``timeout``, ``dns``, ``refused``, ``reset`` or ``tls``) and *message* as its
    argument, where Nutch puts the Java exception's ``toString``.

    >>> exception_status("timeout", "took longer than 10.0 seconds").args
    ('timeout: took longer than 10.0 seconds',)
    """
    return ProtocolStatus(_P.EXCEPTION, (f"{reason}: {message}" if message else reason,))


def crawl_status_of(protocol_code: int) -> CrawlStatus:
    """The crawl status the fetcher writes for a protocol status code (reference §6.5).

    >>> [crawl_status_of(c).name for c in (1, 14, 18, 21, 16, 99)]
    ['FETCHED', 'GONE', 'GONE', 'NOTMODIFIED', 'RETRY', 'RETRY']
    """
    try:
        return _CRAWL_STATUS.get(ProtocolStatusCode(protocol_code), CrawlStatus.RETRY)
    except ValueError:
        return CrawlStatus.RETRY


def _has_content(protocol_code: int) -> bool:
    """Whether content is written for an outcome: SUCCESS and redirects only."""
    return protocol_code in (_P.SUCCESS, _P.MOVED, _P.TEMP_MOVED)


# --- what the fetcher knows of a row before fetching it ----------------------------------------


@dataclass(frozen=True, slots=True)
class FetchEntry:
    """One row to fetch, with what the fetch needs of it.

    *batch_id* is the row's generate mark (written back as its fetch mark); *fetch_time* its
    ``f:ts`` (written back as ``f:pts``); *modified_time* and *etag* make the request
    conditional; *repr_url* is the representative URL redirects start from; *partition* is the
    ``mtdt:_npt_`` generate wrote (``None`` when absent); *fetched* says whether the row already
    has a fetch mark.
    """

    key: str
    url: str
    batch_id: str
    fetch_time: int = 0
    modified_time: int = 0
    etag: str | None = None
    repr_url: str | None = None
    partition: int | None = None
    fetched: bool = False
    #: The row's signature (``p:sig``) before this fetch: the WARC writer writes a ``revisit``
    #: for content whose MD5 it is.
    signature: bytes | None = None


def entry_from_page(page: WebPage) -> FetchEntry | None:
    """The fetch entry of a row read with the fetch columns, or ``None`` if it has no generate
    mark (it is not part of any batch).

    >>> page = WebPage("com.example:http/", fetch_time=5, markers={"_gnmrk_": "b1"},
    ...                headers={"ETag": '"x"'}, metadata={"_npt_": (1).to_bytes(4, "big")})
    >>> entry = entry_from_page(page)
    >>> entry.url, entry.batch_id, entry.etag, entry.partition, entry.fetched
    ('http://example.com/', 'b1', '"x"', 1, False)
    """
    batch = page.markers.get(Mark.GENERATE)
    if batch is None:
        return None
    raw = page.metadata.get("_npt_")
    partition = int.from_bytes(raw, "big", signed=True) if raw and len(raw) == 4 else None
    return FetchEntry(
        key=page.key,
        url=page.url,
        batch_id=batch,
        fetch_time=page.fetch_time,
        modified_time=page.modified_time,
        etag=page.headers.get("ETag") or None,
        repr_url=page.repr_url,
        partition=partition,
        fetched=Mark.FETCH in page.markers,
        signature=page.signature,
    )


def conditional_headers(entry: FetchEntry) -> dict[str, str]:
    """The validators of a conditional GET: ``If-Modified-Since`` from the stored modified time,
    only when one is known (Nutch 2.x's protocol-http sends the 1970 date for an unknown one), and
    ``If-None-Match`` from the stored ETag.

    >>> conditional_headers(FetchEntry("k", "http://a.example/", "b", modified_time=0))
    {}
    >>> conditional_headers(FetchEntry("k", "http://a.example/", "b", modified_time=1_500_000_000_000,
    ...                                etag='"v1"'))
    {'If-Modified-Since': 'Fri, 14 Jul 2017 02:40:00 GMT', 'If-None-Match': '"v1"'}
    """
    headers: dict[str, str] = {}
    if entry.modified_time > 0:
        headers["If-Modified-Since"] = email.utils.formatdate(
            entry.modified_time / 1000, usegmt=True
        )
    if entry.etag:
        headers["If-None-Match"] = entry.etag
    return headers


def queue_id(url: str, mode: str, address: str | None = None) -> str:
    """The fetch queue of *url*: the lower-cased protocol, ``://`` and the host (``byHost``), the
    registered domain (``byDomain``) or the server's IP *address* (``byIP``), as Nutch's
    ``FetchItem.create`` builds it. Pages of one queue share its politeness.

    >>> queue_id("HTTP://WWW.Example.com:8080/x", "byHost")
    'http://www.example.com'
    >>> queue_id("http://news.bbc.co.uk/", "byDomain"), queue_id("http://a.example/", "byIP", "10.0.0.1")
    ('http://bbc.co.uk', 'http://10.0.0.1')
    """
    scheme = urlsplit(url).scheme.lower()
    if mode == "byHost":
        key = host_of(url)
    elif mode == "byDomain":
        key = domain_of(url)
    elif mode == "byIP":
        if address is None:
            raise ValueError("'byIP' queues need the server's address")
        key = address
    else:
        raise ValueError(f"unknown queue mode {mode!r}; valid modes: {', '.join(QUEUE_MODES)}")
    return f"{scheme}://{key.lower()}"


# --- redirects ---------------------------------------------------------------------------------


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split`` of Java: trailing empty strings are removed."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _file(url: str) -> str:
    """``java.net.URL.getFile``: the path and query."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def choose_repr(src: str, dst: str, temp: bool) -> str:
    """The representative URL of a redirect from *src* to *dst*: Nutch's ``URLUtil.chooseRepr``
    (Yahoo! Slurp's heuristics).

    Across domains the destination wins. A permanent redirect keeps a root source (path ``/`` or
    empty) and otherwise the destination. A temporary one keeps a root source over a deeper
    destination and a root destination over a deeper source; between two pages of one host the
    one with fewer path segments, then the shorter path, wins; otherwise the host with fewer
    labels. Ties keep the source.

    >>> choose_repr("http://a.com/", "http://a.com/xyz/index.html", temp=False)
    'http://a.com/'
    >>> choose_repr("http://a.com/xyz/index.html", "http://a.com/abc/page.html", temp=True)
    'http://a.com/abc/page.html'
    >>> choose_repr("http://www.a.com/", "http://www.news.a.com/", temp=True)
    'http://www.a.com/'
    >>> choose_repr("http://a.com/x", "http://b.com/y", temp=True)
    'http://b.com/y'
    """
    try:
        src_domain, dst_domain = domain_of(src), domain_of(dst)
        src_host, dst_host = host_of(src), host_of(dst)
    except InvalidURL:
        return dst
    if src_domain != dst_domain:
        return dst
    src_file, dst_file = _file(src), _file(dst)
    src_root = src_file in ("", "/")
    dst_root = dst_file in ("", "/")
    if not temp:
        return src if src_root else dst
    if src_root and not dst_root:
        return src
    if not src_root and dst_root:
        return dst
    if not src_root and not dst_root and src_host == dst_host:
        src_paths, dst_paths = len(_java_split(src_file, "/")), len(_java_split(dst_file, "/"))
        if src_paths != dst_paths:
            return dst if dst_paths < src_paths else src
        return dst if len(dst_file) < len(src_file) else src
    src_labels, dst_labels = len(_java_split(src_host, ".")), len(_java_split(dst_host, "."))
    return dst if dst_labels < src_labels else src


def redirect_loop(chain: Iterable[str], target: str) -> bool:
    """Whether following a redirect to *target* would revisit a URL of *chain* (the URLs fetched
    so far in this redirect chain, the first one included).

    >>> redirect_loop(["http://a.example/1", "http://a.example/2"], "http://a.example/1")
    True
    >>> redirect_loop(["http://a.example/1"], "http://a.example/2")
    False
    """
    return target in set(chain)


# --- politeness --------------------------------------------------------------------------------


#: The longest wait a ``Retry-After`` is read as (s): about 31 years, longer than any crawl.
RETRY_AFTER_MAX: Final = 1e9

_DIGITS_RE: Final = re.compile(r"[0-9]+", re.ASCII)


def parse_retry_after(value: str | None, now: int) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait, from *now* (ms), or ``None`` when the
    header is missing or unreadable. Both forms of RFC 9110 §10.2.3 are read: a number of seconds
    and an HTTP date (a date in the past means 0).

    Only ASCII digits make a number (``"²"`` and ``"١٢٠"`` are digits to :meth:`str.isdigit`,
    not to RFC 9110), and a number too long to mean anything reads as :data:`RETRY_AFTER_MAX`;
    nothing a server sends raises.

    >>> parse_retry_after("120", 0), parse_retry_after(" 0 ", 0), parse_retry_after("soon", 0)
    (120.0, 0.0, None)
    >>> parse_retry_after("Fri, 14 Jul 2017 02:40:30 GMT", 1_500_000_000_000)
    30.0
    >>> parse_retry_after("\u00b2", 0), parse_retry_after("-5", 0), parse_retry_after("9" * 5000, 0)
    (None, None, 1000000000.0)
    """
    if value is None:
        return None
    text = value.strip()
    if _DIGITS_RE.fullmatch(text):
        # int() of thousands of digits raises (Python's int max str digits) and a year of
        # seconds is already "never" for a crawl: compare by length first.
        return RETRY_AFTER_MAX if len(text) > 9 else min(float(text), RETRY_AFTER_MAX)
    try:
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            return None
        return min(max(0.0, when.timestamp() - now / 1000), RETRY_AFTER_MAX)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class RobotsVerdict(NamedTuple):
    """What to do with a host after fetching its robots.txt: *parse* the body as rules, or apply
    *rule* to every URL (``"allow"`` or ``"deny"``), or *defer* the host. *cache* says whether
    the verdict holds for the rest of the crawl."""

    parse: bool
    rule: str | None
    defer: bool
    cache: bool


def robots_verdict(code: int | None, allow_403: bool, defer_5xx: bool = True) -> RobotsVerdict:
    """The robots.txt policy for an HTTP status *code* (``None``: the fetch failed).

    As Nutch's ``HttpRobotRulesParser``: 200 is parsed; 403 forbids everything unless
    ``http.robots.403.allow``; any other answer allows everything. A 5xx (or 429) defers the host
    when *defer_5xx* (Nutch 1.x, NUTCH-2573: ``http.robots.503.defer.visits``) and otherwise allows
    everything without caching, as does a failed fetch (Nutch 2.x).

    >>> robots_verdict(200, True), robots_verdict(403, False).rule, robots_verdict(503, True).defer
    (RobotsVerdict(parse=True, rule=None, defer=False, cache=True), 'deny', True)
    >>> robots_verdict(None, True)
    RobotsVerdict(parse=False, rule='allow', defer=False, cache=False)
    """
    if code is None:
        return RobotsVerdict(False, "allow", False, False)
    if code == 200:
        return RobotsVerdict(True, None, False, True)
    if code >= 500 or code == 429:
        if defer_5xx:
            return RobotsVerdict(False, None, True, False)
        return RobotsVerdict(False, "allow", False, False)
    if code == 403 and not allow_403:
        return RobotsVerdict(False, "deny", False, True)
    return RobotsVerdict(False, "allow", False, True)


# --- the outcome of one fetch, and the columns it writes ---------------------------------------


@functools.lru_cache(maxsize=1024)
def canonical_header(name: str) -> str:
    """The spelling under which a header is stored in the ``h`` family: each dash-separated word
    capitalized (``content-length`` → ``Content-Length``), except the few names whose usual
    spelling differs (``ETag``, ``WWW-Authenticate``...).

    >>> canonical_header("CONTENT-TYPE"), canonical_header("etag"), canonical_header("x-foo-bar")
    ('Content-Type', 'ETag', 'X-Foo-Bar')
    """
    lower = name.lower()
    return _HEADER_SPELLING.get(lower) or "-".join(w.capitalize() for w in lower.split("-"))


def _media_type(content_type: str | None, url: str) -> str:
    """The media type of a response: that of its ``Content-Type`` header, else one guessed from
    the URL's path, else ``application/octet-stream``."""
    if content_type:
        media_type = _header_media_type(content_type)
        if media_type:
            return media_type
    guessed, _ = mimetypes.guess_type(urlsplit(url).path, strict=False)
    return guessed or "application/octet-stream"


@functools.lru_cache(maxsize=256)
def _header_media_type(content_type: str) -> str | None:
    match = _MEDIA_TYPE_RE.match(content_type.strip())
    return match.group(0).lower() if match else None


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """The outcome of one fetch: its ProtocolStatus, and what the response was, if any.

    *http_code* is 0 when there was no HTTP response (an exception, a robots.txt denial).
    *headers* are the response's headers by canonical name (``None``: no response). *content* is
    the body, already cut at the content limit, with *truncated* saying whether it was cut.
    *response_time* is in ms and *address* is the server's IP address, when known.
    """

    status: ProtocolStatus
    http_code: int = 0
    headers: Mapping[str, str] | None = None
    content: bytes | None = None
    content_type: str | None = None
    base_url: str | None = None
    truncated: bool = False
    response_time: int | None = None
    address: str | None = None

    @property
    def crawl_status(self) -> CrawlStatus:
        return crawl_status_of(self.status.code)

    @property
    def redirect(self) -> tuple[str, bool] | None:
        """``(target, temporary)`` for a redirect, else ``None``."""
        if self.status.code in (_P.MOVED, _P.TEMP_MOVED) and self.status.args:
            return self.status.args[0], self.status.code == _P.TEMP_MOVED
        return None


def http_outcome(
    url: str,
    code: int,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    content_limit: int = -1,
    truncated: bool = False,
    response_time: int | None = None,
    address: str | None = None,
) -> FetchOutcome:
    """The outcome of an HTTP response to *url*.

    *headers* are ``(name, value)`` pairs as received; the first value of a repeated header is
    kept, under its :func:`canonical_header` name. *body* is cut at *content_limit* bytes (-1: no
    limit), and the outcome is marked truncated if it was cut here or already (*truncated*: the
    download was stopped at the limit).

    >>> o = http_outcome("http://a.example/", 200, [("content-type", "text/html; charset=utf-8")],
    ...                  b"0123456789", content_limit=4)
    >>> o.status.name, o.content, o.truncated, o.content_type, dict(o.headers)
    ('SUCCESS', b'0123', True, 'text/html', {'Content-Type': 'text/html; charset=utf-8'})
    """
    stored: dict[str, str] = {}
    for name, value in headers:
        stored.setdefault(canonical_header(name), value)
    if 0 <= content_limit < len(body):
        body = body[:content_limit]
        truncated = True
    return FetchOutcome(
        status=http_status(code, url, stored.get("Location")),
        http_code=code,
        headers=stored,
        content=body,
        content_type=_media_type(stored.get("Content-Type"), url),
        base_url=url,
        truncated=truncated,
        response_time=response_time,
        address=address,
    )


class RowChange(NamedTuple):
    """A change of one row, as the arguments of :func:`nutchy.store.schema.build_update`."""

    fields: dict[str, object]
    entries: dict[str, dict[str, object]]
    replace: dict[str, dict[str, object]]


def fetch_change(
    entry: FetchEntry,
    outcome: FetchOutcome,
    *,
    now: int,
    store_content: bool = True,
    redirect_target: str | None = None,
) -> RowChange:
    """The columns written for *outcome* on *entry*'s row, fetched at *now* (ms).

    *store_content* False (``fetcher.store.content``) writes empty content in place of the body.
    *redirect_target* is the redirect's target after normalization and filtering, or ``None``
    when there is none to record (no redirect, or the target was filtered, is external with
    ``db.ignore.external.links``, or equals the URL).

    >>> e = FetchEntry("com.a:http/", "http://a.com/", "b1", fetch_time=7)
    >>> change = fetch_change(e, FetchOutcome(exception_status("dns", "no such host")), now=9)
    >>> change.fields["status"], change.fields["prev_fetch_time"], change.fields["fetch_time"]
    (<CrawlStatus.RETRY: 34>, 7, 9)
    >>> change.entries
    {'markers': {'_ftcmrk_': 'b1'}, 'metadata': {'_nft_': b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\t'}}
    """
    fields: dict[str, object] = {
        "status": outcome.crawl_status,
        "prev_fetch_time": entry.fetch_time,
        "fetch_time": now,
        "protocol_status": outcome.status,
    }
    entries: dict[str, dict[str, object]] = {"markers": {Mark.FETCH: entry.batch_id}}
    replace: dict[str, dict[str, object]] = {}
    metadata: dict[str, object] = {Metadata.FETCHED_AT: now.to_bytes(8, "big", signed=True)}
    if outcome.headers is not None:
        if outcome.status.code == _P.NOTMODIFIED:
            # RFC 9111 §4.3.4: a 304 updates the stored response's headers; the stored content
            # stays, and so must the headers that describe it. Its Content-Length is never
            # taken (RFC 9111 §3.2): a 304 has no body, and Scrapy gives one that had no
            # Content-Length a "0", which would be stored beside the content of the 200.
            entries["headers"] = {
                name: value for name, value in outcome.headers.items() if name != "Content-Length"
            }
        else:
            replace["headers"] = dict(outcome.headers)
        if outcome.response_time is not None:
            metadata[Metadata.RESPONSE_TIME] = _int4(outcome.response_time)
        if outcome.address is not None:
            metadata[Metadata.IP] = outcome.address.encode("utf-8")
    if _has_content(outcome.status.code) and outcome.content is not None:
        fields["content"] = outcome.content if store_content else b""
        fields["content_type"] = outcome.content_type
        fields["base_url"] = outcome.base_url or entry.url
        if outcome.truncated:
            metadata[TRUNCATED_KEY] = b"true"
            metadata[TRUNCATED_REASON_KEY] = b"length"
        else:
            metadata[TRUNCATED_KEY] = None
            metadata[TRUNCATED_REASON_KEY] = None
    redirect = outcome.redirect
    if redirect is not None and redirect_target is not None:
        replace["outlinks"] = {redirect_target: ""}
        metadata[Metadata.REDIRECT_DISCOVERED] = b"y"
        fields["repr_url"] = choose_repr(entry.repr_url or entry.url, redirect_target, redirect[1])
    if metadata:
        entries["metadata"] = metadata
    return RowChange(fields, entries, replace)


def _int4(value: int) -> bytes:
    """A 4-byte big-endian int, saturated to the int range."""
    return max(-(2**31), min(2**31 - 1, value)).to_bytes(4, "big", signed=True)
