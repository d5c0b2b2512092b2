"""The index job on both stores: which rows are indexed, which deleted, through the default
filters to the JSON lines and CSV writers; and the filters and writers on their own."""

from __future__ import annotations

import csv
import json

import pytest
from scrapy.settings import Settings

import nutchy.default_settings
from nutchy.core.status import CrawlStatus, Mark, ParseStatus, ParseStatusMajor, ParseStatusMinor
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError, IndexWriterError
from nutchy.index import search
from nutchy.index.chain import load_filters, load_writers
from nutchy.index.document import Document
from nutchy.index.embedded import EmbeddedIndexWriter
from nutchy.index.filters import BasicIndexingFilter, MetadataIndexingFilter, clean_text
from nutchy.index.writers import CSVIndexWriter, JSONLinesIndexWriter
from nutchy.jobs.index import index
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
OK = ParseStatus(ParseStatusMajor.SUCCESS, ParseStatusMinor.SUCCESS_OK)
FIELDS = [
    "status",
    "prev_fetch_time",
    "fetch_time",
    "title",
    "text",
    "content",
    "content_type",
    "parse_status",
    "signature",
    "score",
    "inlinks",
    "metadata",
    "markers",
]


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=2, write_limit=2)


def settings(tmp_path, **extra):
    values = {k: v for k, v in vars(nutchy.default_settings).items() if k.isupper()}
    values.update(
        NUTCH_CRAWL_DIR=str(tmp_path),
        NUTCH_INDEX_WRITERS={
            "nutchy.index.writers.JSONLinesIndexWriter": 100,
            "nutchy.index.writers.CSVIndexWriter": 200,
        },
    )
    values.update(extra)
    return Settings(values)


def put(table, url, *, batch="b1", status=CrawlStatus.FETCHED, parse=OK, **fields):
    page = WebPage(
        reverse_url(url),
        status=status,
        prev_fetch_time=NOW,
        fetch_time=NOW + 1000,
        title=fields.pop("title", f"Title of {url}"),
        text=fields.pop("text", f"text of {url}"),
        content=fields.pop("content", b"<html></html>"),
        content_type="text/html; charset=utf-8",
        parse_status=parse,
        signature=b"\x01\x02",
        score=4.0,
        markers={Mark.UPDATEDB: batch, **fields.pop("markers", {})},
        **fields,
    )
    table.put(page, FIELDS)


def run(table, tmp_path, batch=None, rebuild=False, **extra):
    s = settings(tmp_path, **extra)
    return index(table, batch, filters=load_filters(s), writers=load_writers(s), rebuild=rebuild)


def read_csv(path):
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def jsonl(tmp_path):
    return [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]


def test_rows_indexed_deleted_and_skipped(table, tmp_path):
    put(table, "http://a.example/", inlinks={"http://b.example/": "the anchor"})
    put(
        table,
        "http://a.example/noindex",
        title="",
        text="",
        content=b'<html><head><meta name="robots" content="noindex"></head></html>',
    )
    put(
        table,
        "http://a.example/refresh",
        parse=ParseStatus(ParseStatusMajor.SUCCESS, ParseStatusMinor.SUCCESS_REDIRECT),
    )
    put(table, "http://a.example/failed", parse=ParseStatus(ParseStatusMajor.FAILED))
    put(table, "http://a.example/retry", status=CrawlStatus.RETRY)
    put(table, "http://a.example/gone", status=CrawlStatus.GONE, markers={Mark.INDEX: "b0"})
    put(table, "http://a.example/gone-never-indexed", status=CrawlStatus.GONE)

    counts = run(table, tmp_path)

    assert (counts.rows, counts.indexed, counts.filtered, counts.skipped) == (7, 1, 1, 2)
    assert counts.deleted == 1  # the gone page with an index mark; the others were never indexed
    lines = jsonl(tmp_path)
    assert [(line["action"], line["id"]) for line in lines] == [
        ("write", "http://a.example/"),
        ("delete", "http://a.example/gone"),
    ]
    doc = lines[0]
    assert doc["host"] == "a.example"
    assert doc["title"] == "Title of http://a.example/"
    assert doc["content"] == "text of http://a.example/"
    assert doc["anchor"] == ["the anchor"]
    assert doc["type"] == "text/html"
    assert doc["tstamp"] == "2023-11-14T22:13:20.000Z"
    assert doc["digest"] == "0102"
    assert doc["boost"] == 2.0
    rows = read_csv(tmp_path / "index.csv")
    assert rows[0][:3] == ["action", "id", "url"]
    assert [r[:2] for r in rows[1:]] == [
        ["write", "http://a.example/"],
        ["delete", "http://a.example/gone"],
    ]
    # The index mark: written on the page indexed, dropped from the page deleted.
    marks = {p.url: p.markers.get(Mark.INDEX) for p in table.scan(["markers"])}
    assert marks["http://a.example/"] == "b1"
    assert marks["http://a.example/gone"] is None

    # A second run deletes nothing again, and writes the same document again.
    again = run(table, tmp_path)
    assert (again.indexed, again.deleted) == (1, 0)


def test_a_batch_reads_its_rows_and_sweeps_indexed_pages_gone_since(table, tmp_path):
    put(table, "http://a.example/1", batch="b1")
    put(table, "http://a.example/2", batch="b1")
    run(table, tmp_path, "b1")
    put(table, "http://a.example/3", batch="b2")
    # Page 2 went away in batch b2: updatedb took its batch marks, it keeps its index mark.
    table.update(
        reverse_url("http://a.example/2"),
        {"status": CrawlStatus.GONE},
        entries={"markers": {Mark.UPDATEDB: None}},
    )

    counts = run(table, tmp_path, "b2")

    assert (counts.rows, counts.indexed, counts.deleted) == (1, 1, 1)
    assert [(line["action"], line["id"]) for line in jsonl(tmp_path)][2:] == [
        ("write", "http://a.example/3"),
        ("delete", "http://a.example/2"),
    ]


def test_rebuild_starts_the_files_again(table, tmp_path):
    put(table, "http://a.example/1")
    run(table, tmp_path)
    run(table, tmp_path)
    assert len(jsonl(tmp_path)) == 2
    run(table, tmp_path, rebuild=True)
    assert len(jsonl(tmp_path)) == 1
    assert len((tmp_path / "index.csv").read_text().splitlines()) == 2  # the header, one row


def test_bad_text_is_cut_and_cleaned(table, tmp_path):
    put(table, "http://a.example/big", text="word " * 200_000, title="T" * 500)
    counts = run(table, tmp_path, NUTCH_INDEXER_MAX_CONTENT_LENGTH="1000")
    assert counts.indexed == 1
    doc = jsonl(tmp_path)[0]
    assert len(doc["content"]) == 1000
    assert len(doc["title"]) == 100
    assert clean_text("a\udcffb") == "a\ufffdb"


def test_metadata_keys_become_fields(table, tmp_path):
    put(table, "http://a.example/", metadata={"lang": b"fr", "bad": b"\xff"})
    run(table, tmp_path, NUTCH_INDEX_METADATA=["lang", "bad", "absent"])
    doc = jsonl(tmp_path)[0]
    assert (doc["lang"], doc["bad"]) == ("fr", "\ufffd")
    assert "absent" not in doc
    with pytest.raises(ConfigError, match="title"):
        MetadataIndexingFilter(["title"])


def test_components_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="NUTCH_INDEX_WRITERS names no index writer"):
        load_writers(settings(tmp_path, NUTCH_INDEX_WRITERS={}))
    with pytest.raises(ConfigError, match=r"cannot load .nutchy\.nothing\.Here."):
        load_writers(settings(tmp_path, NUTCH_INDEX_WRITERS={"nutchy.nothing.Here": 1}))
    with pytest.raises(ConfigError, match="order of"):
        load_filters(
            settings(
                tmp_path, NUTCH_INDEXING_FILTERS={"nutchy.index.filters.BasicIndexingFilter": "x"}
            )
        )
    chain = load_filters(
        settings(
            tmp_path,
            NUTCH_INDEXING_FILTERS={
                "nutchy.index.filters.BasicIndexingFilter": 1,
                "nutchy.index.filters.AnchorIndexingFilter": None,
            },
        )
    )
    assert [type(f) for f in chain.filters] == [BasicIndexingFilter]
    assert "inlinks" not in chain.fields


def test_file_writers_name_their_file_when_they_fail(tmp_path):
    (tmp_path / "taken").write_text("")
    writer = JSONLinesIndexWriter(tmp_path / "taken" / "index.jsonl")
    with pytest.raises(IndexWriterError, match=r"taken/index\.jsonl"):
        writer.open()
    writer = CSVIndexWriter(tmp_path / "index.csv", ["lang"])
    writer.open()
    writer.write([Document("http://a/", anchor=["x", "y"], metadata={"lang": "en"})])
    writer.delete(["http://b/"])
    writer.commit()
    writer.close()
    rows = read_csv(tmp_path / "index.csv")
    assert rows[0][-1] == "lang"
    assert rows[1][rows[0].index("anchor")] == "x|y"
    assert rows[1][-1] == "en"
    assert rows[2][:2] == ["delete", "http://b/"]


def test_a_50_mb_text_is_cut_and_a_row_that_does_not_decode_is_left_out(
    embedded_store_factory, tmp_path, caplog
):
    store = embedded_store_factory()
    store.create()
    table = WebTable(store)
    put(table, "http://a.example/huge", text="lorem ipsum " * 4_400_000)  # 52.8 MB
    put(table, "http://a.example/bad")
    put(table, "http://a.example/ok", text="a NUL \x00 and a \u202e bidi override")
    # Text that is not UTF-8, as another writer of the table may leave it.
    store.write([RowUpdate(reverse_url("http://a.example/bad").encode(), {b"p:c": b"\xff\xfe"})])
    writers = {
        "nutchy.index.embedded.EmbeddedIndexWriter": 100,
        "nutchy.index.writers.JSONLinesIndexWriter": 200,
    }

    counts = run(table, tmp_path, NUTCH_INDEX_WRITERS=writers)

    assert (counts.rows, counts.indexed, counts.unreadable) == (2, 2, 1)
    assert "Skipped row b'example.a:http/bad'" in caplog.text
    docs = {doc["id"]: doc for doc in jsonl(tmp_path)}
    assert len(docs["http://a.example/huge"]["content"]) == 100_000  # the default limit
    assert docs["http://a.example/ok"]["content"] == "a NUL \x00 and a \u202e bidi override"
    hits = search(tmp_path, "ipsum")
    assert [hit.url for hit in hits] == ["http://a.example/huge"]
    assert search(tmp_path, "bidi")[0].url == "http://a.example/ok"


def test_text_that_is_not_unicode_is_written_with_replacement_characters(tmp_path):
    # A page built in memory (the table itself cannot hold lone surrogates).
    page = WebPage(
        reverse_url("http://a.example/"),
        title="caf\udce9",
        text="broken \udcff text",
        inlinks={"http://b.example/": "anchor \ud800"},
    )
    chain = load_filters(settings(tmp_path))
    doc = chain.document(page)
    assert (doc.title, doc.content, doc.anchor) == (
        "caf\ufffd",
        "broken \ufffd text",
        ["anchor \ufffd"],
    )
    writer = EmbeddedIndexWriter(tmp_path / "index")
    writer.open()
    writer.write([doc])
    writer.commit()
    writer.close()
    assert [hit.title for hit in search(tmp_path, "broken")] == ["caf\ufffd"]
