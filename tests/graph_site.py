"""A web site with a known link graph, for end-to-end crawl tests.

:class:`GraphSite` serves, on several loopback hosts (``127.0.0.2``, ``127.0.0.3``… are separate
hosts on Linux, each on its own port), whatever :class:`Resource` the test put at each URL, and
records every request with the answer it got. The resources are plain values that say what the
server answers; a test changes the site between two crawls by putting other resources at the
same URLs (:meth:`GraphSite.put`), and unknown URLs answer 404.

- :class:`Page`: an HTML page (200) with links, an ``ETag`` and a ``Last-Modified``; it answers
  304 to a request whose ``If-None-Match`` names its ETag or, without ``If-None-Match``, whose
  ``If-Modified-Since`` is not older than its ``Last-Modified`` (RFC 9110 §13.2.2).
- :class:`Status`: that status, with a small body.
- :class:`Redirect`: a 3xx to another URL.
- :class:`Refresh`: an HTML page whose ``<meta http-equiv="refresh">`` points to another URL.
- :class:`Huge`: an HTML page of *size* bytes, its links at the start, maybe gzip-encoded.
- :class:`Binary`: 256 bytes of every value, as ``application/octet-stream``.
- :class:`Slow`: a page that comes after *seconds*, or stalls that long after its start.

``Page`` has an *encoding* (the body's bytes) and a *charset* (what ``Content-Type`` declares),
so badly encoded pages are pages whose two disagree.
"""

from __future__ import annotations

import email.utils
import gzip
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sites import LoopbackHosts, send


@dataclass(frozen=True)
class Page:
    """An HTML page linking to *links* (absolute URLs; those of the page's own host are written
    as paths, so the crawler resolves them). *version* is part of the text, so a new version is
    new content."""

    links: tuple[str, ...] = ()
    title: str = "page"
    version: int = 1
    etag: str | None = '"v1"'  # None: no ETag header
    last_modified: float | None = 1_600_000_000.0  # s; None: no Last-Modified header
    charset: str = "utf-8"
    encoding: str = "utf-8"
    garbage: bytes = b""  # raw bytes added to the body, whatever the encoding
    #: More hrefs, written as they are after the links: other spellings of some of the links
    #: (a fragment, dot segments, an IRI…), each meant to normalize to one of them.
    hrefs: tuple[str, ...] = ()
    #: Bytes of text (paragraphs of ASCII words) before the links, as a long page has.
    filler: int = 0

    def body(self, url: str) -> bytes:
        host = url.split("/", 3)[2]
        anchors = "".join(
            f'<a href="{escape(_relative(link, host))}">to {escape(link)}</a>\n'
            for link in self.links
        )
        anchors += "".join(f'<a href="{escape(href)}">again</a>\n' for href in self.hrefs)
        text = (
            f"<html><head><title>{escape(self.title)}</title></head><body>\n"
            f"<p>{escape(self.title)}, version {self.version}: café</p>\n"
            f"{_filler(self.filler)}{anchors}"
        )
        return text.encode(self.encoding) + self.garbage + b"</body></html>\n"


@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Redirect:
    code: int
    to: str


@dataclass(frozen=True)
class Refresh:
    to: str


@dataclass(frozen=True)
class Huge:
    """An HTML page of *size* bytes, its *links* at the start; with *gzip*, sent compressed."""

    size: int
    links: tuple[str, ...] = ()
    gzip: bool = False


@dataclass(frozen=True)
class Binary:
    pass


@dataclass(frozen=True)
class Slow:
    """A page that comes after *seconds*; with *stall*, its headers and the start of its body
    come at once, and the rest after *seconds*."""

    seconds: float
    stall: bool = False


Resource = Page | Status | Redirect | Refresh | Huge | Binary | Slow


@dataclass
class Exchange:
    """One request a host received, recorded on arrival, and the status it was answered with
    (``None`` while it is being answered, 0 when the client left before the answer)."""

    url: str
    headers: dict[str, str]
    status: int | None = None
    #: when it arrived (``time.monotonic()``)
    at: float = field(default_factory=time.monotonic)


def _filler(size: int) -> str:
    """About *size* bytes of paragraphs of words."""
    paragraph = "<p>" + "lorem ipsum dolor sit amet " * 36 + "</p>\n"
    return paragraph * (size // len(paragraph) + (size > 0))


def _relative(link: str, host: str) -> str:
    parts = link.split("/", 3)
    if len(parts) == 4 and parts[2] == host:
        return "/" + parts[3]
    return link


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, site: GraphSite, address: str) -> None:
        self.site = site
        self.address = address
        super().__init__((address, 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gives up (a timeout, a stopped download) is no error here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        site = self.server.site
        host = self.server.address
        url = f"http://{host}:{site.ports[host]}{self.path}"
        exchange = Exchange(url, dict(self.headers.items()))
        site.record(host, exchange)
        try:
            exchange.status = self._answer(site, host, url, exchange.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            exchange.status = 0

    def _answer(self, site: GraphSite, host: str, url: str, headers: dict[str, str]) -> int:
        if self.path == "/robots.txt":
            text = site.robots.get(host)
            if text is None:
                return self._send(404, b"no robots.txt")
            return self._send(200, text.encode(), "text/plain")
        resource = site.resources.get(url)
        if isinstance(resource, Page):
            return self._page(url, resource, headers)
        if isinstance(resource, Status):
            return self._send(resource.code, f"status {resource.code}".encode())
        if isinstance(resource, Redirect):
            return self._send(resource.code, b"moved", headers={"Location": resource.to})
        if isinstance(resource, Refresh):
            body = f'<html><head><meta http-equiv="refresh" content="0; url={resource.to}">'
            return self._send(200, (body + "</head><body>moved</body></html>").encode())
        if isinstance(resource, Huge):
            head = "".join(f'<a href="{link}">x</a>' for link in resource.links).encode()
            body = b"<html><body>" + head + b"x" * max(0, resource.size - len(head) - 12)
            if resource.gzip:
                encoded = gzip.compress(body)
                return self._send(200, encoded, headers={"Content-Encoding": "gzip"})
            return self._send(200, body)
        if isinstance(resource, Binary):
            return self._send(200, bytes(range(256)), "application/octet-stream")
        if isinstance(resource, Slow):
            body = b"<html><body>" + b"late " * 100 + b"</body></html>"
            if not resource.stall:
                time.sleep(resource.seconds)
                return self._send(200, body)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:100])
            self.wfile.flush()
            time.sleep(resource.seconds)
            self.wfile.write(body[100:])
            return 200
        return self._send(404, b"not found")

    def _page(self, url: str, page: Page, headers: dict[str, str]) -> int:
        validators = {}
        if page.etag is not None:
            validators["ETag"] = page.etag
        if page.last_modified is not None:
            validators["Last-Modified"] = email.utils.formatdate(page.last_modified, usegmt=True)
        if_none_match = headers.get("If-None-Match")
        since = headers.get("If-Modified-Since")
        not_modified = False
        if if_none_match is not None:
            not_modified = page.etag in [tag.strip() for tag in if_none_match.split(",")]
        elif since is not None and page.last_modified is not None:
            when = email.utils.parsedate_to_datetime(since).timestamp()
            not_modified = when >= int(page.last_modified)
        if not_modified:
            self.send_response(304)
            for name, value in validators.items():
                self.send_header(name, value)
            self.end_headers()
            return 304
        return self._send(
            200, page.body(url), f"text/html; charset={page.charset}", headers=validators
        )

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> int:
        send(self, code, body, content_type, headers)
        return code


class GraphSite(LoopbackHosts):
    """HTTP servers on *hosts*, serving :attr:`resources` (URL → :class:`Resource`) and the
    robots.txt of each host in *robots* (address → text; none: 404). Use as a context manager."""

    def __init__(self, hosts: tuple[str, ...], robots: dict[str, str] | None = None) -> None:
        self.robots = dict(robots or {})
        self.resources: dict[str, Resource] = {}
        self._exchanges: dict[str, list[Exchange]] = defaultdict(list)
        self._lock = threading.Lock()
        super().__init__(hosts, lambda host: _Server(self, host))

    def put(self, url: str, resource: Resource) -> None:
        self.resources[url] = resource

    def record(self, host: str, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges[host].append(exchange)

    def exchanges(self) -> list[Exchange]:
        """Every request received so far, robots.txt left out."""
        with self._lock:
            return [
                e
                for host in self.hosts
                for e in self._exchanges[host]
                if not e.url.endswith("/robots.txt")
            ]

    def arrivals(self, host: str) -> list[tuple[str, float]]:
        """The URL and arrival time of every request *host* received, robots.txt included."""
        with self._lock:
            return [(e.url, e.at) for e in self._exchanges[host]]

    def robots_requests(self, host: str) -> int:
        with self._lock:
            return sum(e.url.endswith("/robots.txt") for e in self._exchanges[host])

    def clear(self) -> None:
        with self._lock:
            self._exchanges.clear()
