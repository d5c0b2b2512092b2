"""Tests for the HTML reading of nutchy.core.parse: libxml2's HTML parser (lxml) and where it reads
a page otherwise than the standard library's ``html.parser`` did (docs/parse.md, "How the markup is
read"), plus the link resolution's shortcut against ``urljoin``."""

from __future__ import annotations

import time
from urllib.parse import urljoin

from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.parse import _CHUNK, ParseConfig, _resolver, parse_content
from nutchy.core.status import ParseStatusMajor, ParseStatusMinor

URL = "http://www.example.com/dir/index.html"


def parse(content: str | bytes, content_type: str = "text/html", **config):
    if isinstance(content, str):
        content = content.encode()
    return parse_content(URL, content, content_type, ParseConfig(**config))


def test_a_word_across_two_chunks_of_the_markup_stays_one_word() -> None:
    # The markup is fed to the parser in chunks; html.parser cut the text node there ("e xamples").
    head = "<html><body><p>"
    filler = "x " * ((_CHUNK - len(head) - 3) // 2)
    page = f"{head}{filler}documentation tests</p></body></html>"
    assert len(head) + len(filler) < _CHUNK < len(head) + len(filler) + len("documentation")
    assert parse(page).text.endswith(" x documentation tests")


def test_character_references_and_comments() -> None:
    # libxml2 hands the text around a reference in several calls: one text node all the same.
    r = parse("<p>caf&eacute;s &amp;c, x&lt;y&#x21;</p><p>a<!-- c -->b</p>")
    assert r.text == "cafés &c, x<y! a b"


def test_a_stray_end_tag_does_not_split_a_word() -> None:
    # Dropped as a DOM parser drops it: "a" and "b" are one text node, as Nutch's DOMContentUtils
    # would see them (html.parser gave "a b").
    assert parse("<p>a</b>b</p>").text == "ab"


def test_an_anchor_ends_with_the_element_around_it() -> None:
    # html.parser kept the anchor open until the next </a>: "foo bar".
    r = parse('<p><a href="/x">foo</p>bar <a href="/y">y</a>')
    assert r.outlinks == {"http://www.example.com/x": "foo", "http://www.example.com/y": "y"}
    assert r.text == "foo bar y"


def test_the_first_of_two_equal_attributes_counts() -> None:
    r = parse('<a href="/first" href="/second">d</a>')
    assert r.outlinks == {"http://www.example.com/first": "d"}


def test_a_self_closed_element_is_empty() -> None:
    # libxml2 reads "/>" as XHTML does (and html.parser did), also on elements that are not void;
    # a browser would not: here it would make "after" the anchor and hide "shown" as script.
    r = parse('<a href="/x"/>after</a> <script src="s.js"/>shown')
    assert r.outlinks == {"http://www.example.com/x": ""}
    assert r.text == "after shown"


def test_title_and_textarea_hold_text_not_markup() -> None:
    r = parse(
        "<title>a <b>bold</b> title</title>"
        '<textarea><a href="/in-textarea">t</a></textarea><a href="/out">o</a>'
    )
    assert r.title == "a <b>bold</b> title"
    assert r.text == '<a href="/in-textarea">t</a> o'
    assert list(r.outlinks) == ["http://www.example.com/out"]


def test_the_title_is_the_first_title_outside_svg() -> None:
    # As a browser's document.title: an SVG icon's <title> is no page title (html.parser added
    # it: "Page Icon") but text; so is a second title.
    r = parse("<title>Page</title><title>Again</title><body><svg><title>Icon</title></svg> text")
    assert (r.title, r.text) == ("Page", "Again Icon text")
    # Text before <html> (a server's warning, a template's tag) puts everything in the body:
    # the title still counts.
    late = parse("Warning: x<html><head><title>Late</title></head><body>b</body></html>")
    assert (late.title, late.text) == ("Late", "Warning: x b")
    icon_first = parse("<svg><title>Icon</title></svg><title>Page</title>")
    assert (icon_first.title, icon_first.text) == ("Page", "Icon")


def test_links_in_noscript_are_kept_without_their_text() -> None:
    r = parse('<noscript><a href="/n">no script</a></noscript><p>seen</p>')
    assert r.outlinks == {"http://www.example.com/n": ""}
    assert r.text == "seen"


def test_nul_becomes_the_replacement_character() -> None:
    assert parse(b"<p>a\x00b</p>").text == "a\ufffdb"


def test_a_meta_charset_does_not_override_the_charset_read() -> None:
    # The bytes are decoded once (header, BOM, meta: w3lib) and libxml2 is told UTF-8: a <meta>
    # naming another charset must not make it read the UTF-8 it is given as Latin-1.
    page = '<meta charset="iso-8859-1"><title>café</title>'.encode()
    assert parse(page, "text/html; charset=utf-8").title == "café"


def test_pages_with_no_element_or_no_markup() -> None:
    for content in (b"", b"   ", b"<!-- only a comment -->", b"<", b"plain words"):
        r = parse(content)
        assert (r.status.major, r.status.minor) == (
            ParseStatusMajor.SUCCESS,
            ParseStatusMinor.SUCCESS_OK,
        ), content
        assert r.outlinks == {}
    assert parse(b"plain words").text == "plain words"


def test_binary_junk_and_deep_nesting() -> None:
    junk = parse(bytes(range(256)) * 64)
    assert junk.status.major == ParseStatusMajor.SUCCESS
    start = time.process_time()
    deep = parse("<div>x" * 100_000 + '<a href="/deep">deep</a>')
    assert deep.outlinks == {"http://www.example.com/deep": "deep"}
    assert deep.text.count("x") == 100_000
    assert time.process_time() - start < 30  # linear: a quadratic walk would not end


_HREF = st.text(alphabet="/.;?#\t\n\r:ab%@ []\\\x01é", max_size=12)


@given(
    st.sampled_from(
        [
            "http://a.example/x/y.html",
            "https://h:8/",
            "http://a/b?c#d",
            "HTTP://A/B",
            "http://u@h/p;q",
            "http://[::1]/z",
            "http://x",
            "ftp://f/x",
            "mailto:x@y",
            "",
        ]
    ),
    _HREF,
    st.booleans(),
)
def test_links_resolve_as_urljoin_resolves_them(base: str, href: str, from_root: bool) -> None:
    if from_root:
        href = "/" + href
    try:
        expected: str | type[ValueError] = urljoin(base, href)
    except ValueError:
        expected = ValueError
    try:
        got: str | type[ValueError] = _resolver(base)(href)
    except ValueError:
        got = ValueError
    assert got == expected


def test_a_link_whose_rel_is_nofollow_is_not_an_outlink() -> None:
    # As Nutch's DOMContentUtils: rel equal to "nofollow" in any case drops the link, a list of
    # values does not; the link's text stays the page's text.
    r = parse(
        '<p><a href="/a" rel="nofollow">one</a> <a href="/b" rel="NoFollow">two</a>'
        ' <a href="/c" rel="nofollow ugc">three</a> <area href="/d" rel="nofollow">'
        ' <a href="/e">four</a></p>'
    )
    assert r.outlinks == {"http://www.example.com/c": "three", "http://www.example.com/e": "four"}
    assert r.text == "one two three four"
