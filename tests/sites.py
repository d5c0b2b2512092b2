"""Test web sites: real HTTP servers on loopback addresses, one per host, that record every request.

:class:`Site` starts a threaded ``http.server`` on each of several loopback addresses
(``127.0.0.2``, ``127.0.0.3``… are separate hosts on Linux without any setup), each on its own
port, and records for each host the arrival time (``time.monotonic()``), path and headers of every
request. Paths behave as follows (``?`` parameters in brackets):

- ``/robots.txt``: the host's ``robots`` text (status ``robots_status``), else 404;
- ``/page/<anything>`` (also below another directory): a small HTML page (200);
- ``/status/<code>`` [``location``, ``retry_after``]: that status;
- ``/redirect/<code>?to=<url>``: a redirect to *url*;
- ``/chain/<n>``: a redirect to ``/chain/<n-1>``, down to ``/chain/0``, a page;
- ``/loop/a`` and ``/loop/b``: redirect to each other;
- ``/cond``: ETag ``"v1"`` and a Last-Modified; 304 when ``If-None-Match`` or
  ``If-Modified-Since`` matches;
- ``/slow`` [``s``]: a page after *s* seconds;
- ``/huge`` [``n``, ``chunked``]: *n* bytes, written 64 KiB at a time;
- ``/binary``: 256 bytes of every value, as ``application/octet-stream``;
- ``/random`` [``n``]: *n* random bytes (that no compression makes smaller), as
  ``application/octet-stream``;
- ``/gzip`` [``n``]: *n* bytes, gzip-encoded;
- ``/reset``: the connection is reset without an answer.
"""

from __future__ import annotations

import ast
import email.utils
import gzip
import itertools
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from nutchy.core.generate import GenerateConfig
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.inject import InjectOptions, inject
from nutchy.store.base import Store
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.table import WebTable

if TYPE_CHECKING:
    from typing import Self

LAST_MODIFIED = 1_600_000_000  # s
ETAG = '"v1"'


@dataclass(frozen=True)
class Hit:
    """One request a host received."""

    at: float
    path: str
    headers: dict[str, str]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, site: Site, address: str) -> None:
        self.site = site
        self.address = address
        super().__init__((address, 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that goes away (a stopped download, a killed crawl) is not an error here.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without this, Nagle's algorithm and the client's delayed
    # ACK add 40 ms to every response.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        site = self.server.site
        host = self.server.address
        site.record(host, Hit(time.monotonic(), self.path, dict(self.headers.items())))
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        try:
            if path == "/robots.txt":
                robots = site.robots.get(host)
                if robots is None:
                    self._send(404, b"no robots")
                else:
                    status, text = robots
                    self._send(status, text.encode(), "text/plain")
            elif "/page/" in path:
                self._send(200, f"<html><title>{path}</title>{path}</html>".encode())
            elif path.startswith("/status/"):
                code = int(path.rsplit("/", 1)[1])
                headers = {}
                if "location" in query:
                    headers["Location"] = query["location"]
                if "retry_after" in query:
                    headers["Retry-After"] = query["retry_after"]
                self._send(code, f"status {code}".encode(), headers=headers)
            elif path.startswith("/redirect/"):
                code = int(path.rsplit("/", 1)[1])
                self._send(code, b"moved", headers={"Location": query["to"]})
            elif path.startswith("/chain/"):
                n = int(path.rsplit("/", 1)[1])
                if n == 0:
                    self._send(200, b"<html>end of the chain</html>")
                else:
                    self._send(301, b"next", headers={"Location": f"/chain/{n - 1}"})
            elif path == "/loop/a":
                self._send(302, b"", headers={"Location": "/loop/b"})
            elif path == "/loop/b":
                self._send(302, b"", headers={"Location": "/loop/a"})
            elif path == "/cond":
                self._conditional()
            elif path == "/cookie":
                self._send(200, b"<html>cookie</html>", headers={"Set-Cookie": "session=1; Path=/"})
            elif path == "/slow":
                time.sleep(float(query.get("s", "2")))
                self._send(200, b"<html>slow</html>")
            elif path == "/huge":
                self._huge(int(query.get("n", "1000000")), "chunked" in query)
            elif path == "/binary":
                self._send(200, bytes(range(256)), "application/octet-stream")
            elif path == "/random":
                self._send(200, os.urandom(int(query.get("n", "1000"))), "application/octet-stream")
            elif path == "/gzip":
                body = gzip.compress(b"z" * int(query.get("n", "100000")))
                self._send(200, body, headers={"Content-Encoding": "gzip"})
            elif path == "/reset":
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                self.connection.close()
            else:
                self._send(404, b"not found")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "text/html",
        headers: dict[str, str] | None = None,
    ) -> None:
        send(self, code, body, content_type, headers)

    def _conditional(self) -> None:
        last_modified = email.utils.formatdate(LAST_MODIFIED, usegmt=True)
        headers = {"ETag": ETAG, "Last-Modified": last_modified}
        if_none_match = self.headers.get("If-None-Match")
        since = self.headers.get("If-Modified-Since")
        not_modified = if_none_match == ETAG
        if since and not if_none_match:
            when = email.utils.parsedate_to_datetime(since).timestamp()
            not_modified = when >= LAST_MODIFIED
        if not_modified:
            self.send_response(304)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
        else:
            self._send(200, b"<html>conditional</html>", headers=headers)

    def _huge(self, size: int, chunked: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        block = b"x" * 65536
        sent = 0
        while sent < size:
            part = block[: min(len(block), size - sent)]
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            else:
                self.wfile.write(part)
            sent += len(part)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class LoopbackHosts:
    """One threaded HTTP server per loopback address, each on its own port, made by
    ``server(address)``; they serve while this is used as a context manager."""

    def __init__(
        self, hosts: tuple[str, ...], server: Callable[[str], ThreadingHTTPServer]
    ) -> None:
        self.hosts = hosts
        self._servers = [server(host) for host in hosts]
        self.ports = {h: s.server_address[1] for h, s in zip(hosts, self._servers, strict=True)}
        self._threads = [
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            for s in self._servers
        ]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.ports[host]}{path}"


class Site(LoopbackHosts):
    """HTTP servers on *hosts* (loopback addresses), with the robots.txt of each in *robots*
    (address → ``(status, text)``). Use as a context manager."""

    def __init__(
        self,
        hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3", "127.0.0.4"),
        robots: dict[str, tuple[int, str]] | None = None,
    ) -> None:
        self.robots = dict(robots or {})
        self.hits: dict[str, list[Hit]] = defaultdict(list)
        self._lock = threading.Lock()
        super().__init__(hosts, lambda host: _Server(self, host))

    def clear(self) -> None:
        """Forget the requests received so far."""
        with self._lock:
            self.hits.clear()

    def record(self, host: str, hit: Hit) -> None:
        with self._lock:
            self.hits[host].append(hit)

    def paths(self, host: str) -> list[str]:
        with self._lock:
            return [h.path for h in self.hits[host]]

    def count(self, host: str, path: str) -> int:
        return self.paths(host).count(path)

    def page_gaps(self, host: str) -> list[float]:
        """Seconds between consecutive requests to *host*, robots.txt left out (it does not count
        against the politeness delay, as in Nutch)."""
        with self._lock:
            times = [h.at for h in self.hits[host] if h.path != "/robots.txt"]
        return [b - a for a, b in itertools.pairwise(times)]


def send(
    handler: BaseHTTPRequestHandler,
    code: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer *handler*'s request: *code*, *body* with its type and length, and *headers*."""
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


# --- a small site of linked pages ----------------------------------------------------------------


class _GraphHandler(BaseHTTPRequestHandler):
    """Serves ``server.graph`` (path -> (title, links)) as small HTML pages, 404 elsewhere, and
    appends each requested path to ``server.hits``."""

    def log_message(self, format, *args):  # quiet
        pass

    def do_GET(self):
        server = self.server
        server.hits.append(self.path)  # type: ignore[attr-defined]
        if server.on_request is not None:  # type: ignore[attr-defined]
            server.on_request(self.path)  # type: ignore[attr-defined]
        page = server.graph.get(self.path)  # type: ignore[attr-defined]
        if page is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        title, links = page
        body = f"<html><title>{title}</title><body>{title}"
        body += "".join(f'<a href="{link}">to {link}</a>' for link in links) + "</body></html>"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def graph_site(
    graph: dict[str, tuple[str, list[str]]], on_request: Callable[[str], object] | None = None
) -> Iterator[ThreadingHTTPServer]:
    """A server on 127.0.0.1 serving *graph* (path -> (title, links)); ``hits`` lists the paths
    requested, ``server_address[1]`` is its port. *on_request* is called with each path before
    it is answered."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GraphHandler)
    server.graph = graph  # type: ignore[attr-defined]
    server.on_request = on_request  # type: ignore[attr-defined]
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Stats:
    """The few calls of Scrapy's stats collector that the fetch's components make, for tests
    that build them without a crawler."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] = self.values.get(key, start) + count

    def max_value(self, key: str, value: int) -> None:
        self.values[key] = max(self.values.get(key, value), value)

    def get_value(self, key: str, default: object = None) -> object:
        return self.values.get(key, default)


# --- running `scrapy crawl nutch` against a prepared table ---------------------------------------

REPO = Path(__file__).resolve().parent.parent
NOW_MS = int(time.time() * 1000)


def store_settings(store: Store) -> dict[str, object]:
    """The settings that open *store*'s table in another process."""
    if isinstance(store, EmbeddedStore):
        return {"NUTCH_CRAWL_DIR": str(store.path.parent)}
    crawl_id = store.table_name.removesuffix("webpage").removesuffix("_")
    return {
        "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
        "NUTCH_HBASE_HOST": store.host,  # type: ignore[attr-defined]
        "NUTCH_HBASE_PORT": store.port,  # type: ignore[attr-defined]
        "NUTCH_HBASE_TRANSPORT": store.transport,  # type: ignore[attr-defined]
        "NUTCH_HBASE_PROTOCOL": store.protocol,  # type: ignore[attr-defined]
        "NUTCH_STORAGE_CRAWL_ID": crawl_id,
    }


def prepare_batch(
    store: Store, urls: list[str], batch: str = "b1", *, num_fetchers: int = 1
) -> WebTable:
    """Inject *urls* into *store*'s table and generate them all into *batch*."""
    table = WebTable(store)
    seeds = Path(tempfile.mkdtemp()) / "seeds.txt"
    seeds.write_text("".join(f"{url}\n" for url in urls), encoding="utf-8")
    inject(table, [seeds], InjectOptions(2592000, 1.0, None), now=NOW_MS)
    options = GenerateOptions(GenerateConfig(), num_fetchers=num_fetchers)
    result = generate(table, options, now=NOW_MS, batch_id=batch)
    assert result.selected == len(set(urls)), result
    return table


@dataclass
class CrawlResult:
    returncode: int
    log: str
    stats: dict[str, object]
    seconds: float


class FetchProject:
    """A Scrapy project in *root* whose settings open *store*'s table, with nutchy's add-on and
    test-friendly defaults (no politeness delay unless a test asks, quiet logs). Its crawls fetch
    only, as Nutch's fetch job does, unless a test turns ``NUTCH_FETCHER_UPDATEDB`` on."""

    def __init__(self, root: Path, store: Store, **settings: object) -> None:
        self.root = root
        values: dict[str, object] = {
            "ADDONS": {"nutchy.NutchAddon": 0},
            "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": False,
            "NUTCH_FETCHER_SERVER_DELAY": 0.0,
            "NUTCH_FETCHER_FLUSH_SIZE": 5,
            "NUTCH_FETCHER_UPDATEDB": False,
            "NUTCH_HTTP_AGENT_URL": "http://127.0.0.1/nutchy-tests",
            **store_settings(store),
            **settings,
        }
        lines = [f"{name} = {value!r}\n" for name, value in values.items()]
        (root / "fetchtest_settings.py").write_text("".join(lines), encoding="utf-8")
        (root / "scrapy.cfg").write_text("[settings]\ndefault = fetchtest_settings\n")

    def command(
        self, batch: str | None, args: dict[str, str], settings: dict[str, object]
    ) -> list[str]:
        """``scrapy crawl nutch`` on *batch* (``None``: the crawl generates its batches)."""
        command = [sys.executable, "-m", "scrapy", "crawl", "nutch"]
        if batch is not None:
            command += ["-a", f"batch={batch}"]
        for name, value in args.items():
            command += ["-a", f"{name}={value}"]
        for name, value in settings.items():
            command += ["-s", f"{name}={value}"]
        return command

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
        env["PYTHONPATH"] = os.pathsep.join([str(self.root), str(REPO)])
        return env

    def crawl(
        self,
        batch: str | None = "b1",
        *,
        timeout: float = 60,
        settings: dict[str, object] | None = None,
        **args: str,
    ) -> CrawlResult:
        started = time.monotonic()
        done = subprocess.run(
            self.command(batch, args, settings or {}),
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return CrawlResult(
            done.returncode, done.stderr, parse_stats(done.stderr), time.monotonic() - started
        )

    def start(self, batch: str = "b1", **args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(batch, args, {}),
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )


def parse_stats(log: str) -> dict[str, object]:
    """The stats Scrapy dumps at the end of a crawl's log."""
    marker = "Dumping Scrapy stats:\n"
    start = log.rfind(marker)
    if start < 0:
        return {}
    text = log[start + len(marker) :]
    end = text.find("}\n")
    literal = re.sub(r"datetime\.datetime\([^)]*\)", "None", text[: end + 1])
    stats = ast.literal_eval(literal)
    assert isinstance(stats, dict)
    return stats


class ServedPages:
    """A loopback HTTP server answering from :attr:`pages` (path -> status, type, body) and
    recording the paths asked for."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str, bytes]] = {}
        self.asked: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked.append(self.path)
                status, kind, body = site.pages.get(self.path, (404, "text/plain", b"no"))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, path: str, body: bytes, kind: str = "application/xml", status: int = 200) -> None:
        self.pages[path] = (status, kind, body)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
