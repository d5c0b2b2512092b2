"""Tests for nutchy.core.parse: HTML and text parsing, outlinks and parse status (reference §7)."""

from __future__ import annotations

import itertools

import pytest

from nutchy.core.parse import ParseConfig, is_truncated, parse_change, parse_content
from nutchy.core.signature import MD5Signature
from nutchy.core.status import ParseStatusMajor, ParseStatusMinor
from nutchy.core.urlfilter import RegexURLFilter
from nutchy.core.urls import normalize_url
from nutchy.core.webpage import WebPage

URL = "http://www.example.com/dir/index.html"


def html(body: str, head: str = "") -> bytes:
    return f"<html><head>{head}</head><body>{body}</body></html>".encode()


def parse(content: bytes, content_type: str = "text/html", **config):
    return parse_content(URL, content, content_type, ParseConfig(**config))


def test_title_text_and_outlinks() -> None:
    r = parse(
        html(
            '<h1>Big</h1> <p>Some&amp;text</p><a href="/x">X <i>y</i></a>'
            '<style>p {}</style><area href="a.html" alt="Area">'
            '<iframe src="//other.org/f"></iframe>',
            "<title>T</title>",
        )
    )
    assert (r.status.major, r.status.minor) == (
        ParseStatusMajor.SUCCESS,
        ParseStatusMinor.SUCCESS_OK,
    )
    assert r.title == "T"
    assert r.text == "Big Some&text X y"
    assert r.outlinks == {
        "http://www.example.com/x": "X y",
        "http://www.example.com/dir/a.html": "Area",
        "http://other.org/f": "",
    }


def test_base_href_and_fragment_links() -> None:
    r = parse(
        html(
            '<a href="p">p</a><a href="#top">top</a><a href="javascript:x()">j</a>',
            '<base href="http://cdn.example.com/base/">',
        )
    )
    assert r.outlinks == {"http://cdn.example.com/base/p": "p"}


@pytest.mark.parametrize(
    ("content", "noindex", "nofollow"),
    [
        ("noindex", True, False),
        ("nofollow", False, True),
        ("NONE", True, True),
        ("noindex, nofollow", True, True),
        ("all", False, False),
    ],
)
def test_meta_robots(content: str, noindex: bool, nofollow: bool) -> None:
    r = parse(
        html('text <a href="/a">a</a>', f'<title>t</title><meta name="robots" content="{content}">')
    )
    assert (r.text == "", r.title == "") == (noindex, noindex)
    assert (r.outlinks == {}) == nofollow


def test_meta_refresh_is_a_redirect() -> None:
    r = parse(html("moved", '<meta http-equiv="Refresh" content="5;URL=\'/new\'">'))
    assert r.status.minor == ParseStatusMinor.SUCCESS_REDIRECT
    assert r.status.args == ("http://www.example.com/new", "5")
    assert r.outlinks == {"http://www.example.com/new": ""}
    assert r.text == ""
    # A refresh to itself is no redirect.
    same = parse(html("x", f'<meta http-equiv="refresh" content="0; url={URL}">'))
    assert same.status.minor == ParseStatusMinor.SUCCESS_OK


def test_a_meta_refresh_to_another_host_keeps_no_target_when_external_links_are_ignored() -> None:
    refresh = html("", '<meta http-equiv="refresh" content="0; url=http://other.org/x">')
    kept = parse(refresh)
    assert kept.outlinks == {"http://other.org/x": ""}
    ignored = parse(refresh, ignore_external_links=True)
    assert ignored.status.minor == ParseStatusMinor.SUCCESS_REDIRECT
    assert ignored.status.args == ("http://other.org/x", "0")
    assert ignored.outlinks == {}
    inside = parse(
        html("", '<meta http-equiv="refresh" content="0; url=/y">'), ignore_external_links=True
    )
    assert inside.outlinks == {"http://www.example.com/y": ""}


def test_limits() -> None:
    links = "".join(f'<a href="/p{i}">{"w" * 150}</a>' for i in range(120))
    r = parse(html(links))
    assert len(r.outlinks) == 100
    assert r.outlinks_cut == 20  # the links left unread
    assert all(len(a) == 100 for a in r.outlinks.values())
    assert len(parse(html(links), max_outlinks=-1).outlinks) == 120
    assert parse(html(links), max_outlinks=-1).outlinks_cut == 0
    assert len(parse(html(links), max_outlinks=3, max_anchor_length=2).outlinks) == 3
    long = "/" + "x" * 3000
    assert parse(html(f'<a href="{long}">l</a>')).outlinks == {}


def test_skipped_links_do_not_count_towards_limit() -> None:
    # Nutch 2.4 counts skipped outlinks too (reference §12 #8); nutchy counts stored ones.
    body = '<a href="/a">a</a><a href="/a">again</a><a href="/b">b</a>'
    assert list(parse(html(body), max_outlinks=2).outlinks) == [
        "http://www.example.com/a",
        "http://www.example.com/b",
    ]


def test_internal_external_and_filter() -> None:
    body = '<a href="/in">in</a><a href="http://ext.org/">ext</a><a href="http://www.example.com/skip.gif">g</a>'
    rules = RegexURLFilter.from_lines(["-\\.gif$", "+."])

    def accept(url: str) -> str | None:
        url = normalize_url(url)
        return url if rules.accepts(url) else None

    assert list(parse(html(body), accept=accept).outlinks) == [
        "http://www.example.com/in",
        "http://ext.org/",
    ]
    assert list(parse(html(body), accept=accept, ignore_external_links=True).outlinks) == [
        "http://www.example.com/in"
    ]
    assert list(parse(html(body), accept=accept, ignore_internal_links=True).outlinks) == [
        "http://ext.org/"
    ]


def test_invalid_links_dropped() -> None:
    assert parse(html('<a href="http://[bad/">x</a>')).outlinks == {}


def test_encoding_from_header_and_meta() -> None:
    body = "<title>caf\xe9</title>".encode("latin-1")
    assert parse(body, "text/html; charset=iso-8859-1").title == "caf\xe9"
    meta = b'<meta charset="iso-8859-1"><title>caf\xe9</title>'
    assert parse(meta, "text/html").title == "caf\xe9"


def test_content_types() -> None:
    assert parse(b"  some text  ", "text/plain").text == "some text"
    assert parse(b"<x/>", "application/xhtml+xml").status.major == ParseStatusMajor.SUCCESS
    assert parse(b"\x00", "image/png").status.major == ParseStatusMajor.NOTPARSED
    assert parse(b"x", None).status.major == ParseStatusMajor.NOTPARSED
    missing = parse_content(URL, None, "text/html")
    assert (missing.status.major, missing.status.minor) == (
        ParseStatusMajor.FAILED,
        ParseStatusMinor.FAILED_MISSING_CONTENT,
    )


def test_time_limit() -> None:
    ticks = itertools.count()
    big = html("<p>x</p>" * 10000)
    r = parse(big, clock=lambda: float(next(ticks)), deadline=2.0)
    assert (r.status.major, r.status.minor) == (
        ParseStatusMajor.FAILED,
        ParseStatusMinor.FAILED_EXCEPTION,
    )
    assert r.outlinks == {}
    assert parse(big, clock=lambda: 0.0, deadline=2.0).status.major == ParseStatusMajor.SUCCESS


def fetched_page(content: bytes, content_type: str = "text/html", **fields) -> WebPage:
    fields.setdefault("markers", {"_gnmrk_": "b1", "_ftcmrk_": "b1"})
    return WebPage(
        "com.example.www:http/dir/index.html",
        status=2,
        content=content,
        content_type=content_type,
        **fields,
    )


def test_parse_change_success_and_rerun_is_idempotent() -> None:
    page = fetched_page(html('<a href="/a">A</a> hi', "<title>t</title>"), signature=b"old")
    result = parse_content(page.url, page.content, page.content_type)
    c = parse_change(page, result, MD5Signature())
    assert c.fields["title"] == "t"
    assert c.fields["text"] == "A hi"
    assert c.fields["prev_signature"] == b"old"
    assert c.fields["signature"] == MD5Signature().calculate(page.content, None, None)
    assert c.replace == {"outlinks": {"http://www.example.com/a": "A"}}
    # every link kept: no outlinks-cut mark (one a former parse left is removed)
    assert c.entries == {"markers": {"__prsmrk__": "b1"}, "metadata": {"_olcut_": None}}
    cut = parse_content(page.url, page.content, page.content_type, ParseConfig(max_outlinks=0))
    assert cut.outlinks_cut == 1
    assert parse_change(page, cut, MD5Signature()).entries["metadata"] == {"_olcut_": b"1"}
    # Apply and parse again: the old signature stays in psig.
    page.signature = c.fields["signature"]
    page.prev_signature = b"old"
    page.markers["__prsmrk__"] = "b1"
    again = parse_change(page, result, MD5Signature())
    assert "prev_signature" not in again.fields
    assert again.fields["signature"] == page.signature


def test_parse_change_redirect_failed_notparsed() -> None:
    page = fetched_page(html("", '<meta http-equiv="refresh" content="0;url=/n">'))
    c = parse_change(page, parse_content(page.url, page.content, page.content_type), MD5Signature())
    assert c.entries == {
        "outlinks": {"http://www.example.com/n": ""},
        "metadata": {"___rdrdsc__": b"y"},
    }
    assert "signature" not in c.fields and c.replace == {}
    failed = parse_change(page, parse_content(page.url, None, "text/html"), MD5Signature())
    assert set(failed.fields) == {"parse_status"} and failed.entries == {}
    pdf = fetched_page(b"%PDF-1.4", "application/pdf")
    c = parse_change(pdf, parse_content(pdf.url, pdf.content, pdf.content_type), MD5Signature())
    assert c.fields["parse_status"].major == ParseStatusMajor.NOTPARSED
    assert "signature" in c.fields and "title" not in c.fields and c.replace == {}
    assert c.entries == {"markers": {"__prsmrk__": "b1"}}


def test_is_truncated() -> None:
    assert not is_truncated(fetched_page(b"abc", headers={"content-length": "3"}))
    assert not is_truncated(fetched_page(b"abc", headers={"Content-Length": "x"}))
    assert is_truncated(fetched_page(b"abc", metadata={"truncated-content": b"true"}))
