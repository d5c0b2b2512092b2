"""The web table over both stores: pages in, pages out, and writes that cannot lose entries."""

from __future__ import annotations

import pytest

from nutchy.core.status import CrawlStatus, ParseStatus, ProtocolStatus
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.exceptions import CellDecodeError, UnsafeWrite
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=2, write_limit=3)


def full_page(url_key: str = "com.example.www:http/a") -> WebPage:
    return WebPage(
        url_key,
        base_url="http://www.example.com/a",
        status=CrawlStatus.FETCHED,
        prev_fetch_time=1,
        fetch_time=1500000000000,
        fetch_interval=2592000,
        retries_since_fetch=1,
        repr_url="http://www.example.com/",
        content=b"<html>\x00\xff</html>",
        content_type="text/html",
        protocol_status=ProtocolStatus(12, ("http://www.example.com/b",)),
        modified_time=3,
        prev_modified_time=2,
        batch_id="1700000000-1",
        title="Tïtle",
        text="text",
        parse_status=ParseStatus(1, 0, ()),
        signature=bytes(range(16)),
        prev_signature=bytes(16),
        score=0.25,
        stm_priority=0.5,
        headers={"Content-Type": "text/html", "ETag": '"x"'},
        outlinks={"http://www.example.com/b": "b", "http://other.example/": ""},
        inlinks={"http://www.example.com/": "home"},
        metadata={"_csh_": b"\x00\x00\x00\x00", "custom": b"v"},
        markers={"_ftcmrk_": "1700000000-1", "dist": "1"},
        sitemaps={"http://www.example.com/sitemap.xml": ""},
    )


def test_a_page_round_trips(table):
    page = full_page()
    table.put(page, ALL_FIELDS)
    assert table.get("http://www.example.com/a") == page
    assert table.get_key("com.example.www:http/a", ["status", "markers"]).markers == page.markers
    assert table.get("http://www.example.com/missing") is None


def test_reading_some_fields_reads_only_them(table):
    table.put(full_page(), ALL_FIELDS)
    page = table.get("http://www.example.com/a", ["status", "inlinks"])
    assert page.status == CrawlStatus.FETCHED
    assert page.inlinks == {"http://www.example.com/": "home"}
    assert page.content is None and page.outlinks == {} and page.score == 0.0
    assert page.loaded == {"status", "inlinks"}


def test_a_job_that_did_not_read_metadata_cannot_wipe_it(table):
    """NUTCH-2222: a re-fetch wiped every metadata entry but two."""
    table.put(full_page(), ALL_FIELDS)
    fetched = table.get("http://www.example.com/a", ["status", "markers"])
    fetched.metadata["_rs_"] = b"\x00\x00\x00\x07"
    with pytest.raises(UnsafeWrite):
        table.put(fetched, ["status", "metadata"])
    table.update(fetched.key, {"status": 2}, entries={"metadata": {"_rs_": b"\x00\x00\x00\x07"}})
    assert table.get("http://www.example.com/a").metadata == {
        "_csh_": b"\x00\x00\x00\x00",
        "custom": b"v",
        "_rs_": b"\x00\x00\x00\x07",
    }
    # a job that read the map may replace it whole
    page = table.get("http://www.example.com/a", ["metadata"])
    del page.metadata["custom"]
    table.put(page, ["metadata"])
    assert set(table.get("http://www.example.com/a").metadata) == {"_csh_", "_rs_"}


def test_scan_pages_by_marker_and_due(table):
    for i in range(5):
        page = WebPage(f"com.example:http/{i}", fetch_time=i * 10)
        if i % 2:
            page.markers["_gnmrk_"] = "b1"
        table.put(page, ["fetch_time", "markers"])
    assert [p.key for p in table.scan(marker=("_gnmrk_", "b1"))] == [
        "com.example:http/1",
        "com.example:http/3",
    ]
    assert sorted(p.fetch_time for p in table.scan(["fetch_time"], due_before=25)) == [0, 10, 20]
    assert [p.key for p in table.scan(prefix="com.example:http/3")] == ["com.example:http/3"]


def test_a_bad_cell_stops_a_scan_or_is_skipped_and_counted(table):
    table.put(WebPage("com.example:http/1", status=2), ["status"])
    table.store.write([RowUpdate(b"com.example:http/2", {b"f:st": b"\x02"})])
    table.put(WebPage("com.example:http/3", status=3), ["status"])
    with pytest.raises(CellDecodeError, match=r"com.example:http/2.*'f:st'.*int \(4 bytes"):
        list(table.scan())
    pages = list(table.scan(skip_errors=True))
    assert [p.status for p in pages] == [2, 3]
    assert table.skipped == 1


def test_the_writer_flushes_in_batches_and_on_exit(table):
    with table.writer() as writer:
        for i in range(7):
            writer.put(WebPage(f"com.example:http/{i}", status=1), ["status"])
        assert writer.written == 6  # two batches of write_limit=3 went out already
        assert len(list(table.scan())) == 6
    assert writer.written == 7
    assert len(list(table.scan())) == 7


def test_limits_are_validated(store):
    with pytest.raises(ValueError, match="'read_limit' must be >= 1"):
        WebTable(store, read_limit=0)
    with pytest.raises(ValueError, match="'write_limit' must be >= 1"):
        WebTable(store, write_limit=0)
