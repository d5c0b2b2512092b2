"""The readdb job on both stores: statistics, one row, dumps and the best-scored URLs."""

from __future__ import annotations

import csv
import io
import json
import struct

import pytest

from nutchy.core.status import CrawlStatus, ParseStatus, ProtocolStatus
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.jobs.readdb import (
    ReadDbError,
    dump,
    page_lines,
    parse_status_filter,
    read_page,
    table_stats,
    top_scored,
)
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
DAY = 86_400_000


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=3, write_limit=4)


def add(table, url: str, **fields) -> WebPage:
    fields.setdefault("fetch_time", NOW)
    fields.setdefault("fetch_interval", 2592000)
    page = WebPage(reverse_url(url), **fields)
    table.put(page, ALL_FIELDS)
    return page


@pytest.fixture
def filled(table):
    add(table, "http://a.com/1", status=CrawlStatus.FETCHED, score=2.0, fetch_time=NOW + DAY)
    add(table, "http://a.com/2", status=CrawlStatus.FETCHED, score=0.5, fetch_interval=60)
    add(table, "http://a.com/3", score=1.0, markers={"_gnmrk_": "b1"})
    add(table, "http://www.b.org/", score=1.0, markers={"_gnmrk_": "b1"})
    add(table, "http://c.net/x", status=CrawlStatus.GONE, score=0.0, fetch_interval=100)
    return table


def test_stats(filled):
    stats = table_stats(filled, now=NOW)
    assert stats.rows == 5
    assert dict(stats.by_status) == {0: 2, 2: 2, 3: 1}
    assert (stats.score.low, stats.score.high, stats.score.mean) == (0.0, 2.0, 0.9)
    assert (stats.fetch_interval.low, stats.fetch_interval.high) == (60, 2592000)
    assert stats.due == 4
    assert dict(stats.batches) == {"b1": 2}
    assert stats.hosts.most_common(1) == [("a.com", 3)]
    text = "\n".join(stats.lines(top_hosts=2))
    assert "TOTAL urls:\t5" in text
    assert "status 2 (status_fetched):\t2" in text
    assert "status 0 (status_injected):\t2" in text
    assert "generated, batch b1:\t2" in text
    assert "hosts:\t3\n  a.com:\t3\n  c.net:\t1" in text  # ties by name
    assert "max score:\t2" in text


def test_stats_of_an_empty_table(table):
    stats = table_stats(table, now=NOW)
    assert stats.lines() == ["TOTAL urls:\t0"]


def test_read_page_normalizes_and_shows_every_field(table):
    page = add(
        table,
        "http://a.com/p",
        status=CrawlStatus.FETCHED,
        score=0.5,
        content=b"\x00\x01body",
        protocol_status=ProtocolStatus(1),
        parse_status=ParseStatus(1, 0),
        signature=bytes(range(16)),
        headers={"ETag": '"x"'},
        metadata={"_csh_": struct.pack(">f", 0.5), "raw": b"\xff", "lang": b"en"},
        markers={"dist": "1"},
    )
    found = read_page(table, "HTTP://A.COM:80/p#top")
    assert found == page
    assert read_page(table, "http://a.com/missing") is None
    with pytest.raises(ReadDbError, match="cannot look up 'noscheme': no scheme"):
        read_page(table, "noscheme")
    lines = page_lines(found)
    assert lines[:2] == ["url:\thttp://a.com/p", "key:\tcom.a:http/p"]
    assert "status:\t2 (status_fetched)" in lines
    assert "fetch_time:\t1700000000000 (2023-11-14T22:13:20Z)" in lines
    assert "content:\t6 bytes" in lines
    assert "signature:\t000102030405060708090a0b0c0d0e0f" in lines
    assert "\t_csh_:\t0.5" in lines
    assert '\traw:\t{"base64": "/w=="}' in lines
    assert 'protocol_status:\t{"code": 1, "name": "SUCCESS", "args": []}' in lines
    assert {line.split(":")[0] for line in lines if not line.startswith("\t")} >= {
        name for name in ALL_FIELDS if name != "content"
    }


def test_dump_jsonl_with_filters(filled, tmp_path):
    path, count = dump(filled, tmp_path / "out", status=CrawlStatus.FETCHED)
    assert (path.name, count) == (f"{filled.name}.jsonl", 2)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["url"] for r in records] == ["http://a.com/1", "http://a.com/2"]
    assert records[0]["status_name"] == "status_fetched"
    assert "content_base64" not in records[0]
    assert "text" not in records[0]
    assert not list((tmp_path / "out").glob(".*partial"))
    _, count = dump(filled, tmp_path / "regex", regex=r"^http://a\.com/[12]$")
    assert count == 2


def test_dump_csv_with_content_and_text(table, tmp_path):
    add(table, "http://a.com/", content=b"hi", text="Hello", inlinks={"http://b.com/": "x"})
    path, count = dump(table, tmp_path, fmt="csv", content=True, text=True)
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert count == len(rows) == 1
    assert rows[0]["url"] == "http://a.com/"
    assert rows[0]["inlinks"] == "1"
    assert rows[0]["text"] == "Hello"
    assert rows[0]["content_base64"] == "aGk="


def test_dump_refuses_what_it_cannot_do(filled, tmp_path):
    dump(filled, tmp_path)
    with pytest.raises(ReadDbError, match="exists already"):
        dump(filled, tmp_path)
    with pytest.raises(ReadDbError, match="invalid regular expression"):
        dump(filled, tmp_path / "x", regex="(")
    with pytest.raises(ReadDbError, match="unknown dump format"):
        dump(filled, tmp_path / "y", fmt="xml")


def test_top_scored(filled):
    assert top_scored(filled, 3) == [
        (2.0, "http://a.com/1"),
        (1.0, "http://a.com/3"),
        (1.0, "http://www.b.org/"),
    ]
    assert len(top_scored(filled, 100)) == 5
    with pytest.raises(ValueError, match="'n' must be >= 1"):
        top_scored(filled, 0)


def test_undecodable_rows_are_skipped_and_counted(filled):
    filled.store.write([RowUpdate(b"com.a:http/1", {b"s:s": b"\x01"})])
    stats = table_stats(filled, now=NOW)
    assert (stats.rows, stats.undecodable) == (4, 1)


@pytest.mark.parametrize(
    ("text", "code"),
    [("fetched", 2), ("status_retry", 34), ("GONE", 3), ("0x26", 38), ("0", 0), ("injected", 0)],
)
def test_parse_status_filter(text, code):
    assert parse_status_filter(text) == code


def test_parse_status_filter_unknown():
    with pytest.raises(ReadDbError, match="unknown status 'done'"):
        parse_status_filter("done")
