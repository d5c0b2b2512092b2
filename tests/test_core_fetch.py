"""nutchy.core.fetch: Nutch 2.x's fetch outcomes, statuses and the columns they write."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.fetch import (
    TRUNCATED_KEY,
    FetchEntry,
    FetchOutcome,
    canonical_header,
    choose_repr,
    conditional_headers,
    crawl_status_of,
    entry_from_page,
    exception_status,
    fetch_change,
    http_outcome,
    http_status,
    parse_retry_after,
    queue_id,
    redirect_loop,
    robots_verdict,
)
from nutchy.core.status import CrawlStatus, ProtocolStatus, ProtocolStatusCode
from nutchy.core.webpage import WebPage
from nutchy.store.schema import build_update, decode_page

P = ProtocolStatusCode
URL = "http://www.example.com/a/b.html"
ENTRY = FetchEntry("com.example.www:http/a/b.html", URL, "b-1", fetch_time=1000)
NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("code", "location", "expected", "args"),
    [
        (200, None, P.SUCCESS, ()),
        (300, "/c", P.MOVED, ("http://www.example.com/c",)),
        (301, "http://other.example/", P.MOVED, ("http://other.example/",)),
        (305, "http://proxy.example/", P.MOVED, ("http://proxy.example/",)),
        (308, "c", P.MOVED, ("http://www.example.com/a/c",)),
        (302, "/t", P.TEMP_MOVED, ("http://www.example.com/t",)),
        (303, "/t", P.TEMP_MOVED, ("http://www.example.com/t",)),
        (307, None, P.TEMP_MOVED, (URL,)),  # no Location: the URL itself
        (304, None, P.NOTMODIFIED, (URL,)),
        (400, None, P.GONE, (URL,)),
        (401, None, P.ACCESS_DENIED, (f"Authentication required: {URL}",)),
        (403, None, P.EXCEPTION, (f"Http code=403, url={URL}",)),
        (404, None, P.NOTFOUND, (URL,)),
        (410, None, P.GONE, (f"Http: 410 url={URL}",)),
        (429, None, P.EXCEPTION, (f"Http code=429, url={URL}",)),
        (500, None, P.EXCEPTION, (f"Http code=500, url={URL}",)),
        (503, None, P.EXCEPTION, (f"Http code=503, url={URL}",)),
        (204, None, P.EXCEPTION, (f"Http code=204, url={URL}",)),
    ],
)
def test_http_codes_map_as_in_nutch_httpbase(code, location, expected, args):
    status = http_status(code, URL, location)
    assert status == ProtocolStatus(expected, args)


@pytest.mark.parametrize(
    ("code", "crawl"),
    [
        (P.SUCCESS, CrawlStatus.FETCHED),
        (P.MOVED, CrawlStatus.REDIR_PERM),
        (P.TEMP_MOVED, CrawlStatus.REDIR_TEMP),
        (P.NOTMODIFIED, CrawlStatus.NOTMODIFIED),
        (P.GONE, CrawlStatus.GONE),
        (P.NOTFOUND, CrawlStatus.GONE),
        (P.ACCESS_DENIED, CrawlStatus.GONE),
        (P.ROBOTS_DENIED, CrawlStatus.GONE),
        (P.EXCEPTION, CrawlStatus.RETRY),
        (P.RETRY, CrawlStatus.RETRY),
        (P.BLOCKED, CrawlStatus.RETRY),
        (P.FAILED, CrawlStatus.RETRY),
        (77, CrawlStatus.RETRY),
    ],
)
def test_crawl_status_of_each_protocol_status(code, crawl):
    assert crawl_status_of(code) is crawl


@given(st.integers(100, 599))
def test_every_http_code_gives_a_status_and_only_200_is_success(code):
    status = http_status(code, URL, "/x")
    assert (status.code == P.SUCCESS) == (code == 200)
    assert crawl_status_of(status.code) in CrawlStatus
    if 300 <= code < 400:
        assert status.args[0].startswith("http://www.example.com/")


# --- chooseRepr: the cases listed in Nutch's URLUtil comments -------------------------------------


@pytest.mark.parametrize(
    ("src", "dst", "temp", "kept"),
    [
        ("http://a.com/", "http://b.com/", False, "dst"),  # 1) other domain
        ("http://a.com/", "http://b.com/", True, "dst"),
        ("http://a.com", "http://a.com/?y=1", False, "src"),  # 2) permanent, root source
        ("http://a.com/", "http://a.com/xyz/index.html", False, "src"),
        ("http://a.com/xyz/index.html", "http://a.com/", False, "dst"),  # 3)
        ("http://a.com/xyz/index.html", "http://a.com/abc/page.html", False, "dst"),  # 4)
        ("http://a.com/", "http://a.com/xyz/index.html", True, "src"),  # 5)
        ("http://a.com/xyz/index.html", "http://a.com/", True, "dst"),  # 7)
        ("http://a.com/xyz/index.html", "http://a.com/abc/page.html", True, "dst"),  # 8) shorter
        ("http://a.com/x/y/z.html", "http://a.com/abc/p.html", True, "dst"),  # fewer segments
        ("http://a.com/abc/p.html", "http://a.com/x/y/z.html", True, "src"),
        ("http://a.com/same.html", "http://a.com/same.htm", True, "dst"),
        ("http://a.com/same.htm", "http://a.com/sam2.htm", True, "src"),  # tie keeps source
        ("http://www.a.com/xyz/index.html", "http://www.news.a.com/xyz/index.html", True, "src"),
        ("http://www.a.com/", "http://www.news.a.com/", True, "src"),  # 9)
        ("http://www.news.a.com/", "http://a.com/", True, "dst"),
    ],
)
def test_choose_repr(src, dst, temp, kept):
    assert choose_repr(src, dst, temp) == (src if kept == "src" else dst)


def test_redirect_loop():
    chain = ["http://a.example/1", "http://a.example/2"]
    assert redirect_loop(chain, "http://a.example/2")
    assert not redirect_loop(chain, "http://a.example/3")
    assert not redirect_loop([], "http://a.example/1")


# --- conditional GET, queues, politeness ----------------------------------------------------------


def test_if_modified_since_only_for_a_known_time():
    assert conditional_headers(ENTRY) == {}
    entry = FetchEntry("k", URL, "b", modified_time=784111777000, etag='W/"abc"')
    assert conditional_headers(entry) == {
        "If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT",
        "If-None-Match": 'W/"abc"',
    }
    assert "1970" not in str(conditional_headers(FetchEntry("k", URL, "b", modified_time=-5)))


@pytest.mark.parametrize(
    ("url", "mode", "address", "expected"),
    [
        ("http://WWW.Example.COM:81/x", "byHost", None, "http://www.example.com"),
        ("https://a.b.example.co.uk/", "byDomain", None, "https://example.co.uk"),
        ("http://127.0.0.2:8080/", "byHost", None, "http://127.0.0.2"),
        ("http://x.example/", "byIP", "192.0.2.7", "http://192.0.2.7"),
    ],
)
def test_queue_ids(url, mode, address, expected):
    assert queue_id(url, mode, address) == expected


def test_queue_id_refuses_unknown_modes_and_ip_without_address():
    with pytest.raises(ValueError, match="unknown queue mode"):
        queue_id(URL, "byMoon")
    with pytest.raises(ValueError, match="address"):
        queue_id(URL, "byIP")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5", 5.0),
        ("0", 0.0),
        ("  30 ", 30.0),
        ("-1", None),
        ("1.5", None),
        ("", None),
        (None, None),
        ("Tue, 14 Nov 2023 22:14:00 GMT", 40.0),  # NOW is 22:13:20 GMT
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # in the past
        ("Tue, 14 Nov 2023 22:14:00", None),  # no zone
        ("next week", None),
    ],
)
def test_retry_after(value, seconds):
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    ("code", "allow_403", "defer", "expected"),
    [
        (200, True, True, (True, None, False, True)),
        (404, True, True, (False, "allow", False, True)),
        (403, True, True, (False, "allow", False, True)),
        (403, False, True, (False, "deny", False, True)),
        (401, False, True, (False, "allow", False, True)),
        (500, True, True, (False, None, True, False)),
        (503, True, True, (False, None, True, False)),
        (429, True, True, (False, None, True, False)),
        (503, True, False, (False, "allow", False, False)),
        (None, True, True, (False, "allow", False, False)),
    ],
)
def test_robots_verdicts(code, allow_403, defer, expected):
    assert tuple(robots_verdict(code, allow_403, defer)) == expected


# --- outcomes and the columns they write ------------------------------------------------------


def test_headers_are_canonical_and_the_first_value_wins():
    outcome = http_outcome(
        URL,
        200,
        [("etag", '"1"'), ("ETAG", '"2"'), ("set-cookie", "a=1"), ("Set-Cookie", "b=2")],
        b"",
    )
    assert outcome.headers == {"ETag": '"1"', "Set-Cookie": "a=1"}
    assert canonical_header("www-authenticate") == "WWW-Authenticate"


@pytest.mark.parametrize(
    ("content_type", "url", "expected"),
    [
        ("Text/HTML; charset=UTF-8", URL, "text/html"),
        (None, "http://a.example/doc.pdf", "application/pdf"),
        ("garbage", "http://a.example/x", "application/octet-stream"),
    ],
)
def test_content_type(content_type, url, expected):
    headers = [("Content-Type", content_type)] if content_type else []
    assert http_outcome(url, 200, headers, b"").content_type == expected


def test_truncation_at_the_content_limit():
    assert not http_outcome(URL, 200, [], b"x" * 10, content_limit=10).truncated
    cut = http_outcome(URL, 200, [], b"x" * 11, content_limit=10)
    assert (cut.content, cut.truncated) == (b"x" * 10, True)
    assert http_outcome(URL, 200, [], b"x" * 5, content_limit=10, truncated=True).truncated
    assert not http_outcome(URL, 200, [], b"x" * 10**6, content_limit=-1).truncated


def cells_of(entry, outcome, **kwargs):
    """The cells the change writes, and the families it replaces."""
    change = fetch_change(entry, outcome, now=NOW, **kwargs)
    update = build_update(entry.key, *change)
    return update.puts, update.deletes, update.replace


def test_success_writes_status_times_content_headers_and_marks():
    outcome = http_outcome(
        URL,
        200,
        [("Content-Type", "text/html"), ("Content-Length", "5")],
        b"hello",
        response_time=12,
        address="127.0.0.2",
    )
    puts, deletes, replace = cells_of(ENTRY, outcome)
    assert puts[b"f:st"] == (2).to_bytes(4, "big")
    assert puts[b"f:pts"] == (1000).to_bytes(8, "big")
    assert puts[b"f:ts"] == NOW.to_bytes(8, "big")
    assert puts[b"f:prot"] == bytes.fromhex("020000")
    assert puts[b"f:cnt"] == b"hello"
    assert puts[b"f:typ"] == b"text/html"
    assert puts[b"f:bas"] == URL.encode()
    assert puts[b"mk:_ftcmrk_"] == b"b-1"
    assert puts[b"h:Content-Length"] == b"5"
    assert puts[b"mtdt:_rs_"] == (12).to_bytes(4, "big")
    assert puts[b"mtdt:_ip_"] == b"127.0.0.2"
    assert replace == {b"h"}  # the response's headers replace the family...
    assert b"mk" not in replace and b"mtdt" not in replace  # ...and nothing else is replaced
    assert deletes == {b"mtdt:" + TRUNCATED_KEY.encode(), b"mtdt:truncated-content-reason"}
    page = decode_page(ENTRY.key.encode(), puts)
    assert page.status == CrawlStatus.FETCHED
    assert page.protocol_status == ProtocolStatus(P.SUCCESS)


def test_truncated_content_is_marked():
    outcome = http_outcome(URL, 200, [("Content-Length", "100")], b"x" * 100, content_limit=10)
    puts, deletes, _ = cells_of(ENTRY, outcome)
    assert puts[b"f:cnt"] == b"x" * 10
    assert puts[b"h:Content-Length"] == b"100"  # the real length, as Nutch's parser compares
    assert puts[b"mtdt:truncated-content"] == b"true"
    assert puts[b"mtdt:truncated-content-reason"] == b"length"
    assert not deletes


def test_store_content_off_writes_empty_content():
    puts, _, _ = cells_of(ENTRY, http_outcome(URL, 200, [], b"body"), store_content=False)
    assert puts[b"f:cnt"] == b""


@pytest.mark.parametrize("code", [404, 410, 400, 401, 403, 500, 503])
def test_errors_write_no_content_but_replace_headers(code):
    puts, deletes, replace = cells_of(ENTRY, http_outcome(URL, code, [("Server", "x")], b"oops"))
    assert b"f:cnt" not in puts and b"f:typ" not in puts and b"f:bas" not in puts
    assert not deletes  # the old content and its truncation marks stay
    assert replace == {b"h"}
    assert puts[b"h:Server"] == b"x"
    expected = CrawlStatus.GONE if code in (400, 401, 404, 410) else CrawlStatus.RETRY
    assert puts[b"f:st"] == int(expected).to_bytes(4, "big")


def test_not_modified_keeps_content_and_updates_headers():
    # Scrapy gives a 304 that had no Content-Length a "0": never stored (RFC 9111 §3.2).
    headers = [("Date", "now"), ("ETag", '"v2"'), ("Content-Length", "0")]
    outcome = http_outcome(URL, 304, headers, b"")
    puts, deletes, replace = cells_of(ENTRY, outcome)
    assert puts[b"f:st"] == (0x26).to_bytes(4, "big")
    assert puts[b"f:prot"] == bytes.fromhex("2a02") + bytes([2 * len(URL)]) + URL.encode() + b"\0\0"
    assert b"f:cnt" not in puts
    assert not replace and not deletes  # stored Content-Type, Content-Length... stay
    assert puts[b"h:ETag"] == b'"v2"'
    assert b"h:Content-Length" not in puts


def test_exception_writes_status_and_marks_only():
    puts, deletes, replace = cells_of(ENTRY, FetchOutcome(exception_status("reset", "by peer")))
    assert set(puts) == {b"f:st", b"f:pts", b"f:ts", b"f:prot", b"mk:_ftcmrk_", b"mtdt:_nft_"}
    assert not deletes and not replace
    assert puts[b"mtdt:_nft_"] == puts[b"f:ts"]  # both 8-byte longs: when it was fetched
    page = decode_page(ENTRY.key.encode(), puts)
    assert page.protocol_status == ProtocolStatus(P.EXCEPTION, ("reset: by peer",))


def test_robots_denied_is_gone_without_content():
    puts, _, _ = cells_of(ENTRY, FetchOutcome(ProtocolStatus(P.ROBOTS_DENIED)))
    assert puts[b"f:st"] == (3).to_bytes(4, "big")
    assert b"h" not in {c.split(b":")[0] for c in puts}


def test_redirect_records_the_target_the_nutch_way():
    outcome = http_outcome(URL, 301, [("Location", "/new")], b"moved")
    target = "http://www.example.com/new"
    puts, _, replace = cells_of(ENTRY, outcome, redirect_target=target)
    assert puts[b"f:st"] == (5).to_bytes(4, "big")
    assert puts[b"f:cnt"] == b"moved"  # the redirect's own body
    assert puts[b"ol:" + target.encode()] == b""
    assert replace == {b"h", b"ol"}  # ol becomes the single target, as in Nutch
    assert puts[b"mtdt:___rdrdsc__"] == b"y"
    assert puts[b"f:rpr"] == target.encode()  # permanent, source not root: the target


def test_redirect_without_a_kept_target_records_only_the_status():
    outcome = http_outcome(URL, 302, [("Location", "/t")], b"")
    puts, _, replace = cells_of(ENTRY, outcome, redirect_target=None)
    assert puts[b"f:st"] == (4).to_bytes(4, "big")
    assert b"ol" not in replace and b"f:rpr" not in puts and b"mtdt:___rdrdsc__" not in puts


def test_temp_redirect_repr_starts_from_the_stored_repr():
    entry = FetchEntry(ENTRY.key, URL, "b", repr_url="http://www.example.com/")
    outcome = http_outcome(URL, 302, [("Location", "/deep/page.html")], b"")
    puts, _, _ = cells_of(entry, outcome, redirect_target="http://www.example.com/deep/page.html")
    assert puts[b"f:rpr"] == b"http://www.example.com/"


def test_entry_from_page():
    assert entry_from_page(WebPage("com.a:http/")) is None
    page = WebPage(
        "com.a:http/x",
        fetch_time=5,
        modified_time=6,
        repr_url="http://a.com/",
        markers={"_gnmrk_": "b", "_ftcmrk_": "b"},
        metadata={"_npt_": b"\x00\x00\x00\x03"},
    )
    entry = entry_from_page(page)
    assert entry == FetchEntry(
        "com.a:http/x", "http://a.com/x", "b", 5, 6, None, "http://a.com/", 3, True
    )
