"""``scrapy crawl nutch -a batch=ID`` against real HTTP servers, on both stores: every outcome
recorded with Nutch's statuses and columns, conditional requests and 304, truncation."""

from __future__ import annotations

import email.utils

import pytest
from sites import ETAG, LAST_MODIFIED, FetchProject, Site, prepare_batch

from nutchy.core.status import CrawlStatus, ProtocolStatus, ProtocolStatusCode
from nutchy.core.urls import reverse_url

P = ProtocolStatusCode
H2, H3, H4 = "127.0.0.2", "127.0.0.3", "127.0.0.4"
REFUSED = "http://127.0.0.9:9/page/refused"  # nothing listens there
FIELDS = [
    "status",
    "protocol_status",
    "markers",
    "content",
    "content_type",
    "base_url",
    "headers",
    "metadata",
    "outlinks",
    "repr_url",
    "fetch_time",
    "prev_fetch_time",
]


@pytest.fixture(scope="module")
def servers():
    robots = {H3: (200, "User-agent: *\nDisallow: /private\n")}
    with Site((H2, H3, H4), robots=robots) as site:
        yield site


@pytest.fixture
def site(servers):
    servers.clear()
    return servers


def test_every_outcome_is_recorded_as_nutch_does(store, tmp_path, site):
    paths = {
        H2: [
            "/page/1",
            "/status/400",
            "/status/401",
            "/status/403",
            "/status/404",
            "/status/410",
            "/status/500",
            "/status/503",
            "/redirect/301?to=/page/target",
            f"/redirect/302?to={site.url(H3, '/page/elsewhere')}",
            "/redirect/307?to=/page/1",
            "/cond",
            "/binary",
            "/huge?n=3000000",
            "/huge?n=3000000&chunked=1",
            "/gzip?n=5000",
        ],
        H3: ["/page/allowed", "/private/denied"],
        H4: ["/reset", "/slow?s=3"],
    }
    urls = [site.url(host, path) for host, ps in paths.items() for path in ps] + [REFUSED]
    table = prepare_batch(store, urls)
    project = FetchProject(
        tmp_path,
        store,
        NUTCH_HTTP_CONTENT_LIMIT=1000,
        NUTCH_HTTP_TIMEOUT=1000,
        NUTCH_STORE_IP_ADDRESS=True,
    )
    result = project.crawl()
    assert result.returncode == 0, result.log[-3000:]
    assert "Traceback" not in result.log

    pages = {page.url: page for page in table.scan(FIELDS)}
    assert len(pages) == len(urls)

    def row(host: str, path: str):
        return pages[site.url(host, path)]

    def status_of(host: str, path: str) -> tuple[int, int]:
        page = row(host, path)
        return page.status, page.protocol_status.code

    expected = {
        (H2, "/page/1"): (CrawlStatus.FETCHED, P.SUCCESS),
        (H2, "/status/400"): (CrawlStatus.GONE, P.GONE),
        (H2, "/status/401"): (CrawlStatus.GONE, P.ACCESS_DENIED),
        (H2, "/status/403"): (CrawlStatus.RETRY, P.EXCEPTION),
        (H2, "/status/404"): (CrawlStatus.GONE, P.NOTFOUND),
        (H2, "/status/410"): (CrawlStatus.GONE, P.GONE),
        (H2, "/status/500"): (CrawlStatus.RETRY, P.EXCEPTION),
        (H2, "/status/503"): (CrawlStatus.RETRY, P.EXCEPTION),
        (H2, "/redirect/301?to=/page/target"): (CrawlStatus.REDIR_PERM, P.MOVED),
        (H2, f"/redirect/302?to={site.url(H3, '/page/elsewhere')}"): (
            CrawlStatus.REDIR_TEMP,
            P.TEMP_MOVED,
        ),
        (H2, "/redirect/307?to=/page/1"): (CrawlStatus.REDIR_TEMP, P.TEMP_MOVED),
        (H2, "/cond"): (CrawlStatus.FETCHED, P.SUCCESS),
        (H2, "/binary"): (CrawlStatus.FETCHED, P.SUCCESS),
        (H3, "/page/allowed"): (CrawlStatus.FETCHED, P.SUCCESS),
        (H3, "/private/denied"): (CrawlStatus.GONE, P.ROBOTS_DENIED),
        (H4, "/reset"): (CrawlStatus.RETRY, P.EXCEPTION),
        (H4, "/slow?s=3"): (CrawlStatus.RETRY, P.EXCEPTION),
    }
    assert {key: status_of(*key) for key in expected} == expected
    assert pages[REFUSED].protocol_status.args[0].startswith("refused: ")
    assert row(H4, "/slow?s=3").protocol_status.args[0].startswith("timeout: ")
    assert row(H4, "/reset").protocol_status.args[0].startswith("reset: ")
    assert row(H2, "/status/403").protocol_status.args == (
        f"Http code=403, url={site.url(H2, '/status/403')}",
    )

    # every row: its fetch mark, and f:pts = the f:ts generate saw
    for page in pages.values():
        assert page.markers["_ftcmrk_"] == "b1"
        assert page.prev_fetch_time > 0
        assert page.fetch_time >= page.prev_fetch_time

    ok = row(H2, "/page/1")
    assert ok.content == b"<html><title>/page/1</title>/page/1</html>"
    assert ok.content_type == "text/html"
    assert ok.base_url == site.url(H2, "/page/1")
    assert ok.headers["Content-Length"] == str(len(ok.content))
    assert len(ok.metadata["_rs_"]) == 4
    assert ok.metadata["_ip_"] == H2.encode()
    assert row(H2, "/binary").content == bytes(range(256))
    assert row(H2, "/binary").content_type == "application/octet-stream"

    # errors: headers replaced, no content written
    gone = row(H2, "/status/404")
    assert gone.content is None and gone.headers["Content-Type"] == "text/html"
    denied = row(H3, "/private/denied")
    assert denied.content is None and not denied.headers
    assert site.count(H3, "/private/denied") == 0  # never requested
    assert site.count(H3, "/robots.txt") == 1

    # redirects the Nutch way: status, target as the only outlink, the mark, the repr URL
    moved = row(H2, "/redirect/301?to=/page/target")
    target = site.url(H2, "/page/target")
    assert moved.protocol_status == ProtocolStatus(P.MOVED, (target,))
    assert moved.outlinks == {target: ""}
    assert moved.metadata["___rdrdsc__"] == b"y"
    assert moved.repr_url == target  # permanent, source not a root: the target
    assert moved.content == b"moved"
    assert table.get(target) is None  # a row only at updatedb
    assert site.count(H2, "/page/target") == 0  # not followed
    external = row(H2, f"/redirect/302?to={site.url(H3, '/page/elsewhere')}")
    assert external.outlinks == {site.url(H3, "/page/elsewhere"): ""}

    # truncation at http.content.limit, the download stopped: marks and the real length
    for path in ("/huge?n=3000000", "/huge?n=3000000&chunked=1"):
        huge = row(H2, path)
        assert huge.status == CrawlStatus.FETCHED
        assert huge.content == b"x" * 1000
        assert huge.metadata["truncated-content"] == b"true"
        assert huge.metadata["truncated-content-reason"] == b"length"
    assert row(H2, "/huge?n=3000000").headers["Content-Length"] == "3000000"
    assert not ok.metadata.get("truncated-content")
    gz = row(H2, "/gzip?n=5000")
    assert gz.content == b"z" * 1000 and gz.metadata["truncated-content"] == b"true"
    assert "Content-Length" not in gz.headers  # the encoded length (NUTCH-2548)

    stats = result.stats
    assert stats["nutch/fetch/status/SUCCESS"] == 7
    assert stats["nutch/fetch/status/ROBOTS_DENIED"] == 1
    assert stats["nutch/fetch/http/404"] == 1
    assert stats["nutch/fetch/robots/denied"] == 1
    assert stats["nutch/fetch/truncated"] == 3
    assert stats["nutch/fetch/written"] == len(urls)
    assert stats["nutch/fetch/exception/timeout"] == 1
    assert f"Fetched batch b1 (finished): {len(urls)} rows" in result.log


def test_conditional_requests_and_not_modified(store, tmp_path, site):
    cond = site.url(H2, "/cond")
    since = site.url(H2, "/cond?since")
    plain = site.url(H2, "/page/plain")
    table = prepare_batch(store, [cond, since, plain])
    # A known modified time for one row; none (0) for the others.
    table.update(reverse_url(since), {"modified_time": LAST_MODIFIED * 1000})
    project = FetchProject(tmp_path, store)
    first = project.crawl()
    assert first.returncode == 0, first.log[-3000:]
    headers = {h.path: h.headers for h in site.hits[H2]}
    assert "If-Modified-Since" not in headers["/page/plain"]  # never the 1970 date
    assert "If-None-Match" not in headers["/cond"]
    assert headers["/cond?since"]["If-Modified-Since"] == email.utils.formatdate(
        LAST_MODIFIED, usegmt=True
    )
    assert table.get(since, ["status"]).status == CrawlStatus.NOTMODIFIED
    assert table.get(cond, ["headers"]).headers["ETag"] == ETAG

    # The batch again (no resume): the stored ETag makes the request conditional; the 304 keeps
    # the stored content and updates the headers.
    second = project.crawl()
    assert second.returncode == 0, second.log[-3000:]
    sent = [h.headers.get("If-None-Match") for h in site.hits[H2] if h.path == "/cond"]
    assert sent == [None, ETAG]
    page = table.get(cond, ["status", "protocol_status", "content", "headers"])
    assert page.status == CrawlStatus.NOTMODIFIED
    assert page.protocol_status == ProtocolStatus(P.NOTMODIFIED, (cond,))
    assert page.content == b"<html>conditional</html>"
    assert page.headers["Content-Type"] == "text/html"  # kept from the 200
    # The 304 has no Content-Length (Scrapy's response to it says 0): the stored one is the
    # length of the content kept, as the 200 sent it (RFC 9111 §3.2).
    assert page.headers["Content-Length"] == str(len(page.content))
    assert page.headers["ETag"] == ETAG
    assert second.stats["nutch/fetch/status/NOTMODIFIED"] == 2
    # The 304s were recorded, then dropped before the spider (AnswerRecorded): only the 200
    # reached the engine as a response; robots.txt was the first crawl's, from the host memory.
    assert site.count(H2, "/robots.txt") == 1
    assert second.stats["response_received_count"] == 1
    assert second.stats["item_scraped_count"] == 1


def test_no_cookie_is_sent_back(store, tmp_path, site):
    # One queue, one request at a time, in key order: /cookie, then /page/after.
    table = prepare_batch(store, [site.url(H4, "/cookie"), site.url(H4, "/page/after")])
    result = FetchProject(tmp_path, store).crawl()
    assert result.returncode == 0, result.log[-3000:]
    hits = {h.path: h.headers for h in site.hits[H4]}
    assert list(hits) == ["/robots.txt", "/cookie", "/page/after"]
    assert (
        table.get(site.url(H4, "/cookie"), ["headers"]).headers["Set-Cookie"] == "session=1; Path=/"
    )
    assert "Cookie" not in hits["/page/after"]  # Nutch keeps no cookies (COOKIES_ENABLED)
    assert "Referer" not in hits["/page/after"]
    # The components the spider leaves out leave no component asking for them.
    assert "] WARNING: " not in result.log, result.log[-3000:]

    # A project that turns cookies on gets them.
    site.clear()
    prepare_batch(store, [site.url(H4, "/cookie?again"), site.url(H4, "/page/again")], "b2")
    project = FetchProject(tmp_path, store, COOKIES_ENABLED=True)
    result = project.crawl("b2")
    assert result.returncode == 0, result.log[-3000:]
    hits = {h.path: h.headers for h in site.hits[H4]}
    assert hits["/page/again"]["Cookie"] == "session=1"


def test_the_fetch_logs_its_progress_off_a_terminal(store, tmp_path, site):
    # stderr is a pipe here: no bar, a log line per interval (none at all with the default 10 s
    # on a batch this short), then a last one at the close.
    urls = [site.url(H2, f"/page/{n}") for n in range(3)]
    prepare_batch(store, urls)
    result = FetchProject(tmp_path, store, NUTCH_FETCHER_PROGRESS_LOG_INTERVAL=0.0).crawl()
    assert result.returncode == 0, result.log[-3000:]
    lines = [line for line in result.log.splitlines() if "[nutchy.progress] INFO: fetch: " in line]
    assert [line.split("INFO: ")[1].split(",")[0] for line in lines] == [
        "fetch: 1 URLs",
        "fetch: 2 URLs",
        "fetch: 3 URLs",
        "fetch: 3 URLs",
    ], lines
    assert "\r" not in result.log  # no tqdm bar

    # The batch again, as the children of nutchy crawl log: nothing of the progress.
    (tmp_path / "quiet").mkdir()
    quiet = FetchProject(
        tmp_path / "quiet", store, LOG_LEVEL="WARNING", NUTCH_FETCHER_PROGRESS_LOG_INTERVAL=0.0
    ).crawl()
    assert quiet.returncode == 0, quiet.log[-3000:]
    assert "fetch: " not in quiet.log
