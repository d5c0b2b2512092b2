"""Tests for nutchy.core.inject: Nutch's seed line format and the inject merge rule."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.inject import (
    MAX_LINE_BYTES,
    InjectMode,
    InjectOutcome,
    MalformedSeed,
    Seed,
    SeedLine,
    decode_seed_line,
    make_seed,
    parse_seed_line,
    seed_change,
)

DEFAULTS = {"now": 1_700_000_000_000, "fetch_interval": 2592000, "score": 1.0}


def test_nutch_example_line():
    line = parse_seed_line(
        "http://www.nutch.org/\tnutch.score=10\tnutch.fetchInterval=2592000\tuserType=open_source"
    )
    assert line == SeedLine("http://www.nutch.org/", 10.0, 2592000, {"userType": "open_source"})


@pytest.mark.parametrize("text", ["", "   ", "\t", "# a comment", "  #\thttp://x.com/", "\r"])
def test_blank_and_comment_lines_are_skipped(text):
    assert parse_seed_line(text) is None


def test_line_is_trimmed_and_empty_fields_are_ignored():
    line = parse_seed_line("  http://a.com/\t\t lang=en \t\n")
    assert line == SeedLine("http://a.com/", None, None, {"lang": "en"})


def test_a_value_may_contain_equals_signs_and_be_empty():
    line = parse_seed_line("http://a.com/\tq=a=b\tempty=")
    assert line is not None
    assert line.metadata == {"q": "a=b", "empty": ""}


def test_score_minus_one_means_not_given():
    line = parse_seed_line("http://a.com/\tnutch.score=-1")
    assert line is not None
    assert line.score is None


def test_negative_and_zero_scores_are_kept():
    assert parse_seed_line("http://a.com/\tnutch.score=-2.5").score == -2.5  # type: ignore[union-attr]
    assert parse_seed_line("http://a.com/\tnutch.score=0").score == 0.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("http://a.com/\tnutch.score=high", "is not a number"),
        ("http://a.com/\tnutch.score=nan", "finite 32-bit float"),
        ("http://a.com/\tnutch.score=inf", "finite 32-bit float"),
        ("http://a.com/\tnutch.score=1e39", "finite 32-bit float"),
        ("http://a.com/\tnutch.fetchInterval=abc", "whole number of seconds"),
        ("http://a.com/\tnutch.fetchInterval=0", "whole number of seconds"),
        ("http://a.com/\tnutch.fetchInterval=-5", "whole number of seconds"),
        ("http://a.com/\tnutch.fetchInterval=1.5", "whole number of seconds"),
        ("http://a.com/\tnutch.fetchInterval=2147483648", "whole number of seconds"),
        ("http://a.com/\tuserType", "is not name=value"),
        ("http://a.com/\t=value", "is not name=value"),
        ("http://a.com/\tfoo:bar", "is not name=value"),
        ("http://a.com/\t_csh_=9", "reserved"),
        ("http://a.com/\t_ngt_=9", "reserved"),
        ("http://a.com/\t-sitemap", "sitemap seeds"),
        ("http://a.com/\tsitemaps: a.xml b.xml", "sitemap seeds"),
        ("http://a.com/ nutch.score=2", "contains a space"),
        ("http://a.com/a b", "contains a space"),
        ("\tnutch.score=2", None),  # trimmed away: the URL is nutch.score=2, malformed later
    ],
)
def test_malformed_lines(line, reason):
    if reason is None:
        with pytest.raises(MalformedSeed, match="no scheme"):
            make_seed(parse_seed_line(line))  # type: ignore[arg-type]
        return
    with pytest.raises(MalformedSeed, match=reason):
        parse_seed_line(line)


def test_single_underscore_names_are_allowed():
    line = parse_seed_line("http://a.com/\t_=x\t_lead=y\ttrail_=z")
    assert line is not None
    assert line.metadata == {"_": "x", "_lead": "y", "trail_": "z"}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"www.example.com", "no scheme"),
        (b"mailto:a@b.com", "unsupported scheme"),
        (b"http://a.com/\x01x", "control character"),
        (b"http://a.com/\x7f", "control character"),
        (b"http://a..com/", "empty label"),
        (b"http://a.com:99999/", "invalid port"),
        (b"http:///path", "no host"),
    ],
)
def test_urls_that_do_not_normalize_are_malformed(raw, reason):
    line = parse_seed_line(decode_seed_line(raw))
    assert line is not None
    with pytest.raises(MalformedSeed, match=reason):
        make_seed(line)


def test_decode_refuses_non_utf8_and_long_lines():
    with pytest.raises(MalformedSeed, match=r"not UTF-8: byte 0xff at offset 13"):
        decode_seed_line(b"http://a.com/\xff\n")
    longest = b"http://a.com/" + b"a" * (MAX_LINE_BYTES - 13)
    assert len(decode_seed_line(longest + b"\r\n")) == MAX_LINE_BYTES
    with pytest.raises(MalformedSeed, match="longer than 65536 bytes"):
        decode_seed_line(longest + b"a\n")


def test_make_seed_normalizes_and_keys():
    seed = make_seed(SeedLine("HTTP://WWW.Example.com:80/a/./b#frag", 2.0, 60, {"k": "v"}))
    assert seed == Seed(
        "http://www.example.com/a/b", "com.example.www:http/a/b", 2.0, 60, (("k", "v"),)
    )


@given(st.binary(max_size=300))
def test_any_bytes_either_make_a_seed_or_are_malformed(raw):
    try:
        line = parse_seed_line(decode_seed_line(raw))
        if line is not None:
            seed = make_seed(line)
            assert seed.key
            assert " " not in seed.url
    except MalformedSeed as exc:
        assert str(exc)


@given(st.text(max_size=200))
def test_any_text_either_parses_or_is_malformed(text):
    try:
        parse_seed_line(text)
    except MalformedSeed as exc:
        assert str(exc)


# --- the merge rule --------------------------------------------------------------------------

PLAIN = Seed("http://a.com/", "com.a:http/")
RICH = Seed("http://a.com/", "com.a:http/", score=3.0, fetch_interval=60, metadata=(("k", "v"),))


def cash(score: float) -> bytes:
    return struct.pack(">f", score)


def test_new_row_gets_what_nutch_writes():
    change = seed_change(PLAIN, exists=False, mode=InjectMode.KEEP, **DEFAULTS)
    assert change.outcome is InjectOutcome.INJECTED
    assert change.fields == {"fetch_time": DEFAULTS["now"], "fetch_interval": 2592000, "score": 1.0}
    assert change.entries == {
        "metadata": {"_csh_": cash(1.0)},
        "markers": {"dist": "0", "_injmrk_": "y"},
    }
    assert "status" not in change.fields  # Nutch leaves the status unset (0)


def test_new_row_uses_the_seed_score_interval_and_metadata():
    change = seed_change(RICH, exists=False, mode=InjectMode.UPDATE, **DEFAULTS)
    assert change.outcome is InjectOutcome.INJECTED
    assert change.fields["score"] == 3.0
    assert change.fields["fetch_interval"] == 60
    assert change.entries["metadata"] == {"k": b"v", "_csh_": cash(3.0)}


def test_known_row_is_kept_by_default():
    change = seed_change(RICH, exists=True, mode=InjectMode.KEEP, **DEFAULTS)
    assert change.outcome is InjectOutcome.KNOWN
    assert change.fields == {}
    assert change.entries == {}


def test_overwrite_resets_schedule_and_releases_batch_marks_only():
    change = seed_change(RICH, exists=True, mode=InjectMode.OVERWRITE, **DEFAULTS)
    assert change.outcome is InjectOutcome.OVERWRITTEN
    assert change.fields == {"fetch_time": DEFAULTS["now"], "fetch_interval": 60, "score": 3.0}
    assert change.entries["markers"] == {
        "dist": "0",
        "_injmrk_": "y",
        "_gnmrk_": None,
        "_ftcmrk_": None,
        "__prsmrk__": None,
    }
    assert change.entries["metadata"] == {
        "k": b"v",
        "_csh_": cash(3.0),
        "_ngt_": None,
        "_npt_": None,
    }


def test_update_applies_only_what_the_line_gives():
    change = seed_change(
        Seed("http://a.com/", "com.a:http/", score=5.0),
        exists=True,
        mode=InjectMode.UPDATE,
        **DEFAULTS,
    )
    assert change.outcome is InjectOutcome.UPDATED
    assert change.fields == {"score": 5.0}
    assert change.entries == {}
    change = seed_change(RICH, exists=True, mode=InjectMode.UPDATE, **DEFAULTS)
    assert change.fields == {"score": 3.0, "fetch_interval": 60}
    assert change.entries == {"metadata": {"k": b"v"}}


def test_update_of_a_plain_line_changes_nothing():
    change = seed_change(PLAIN, exists=True, mode=InjectMode.UPDATE, **DEFAULTS)
    assert change.outcome is InjectOutcome.KNOWN
    assert (change.fields, change.entries) == ({}, {})
