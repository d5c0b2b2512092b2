"""Tests for nutchy.core.urlfilter: Nutch's regex-urlfilter.txt format and nutchy's default rules."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nutchy.core.urlfilter import (
    ACCEPT_ALL,
    DEFAULT_RULES_PATH,
    RegexURLFilter,
    load_url_filter,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_first_matching_rule_wins() -> None:
    url_filter = RegexURLFilter.from_lines(
        [
            "+^https://example\\.com/keep/",
            "-^https://example\\.com/",
            "+.",
        ]
    )
    assert url_filter.accepts("https://example.com/keep/this.html")
    assert not url_filter.accepts("https://example.com/other.html")
    assert url_filter.accepts("https://example.org/")


def test_rules_search_anywhere_in_the_url() -> None:
    url_filter = RegexURLFilter.from_lines(["-login", "+."])
    assert not url_filter.accepts("https://example.com/account/login?next=/")
    assert url_filter.accepts("https://example.com/")


def test_no_matching_rule_rejects() -> None:
    url_filter = RegexURLFilter.from_lines(["+^https://"])
    assert not url_filter.accepts("http://example.com/")
    assert not RegexURLFilter.from_lines([]).accepts("http://example.com/")
    assert not RegexURLFilter([]).accepts("http://example.com/")


def test_comments_blank_lines_and_whitespace_are_skipped() -> None:
    url_filter = RegexURLFilter.from_lines(
        ["# a comment\n", "\n", "   \n", "  # indented comment\r\n", "  -\\.gif$  \r\n", "+.\n"]
    )
    assert url_filter.rules == ((False, "\\.gif$"), (True, "."))
    assert len(url_filter) == 2
    assert repr(url_filter) == "<RegexURLFilter with 2 rules>"


def test_rules_are_case_sensitive_unless_asked() -> None:
    url_filter = RegexURLFilter.from_lines(["-\\.gif$", "-(?i)\\.png$", "+."])
    assert not url_filter.accepts("http://a.com/x.gif")
    assert url_filter.accepts("http://a.com/x.GIF")
    assert not url_filter.accepts("http://a.com/x.PNG")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("*.html", "a rule must start with '+' or '-' (or '#' for a comment), got '*.html'"),
        ("http://example.com/", "a rule must start with '+' or '-'"),
        ("+", "'+' without a regular expression"),
        ("-   ", "'-' without a regular expression"),
        ("+[a-z", "invalid regular expression '[a-z'"),
        ("-(unclosed", "invalid regular expression '(unclosed'"),
        ("+\\p{Alpha}", "invalid regular expression"),
    ],
)
def test_malformed_lines_name_source_and_line(line: str, message: str) -> None:
    lines = ["# header", "+^https://", "", line, "+."]
    with pytest.raises(ValueError) as info:
        RegexURLFilter.from_lines(lines, source="conf/regex-urlfilter.txt")
    assert str(info.value).startswith("conf/regex-urlfilter.txt:4: ")
    assert message in str(info.value)


def test_bad_regex_in_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.txt"
    path.write_text("# rules\n-\\.gif$\n\n+(?P<x\n+.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"rules\.txt:4: invalid regular expression") as info:
        RegexURLFilter.from_file(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value.__cause__, re.error)


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.txt"
    path.write_text("-(?i)\\.pdf$\n+^https?://\n", encoding="utf-8")
    url_filter = RegexURLFilter.from_file(path)
    assert url_filter.accepts("https://example.com/")
    assert not url_filter.accepts("https://example.com/a.PDF")
    assert load_url_filter(path).rules == url_filter.rules
    assert load_url_filter(str(path)).rules == url_filter.rules


def test_accept_all() -> None:
    assert load_url_filter(None) is ACCEPT_ALL
    for url in ("", "mailto:x@example.com", "http://example.com/a.gif"):
        assert ACCEPT_ALL.accepts(url)


# Rules made of literal tokens, so that whether a rule matches a URL is plain substring search.
TOKENS = ["a", "b", "x", "/", ".", "png", "http"]
RULES = st.lists(st.tuples(st.booleans(), st.sampled_from(TOKENS)), max_size=8)
URLS = st.lists(st.sampled_from(TOKENS), max_size=10).map("".join)


def _lines(rules: list[tuple[bool, str]]) -> list[str]:
    return [("+" if accept else "-") + re.escape(token) for accept, token in rules]


@given(RULES, URLS)
def test_outcome_is_the_first_match(rules: list[tuple[bool, str]], url: str) -> None:
    expected = next((accept for accept, token in rules if token in url), False)
    assert RegexURLFilter.from_lines(_lines(rules)).accepts(url) is expected


@given(RULES, RULES, URLS.filter(bool), st.booleans())
def test_a_matching_rule_hides_every_later_rule(
    before: list[tuple[bool, str]], after: list[tuple[bool, str]], url: str, accept: bool
) -> None:
    # Prepending rules that do not match changes nothing; the first matching rule decides no
    # matter what follows it.
    before = [rule for rule in before if rule[1] not in url]
    lines = [*_lines(before), ("+" if accept else "-") + re.escape(url), *_lines(after)]
    assert RegexURLFilter.from_lines(lines).accepts(url) is accept


# --- nutchy's default rules -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_filter() -> RegexURLFilter:
    return RegexURLFilter.from_file(DEFAULT_RULES_PATH)


def test_default_rules_ship_with_the_package() -> None:
    assert DEFAULT_RULES_PATH.name == "regex-urlfilter.txt"
    assert DEFAULT_RULES_PATH.parent.name == "core"
    assert DEFAULT_RULES_PATH.is_file()


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://www.example.com/news/2024/05/story.html",
        "https://example.com/search?q=nutch&page=2",
        "https://example.com/item?id=42&ref=home",
        "https://example.com/report.pdf",
        "https://example.com/data.json",
        "https://example.com/feed.xml",
        "https://example.com/jsp/page.jsp",
        "https://example.com/download?file=archive.zip",
        "https://example.com/a/b/a/c",
        "https://example.com/docs/docs/index.html",
        "https://example.com/ab/a/b/a",
        "https://example.com/x?path=/a/a/a/a",
        "https://example.com/a//b//c//d",
        "HTTPS://EXAMPLE.COM/",
    ],
)
def test_default_rules_accept(default_filter: RegexURLFilter, url: str) -> None:
    assert default_filter.accepts(url)


@pytest.mark.parametrize(
    "url",
    [
        # Schemes other than http(s).
        "file:///etc/passwd",
        "ftp://ftp.example.com/pub/",
        "mailto:someone@example.com",
        "javascript:void(0)",
        "data:text/html,<h1>hi</h1>",
        "tel:+15555550100",
        "httpx://example.com/",
        # Binary, media and archive suffixes, any case, with or without a query.
        "https://example.com/logo.png",
        "https://example.com/photo.JPG",
        "https://example.com/photo.jpeg?w=200",
        "https://example.com/anim.gif",
        "https://example.com/favicon.ico",
        "https://example.com/talk.mp4",
        "https://example.com/song.MP3",
        "https://example.com/dist/tool-1.0.tar.gz",
        "https://example.com/setup.exe",
        "https://example.com/fonts/a.woff2",
        "https://example.com/static/site.css?v=3",
        "https://example.com/static/app.js",
        # A path segment repeated three times or more: a crawler trap.
        "https://example.com/a/a/a",
        "https://example.com/a/a/a/",
        "https://example.com/cal/2024/cal/2025/cal/2026",
        "https://example.com/x/y/x/y/x/y/index.html",
        "https://example.com/a/a/a?x=1",
    ],
)
def test_default_rules_reject(default_filter: RegexURLFilter, url: str) -> None:
    assert not default_filter.accepts(url)


def test_default_rules_trap_rule_stays_fast_on_long_paths(default_filter: RegexURLFilter) -> None:
    # The trap rule backtracks over pairs of segments; a 2,000-character path of distinct
    # segments must still be decided quickly.
    url = "https://example.com/" + "/".join(str(i) for i in range(500))
    started = time.perf_counter()
    assert default_filter.accepts(url)
    assert time.perf_counter() - started < 2.0


#: The trap rule as first written, without possessive quantifiers: the default rule must give
#: the same answer on every URL.
_PLAIN_TRAP_RULE = re.compile(
    r"(?i)^[a-z][a-z0-9+.\-]*://[^/?#]*(?:/[^/?#]*)*?(/[^/?#]+)(?:/[^/?#]*)*?\1(?:/[^/?#]*)*?\1"
    r"(?:[/?#]|$)"
)


def _trap_rule(default_filter: RegexURLFilter) -> re.Pattern[str]:
    (expression,) = [e for _, e in default_filter.rules if r"\1" in e]
    return re.compile(expression)


@given(
    st.lists(
        st.sampled_from(["/", "a", "A", "ab", "b", "?", "#", ".", "é", "É", "\n"]), max_size=14
    ),
    st.sampled_from(["http://h", "https://ex.com", "HTTP://H", "ftp://x", "http:/"]),
)
@settings(max_examples=1000)
def test_default_trap_rule_matches_as_the_plain_rule(
    default_filter: RegexURLFilter, parts: list[str], start: str
) -> None:
    url = start + "".join(parts)
    trap = _trap_rule(default_filter)
    assert (trap.search(url) is None) == (_PLAIN_TRAP_RULE.search(url) is None)


#: The suffix rule as first written: any dot of the path followed by a suffix and then the
#: query, the fragment or the end. The default rule jumps to the path's last dot without
#: backtracking (a suffix holds no dot, so no other dot can match) and must agree on every URL.
_PLAIN_SUFFIX_RULE = r"(?i)^[^?#]*\.(?:"


def _suffix_rules(default_filter: RegexURLFilter) -> tuple[re.Pattern[str], re.Pattern[str]]:
    (expression,) = [e for _, e in default_filter.rules if "|gif|" in e or "(?:gif|" in e]
    suffixes = expression[expression.index("(?:gif|") + 3 :]
    return re.compile(expression), re.compile(_PLAIN_SUFFIX_RULE + suffixes)


@given(
    st.lists(
        st.sampled_from(["/", "a", ".", "gif", "GIF", "js", "jpeg", "?", "#", "\n", "é"]),
        max_size=14,
    ),
    st.sampled_from(["http://h", "https://ex.com/x.png", "HTTP://H"]),
)
@settings(max_examples=1000)
def test_default_suffix_rule_matches_as_the_plain_rule(
    default_filter: RegexURLFilter, parts: list[str], start: str
) -> None:
    url = start + "".join(parts)
    rule, plain = _suffix_rules(default_filter)
    assert (rule.search(url) is None) == (plain.search(url) is None)


@pytest.mark.parametrize(
    ("url", "rejected"),
    [
        ("http://h/a.gif", True),
        ("http://h/a.b.JPG?x=1", True),
        ("http://h/a.gif.html", False),
        ("http://h/a.html?f=b.gif", False),  # the query is not looked at
        ("http://h.js/page", False),  # the suffix must end the path
        ("http://h/v1.2/style.css#top", True),
    ],
)
def test_default_suffix_rule_examples(
    default_filter: RegexURLFilter, url: str, rejected: bool
) -> None:
    rule, plain = _suffix_rules(default_filter)
    assert (rule.search(url) is not None) is rejected
    assert (plain.search(url) is not None) is rejected


@pytest.mark.parametrize(
    ("url", "trapped"),
    [
        ("http://h/a/b/a/c/a", True),
        ("http://h/a/A/a", True),  # case does not count, in the segments too
        ("http://h/ab/a/a/a?x", True),
        ("http://h/ab/abc/ab/abd/ab", True),
        ("http://h/ab/abc/ab/abd/abe", False),  # "ab" is a prefix of segments, not one of them
        ("http://h/a/a?/a", False),  # the query is not looked at
        ("http://h/a//a//b", False),
    ],
)
def test_default_trap_rule_examples(
    default_filter: RegexURLFilter, url: str, trapped: bool
) -> None:
    assert (_trap_rule(default_filter).search(url) is not None) is trapped
    assert (_PLAIN_TRAP_RULE.search(url) is not None) is trapped
