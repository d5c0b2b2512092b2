"""The fetch against a hostile server (tests/hostile_server.py): every misbehaviour of the open web
ends with a recorded status, in bounded time, with no error or traceback in the log, and the
fetch process's memory stays bounded through decompression bombs.

One real ``scrapy crawl nutch`` fetches every case at once (one host per group of cases, so the
slow ones overlap), with the add-on's defaults but for a 3 s timeout and no politeness delay; a
second one loses a request in a project middleware, for the scheduler's watchdog.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import time
import zlib

import brotli
import pytest
from hostile_server import PAGE, HostileServer, Raw, html
from sites import FetchProject, parse_stats, prepare_batch

from nutchy.core.fetch import TRUNCATED_KEY
from nutchy.core.status import CrawlStatus, ProtocolStatusCode
from nutchy.testing.memory import peak_rss_kib

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

P = ProtocolStatusCode
C = CrawlStatus
MiB = 1 << 20
#: The suite's fetch process may not grow past this (KiB, as VmHWM counts).
RSS_LIMIT_KIB = 300 * 1024

# One loopback host per group of cases.
ENC, BOMB, RETRY, HUGE_RETRY, WIRE, SLOW, SILENT, BODY, SCHEME, WATCH, LATE = (
    f"127.0.3.{i}" for i in range(1, 12)
)
R_ONE, R_LOOP, R_SIX, R_FIVE, R_BIG, R_BOMB, R_GZIP, R_SILENT, R_SLOW = (
    f"127.0.3.{i}" for i in range(20, 29)
)
HOSTS = (ENC, BOMB, RETRY, HUGE_RETRY, WIRE, SLOW, SILENT, BODY, SCHEME, WATCH, LATE)
#: The request timeout of the suite's crawl (s): 10,000 headers take Twisted 0.7 s to read on
#: a quiet machine.
TIMEOUT = 3.0
ROBOT_HOSTS = (R_ONE, R_LOOP, R_SIX, R_FIVE, R_BIG, R_BOMB, R_GZIP, R_SILENT, R_SLOW)

#: A project middleware that raises in process_response, as Scrapy's HttpCompressionMiddleware
#: did on a body it could not decode, and one that loses a request (it hands the engine another
#: request in its place), which only the scheduler's watchdog notices.
PROJECT_MIDDLEWARES = """
import asyncio

from scrapy import Request


class RaisingMiddleware:
    def process_response(self, request, response):
        if request.url.endswith("/raw/mw-raise"):
            raise ValueError("a middleware that raises")
        return response


class LosingMiddleware:
    def process_request(self, request):
        if request.url.endswith("/raw/mw-lose"):
            return Request(request.url + "?lost", dont_filter=True)
        return None


class DelayingMiddleware:
    async def process_request(self, request):
        if request.url.endswith("/raw/mw-late"):
            await asyncio.sleep(10)
        return None
"""


def _gzip_bomb(mib: int) -> bytes:
    """gzip members of 1 MiB of zeros each, *mib* of them (about 1 KiB per MiB)."""
    return gzip.compress(b"\0" * MiB, 9) * mib


def _deflate_bomb(mib: int) -> bytes:
    """A raw deflate stream of *mib* MiB of zeros: a flushed block repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(b"\0" * MiB) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def _brotli_bomb(prefix: bytes, mib: int, fill: bytes = b"\0") -> bytes:
    c = brotli.Compressor(quality=1)
    chunk = fill * MiB
    return c.process(prefix) + b"".join(c.process(chunk) for _ in range(mib)) + c.finish()


def _zstd_bomb(frames: int) -> bytes:
    """*frames* zstd frames of 16 MiB of zeros each."""
    return zstd.compress(b"\0" * (16 * MiB)) * frames


def _redirect(to: str, code: bytes = b"301 Moved Permanently") -> Raw:
    return Raw(b"HTTP/1.1 " + code, [(b"Location", to.encode())])


DENY_ALL = Raw(body=b"User-agent: *\nDisallow: /\n")


@pytest.fixture(scope="module")
def hostile():
    with HostileServer(HOSTS + ROBOT_HOSTS) as server:
        raw = server.raw
        gz_page = gzip.compress(PAGE)
        raw["gzip-plain"] = html(PAGE, (b"Content-Encoding", b"gzip"))
        raw["gzip-plain-404"] = html(PAGE, (b"Content-Encoding", b"gzip"), status=b"404 Not Found")
        raw["gzip-invalid"] = html(gz_page[:10] + b"garbage" * 50, (b"Content-Encoding", b"gzip"))
        raw["x-evil-gzip"] = html(gz_page, (b"Content-Encoding", b"x-evil, gzip"))
        raw["br-past-guard"] = html(
            _brotli_bomb(b"<html>", 64), (b"Content-Encoding", b"br")
        )  # 64 MiB: past Scrapy's 32 MiB warning size
        raw["mw-raise"] = html()
        raw["page"] = html()
        raw["mw-lose"] = html()
        raw["mw-late"] = html()
        # decompression bombs
        raw["bomb-br"] = html(_brotli_bomb(b"<html>", 512), (b"Content-Encoding", b"br"))
        raw["bomb-gzip2"] = html(
            gzip.compress(_gzip_bomb(1024), 9), (b"Content-Encoding", b"gzip, gzip")
        )
        raw["bomb-deflate"] = html(_deflate_bomb(1024), (b"Content-Encoding", b"deflate"))
        raw["bomb-zstd"] = html(_zstd_bomb(200), (b"Content-Encoding", b"zstd"))
        # Retry-After
        raw["retry-superscript"] = html(PAGE, (b"Retry-After", "²".encode()), status=b"503 Busy")
        raw["retry-arabic"] = html(
            PAGE, (b"Retry-After", "١٢٠".encode()), status=b"429 Too Many Requests"
        )
        raw["retry-date"] = html(
            PAGE, (b"Retry-After", b"Fri, 14 Jul 99999 02:40:30 GMT"), status=b"503 Busy"
        )
        raw["retry-huge"] = html(PAGE, (b"Retry-After", b"9" * 5000), status=b"503 Busy")
        # bodies that lie
        raw["binary-as-html"] = html(bytes(range(256)) * 64)
        raw["charset-lie"] = html(
            b"<html><meta charset='utf-16'><title>plain ascii</title></html>",
            (b"Content-Type", b"text/html; charset=x-no-such-charset"),
        )
        raw["loop-a"] = _redirect(server.url(BODY, "/raw/loop-b"), b"302 Found")
        raw["loop-b"] = _redirect(server.url(BODY, "/raw/loop-a"), b"302 Found")
        for i in range(1, 50):  # a chain of 50 redirects
            raw[f"chain-{i}"] = _redirect(server.url(BODY, f"/raw/chain-{i + 1}"), b"302 Found")
        raw["chain-50"] = html()
        raw["nesting"] = html(b"<div>" * 100_000 + b"<a href='/deep'>deep</a>")
        raw["to-file"] = _redirect("file:///etc/hostname", b"302 Found")
        # robots.txt
        raw["deny-all"] = DENY_ALL
        server.robots[R_ONE] = _redirect(server.url(R_ONE, "/raw/deny-all"))
        raw["robots-loop-a"] = _redirect(server.url(R_LOOP, "/raw/robots-loop-b"))
        raw["robots-loop-b"] = _redirect(server.url(R_LOOP, "/raw/robots-loop-a"))
        server.robots[R_LOOP] = _redirect(server.url(R_LOOP, "/raw/robots-loop-a"))
        for host, hops in ((R_SIX, 6), (R_FIVE, 5)):
            name = f"hop-{host}"
            server.robots[host] = _redirect(server.url(host, f"/raw/{name}-1"))
            for i in range(1, hops):
                raw[f"{name}-{i}"] = _redirect(server.url(host, f"/raw/{name}-{i + 1}"))
            raw[f"{name}-{hops}"] = DENY_ALL
        rules = b"User-agent: *\nDisallow: /raw/private\n"
        # 600 kB of comments: the Disallow: / past them is not read
        server.robots[R_BIG] = Raw(body=rules + b"# pad\n" * 100_000 + b"Disallow: /\n")
        server.robots[R_BOMB] = Raw(
            headers=[(b"Content-Encoding", b"br")],
            body=_brotli_bomb(rules, 512, fill=b"#") + b"",
        )
        # a robots.txt that does not decode, and two that never answer: each allows everything
        server.robots[R_GZIP] = Raw(headers=[(b"Content-Encoding", b"gzip")], body=DENY_ALL.body)
        server.robots[R_SILENT] = "/silent"
        server.robots[R_SLOW] = "/slowloris"
        yield server


def _cases(server: HostileServer) -> dict[str, tuple[CrawlStatus, ProtocolStatusCode]]:
    """Each URL of the suite and the (crawl status, protocol status) it must end with."""
    u = server.url
    ok = (C.FETCHED, P.SUCCESS)
    retry = (C.RETRY, P.EXCEPTION)
    return {
        u(ENC, "/raw/gzip-plain"): retry,
        u(ENC, "/raw/gzip-plain-404"): (C.GONE, P.NOTFOUND),
        u(ENC, "/raw/gzip-invalid"): retry,
        u(ENC, "/raw/x-evil-gzip"): ok,
        u(ENC, "/raw/br-past-guard"): ok,
        u(ENC, "/raw/mw-raise"): retry,
        u(ENC, "/ok"): ok,
        u(BOMB, "/raw/bomb-br"): ok,
        u(BOMB, "/raw/bomb-gzip2"): ok,
        u(BOMB, "/raw/bomb-deflate"): ok,
        u(BOMB, "/raw/bomb-zstd"): ok,
        u(RETRY, "/raw/retry-superscript"): retry,
        u(RETRY, "/raw/retry-arabic"): retry,
        u(RETRY, "/raw/retry-date"): retry,
        u(RETRY, "/ok"): ok,
        u(HUGE_RETRY, "/raw/retry-huge"): retry,
        u(WIRE, "/length/long"): retry,
        u(WIRE, "/length/short"): ok,
        u(WIRE, "/chunked/endless"): ok,
        u(WIRE, "/headers/many"): ok,
        u(WIRE, "/headers/huge"): retry,
        u(WIRE, "/status/garbage"): retry,
        u(WIRE, "/status/none"): retry,
        u(WIRE, "/1xx"): ok,
        u(WIRE, "/reset"): retry,
        u(WIRE, "/ok"): ok,
        u(SLOW, "/slowloris"): retry,
        u(SILENT, "/silent"): retry,
        u(SLOW, "/ok"): ok,
        u(BODY, "/raw/binary-as-html"): ok,
        u(BODY, "/raw/charset-lie"): ok,
        u(BODY, "/raw/loop-a"): (C.REDIR_TEMP, P.TEMP_MOVED),
        u(BODY, "/raw/chain-1"): (C.REDIR_TEMP, P.TEMP_MOVED),
        u(BODY, "/raw/nesting"): ok,
        u(SCHEME, "/raw/to-file"): (C.REDIR_TEMP, P.TEMP_MOVED),
        "file:///etc/passwd": (C.RETRY, P.PROTO_NOT_FOUND),
        f"ftp://{SCHEME}:2121/pub/file.txt": (C.RETRY, P.PROTO_NOT_FOUND),
        u(R_ONE, "/ok"): (C.GONE, P.ROBOTS_DENIED),
        u(R_LOOP, "/ok"): ok,
        u(R_SIX, "/ok"): ok,
        u(R_FIVE, "/ok"): (C.GONE, P.ROBOTS_DENIED),
        u(R_BIG, "/ok"): ok,
        u(R_BIG, "/raw/private"): (C.GONE, P.ROBOTS_DENIED),
        u(R_BOMB, "/ok"): ok,
        u(R_BOMB, "/raw/private"): (C.GONE, P.ROBOTS_DENIED),
        u(R_GZIP, "/ok"): ok,
        u(R_SILENT, "/ok"): ok,
        u(R_SLOW, "/ok"): ok,
    }


def _crawl(project: FetchProject, timeout: float) -> tuple[int, str, int, float]:
    """``scrapy crawl nutch -a batch=b1`` in *project*: its exit code, log, peak RSS (KiB, read
    every 0.1 s) and seconds, measured on that process alone."""
    log_path = project.root / "crawl.log"
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            project.command("b1", {}, {}),
            cwd=project.root,
            env=project.env(),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        peak = 0
        while True:
            peak = max(peak, peak_rss_kib(process.pid))
            pid, status = os.waitpid(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                process.kill()
                process.wait()
                pytest.fail(f"the crawl hung: {log_path.read_text()[-3000:]}")
            time.sleep(0.1)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, log_path.read_text(), peak, time.monotonic() - started


@pytest.mark.slow
def test_every_hostile_answer_ends_recorded_in_bounded_time_and_memory(
    hostile, tmp_path, embedded_store_factory
):
    hostile.requests.clear()
    hostile.durations.clear()
    cases = _cases(hostile)
    store = embedded_store_factory()
    table = prepare_batch(store, list(cases))
    (tmp_path / "hostile_mw.py").write_text(PROJECT_MIDDLEWARES)
    project = FetchProject(
        tmp_path,
        store,
        NUTCH_HTTP_TIMEOUT=int(TIMEOUT * 1000),
        NUTCH_HTTP_REDIRECT_MAX=3,
        NUTCH_HTTP_CONTENT_LIMIT=65536,  # the cuts checked below
        DOWNLOADER_MIDDLEWARES={"hostile_mw.RaisingMiddleware": 600},
    )
    code, log, rss_kib, _ = _crawl(project, timeout=120)
    assert code == 0, log[-3000:]
    # no error, no traceback: each case is an outcome, not a failure of the crawl
    assert "Traceback" not in log
    assert not re.findall(r"\] (?:ERROR|CRITICAL):.*", log)
    assert rss_kib <= RSS_LIMIT_KIB, f"peak RSS {rss_kib // 1024} MiB"

    fields = ["status", "protocol_status", "content", "metadata", "markers"]
    pages = {page.url: page for page in table.scan(fields)}
    got = {
        url: (page.status, page.protocol_status and page.protocol_status.code)
        for url, page in pages.items()
        if url in cases
    }
    assert got == cases, {
        url: pages[url].protocol_status for url in cases if got[url] != cases[url]
    }
    for url in cases:
        assert pages[url].markers.get("_ftcmrk_") == "b1", url

    def reason(host: str, path: str) -> str:
        return str(pages[hostile.url(host, path)].protocol_status.args[0])

    # why each failed fetch failed
    assert reason(ENC, "/raw/gzip-plain").startswith("decoding: gzip: ")
    assert reason(ENC, "/raw/gzip-invalid").startswith("decoding: gzip: ")
    assert reason(ENC, "/raw/mw-raise") == "ValueError: a middleware that raises"
    assert reason(SLOW, "/slowloris").startswith("timeout: ")
    assert reason(SILENT, "/silent").startswith("timeout: ")
    assert reason(WIRE, "/length/long").startswith("reset: ")
    assert pages[hostile.url(WIRE, "/length/short")].content == b"<html"
    endless = pages[hostile.url(WIRE, "/chunked/endless")]
    assert (len(endless.content), endless.metadata[TRUNCATED_KEY]) == (65536, b"true")
    assert "only http and https" in str(pages["file:///etc/passwd"].protocol_status.args[0])
    # every bomb is cut at the content limit, its start kept, and marked truncated
    for name in ("bomb-br", "bomb-gzip2", "bomb-deflate", "bomb-zstd"):
        page = pages[hostile.url(BOMB, f"/raw/{name}")]
        assert len(page.content) == 65536, name
        assert page.metadata[TRUNCATED_KEY] == b"true", name
    assert pages[hostile.url(BOMB, "/raw/bomb-br")].content.startswith(b"<html>\0\0")
    assert pages[hostile.url(ENC, "/raw/x-evil-gzip")].content == PAGE  # gzip undone, x-evil left
    # never fetched: other schemes, and the pages robots.txt denies (its redirects followed)
    assert hostile.count(R_ONE, "/ok") == 0
    assert hostile.count(R_FIVE, "/ok") == 0
    assert hostile.count(R_BIG, "/raw/private") == 0
    assert hostile.count(R_ONE, "/raw/deny-all") == 1
    assert hostile.count(R_SIX, f"/raw/hop-{R_SIX}-5") == 1
    assert hostile.count(R_SIX, f"/raw/hop-{R_SIX}-6") == 0  # the sixth redirect not followed
    assert not any(line.startswith("GET /pub") for _, line in hostile.requests)
    # a chain of 50 redirects: the first three followed (http.redirect.max), the rest left
    assert [hostile.count(BODY, f"/raw/chain-{i}") for i in (1, 4, 5)] == [1, 1, 0]
    # Every connection ended within the request timeout, give or take a loaded machine's slack;
    # the answers that never end on their own ended at the timeout, or at the content limit.
    over = [(host, path, round(s, 1)) for host, path, s in hostile.durations if s > TIMEOUT + 4]
    assert not over
    ended = {path for _, path, _ in hostile.durations}
    assert {"/slowloris", "/silent", "/chunked/endless"} <= ended


@pytest.mark.slow
def test_a_request_lost_or_failing_in_a_middleware_ends_recorded_and_frees_its_queue(
    hostile, tmp_path, embedded_store_factory
):
    """The hang of issue 19: Scrapy's compression middleware raised on gzip over a plain body,
    the outcome was never recorded, and the next page of the host waited forever. And a request
    that a middleware loses, or holds longer than 8 timeouts: the watchdog records it and frees
    its queue; the answer that comes after is dropped."""
    hostile.requests.clear()
    # (in key order on each host: the page that fails first, then the one that waits for it)
    failing = [hostile.url(ENC, "/raw/gzip-plain"), hostile.url(ENC, "/raw/page")]
    lost = [hostile.url(WATCH, "/raw/mw-lose"), hostile.url(WATCH, "/raw/page")]
    late = [hostile.url(LATE, "/raw/mw-late"), hostile.url(LATE, "/raw/page")]
    store = embedded_store_factory()
    table = prepare_batch(store, failing + lost + late)
    (tmp_path / "hostile_mw.py").write_text(PROJECT_MIDDLEWARES)
    project = FetchProject(
        tmp_path,
        store,
        NUTCH_HTTP_TIMEOUT=1000,
        DOWNLOADER_MIDDLEWARES={
            "hostile_mw.LosingMiddleware": 601,
            "hostile_mw.DelayingMiddleware": 602,
        },
    )
    code, log, _, _ = _crawl(project, timeout=60)
    assert code == 0, log[-3000:]
    pages = {page.url: page for page in table.scan(["status", "protocol_status", "parse_status"])}
    statuses = [pages[url].status if url in pages else None for url in failing + lost + late]
    assert statuses == [C.RETRY, C.FETCHED] * 3
    assert pages[failing[0]].protocol_status.args[0].startswith("decoding: gzip: ")
    assert pages[lost[0]].protocol_status.args[0].startswith("watchdog: ")
    assert pages[late[0]].protocol_status.args[0].startswith("watchdog: ")
    # the late answer came (the server saw its request) and was dropped: not parsed
    assert hostile.count(LATE, "/raw/mw-late") == 1
    assert pages[late[0]].parse_status is None
    assert pages[late[1]].parse_status is not None
    assert parse_stats(log)["nutch/fetch/watchdog/late"] == 1
    assert hostile.count(WATCH, "/raw/page") == 1
    assert "Traceback" not in log
