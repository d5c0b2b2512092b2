"""NutchParsePipeline as a component: built from a crawler, other items pass through, pages are
parsed and written in batches, and each comes out as a PageItem."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import subprocess
import sys
import threading

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from nutchy._pageparse import item_parse_fields
from nutchy._parsework import ParseProcess
from nutchy.addon import NutchAddon
from nutchy.config import load_settings
from nutchy.core.fetch import FetchEntry, fetch_change, http_outcome
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError, StoreError
from nutchy.items import PageContentItem, PageItem
from nutchy.outcomes import OutcomeWriter
from nutchy.pipelines import (
    PARSE_CHUNK,
    FetchedPage,
    NutchDbUpdatePipeline,
    NutchParsePipeline,
)
from nutchy.spiders import NutchSpider
from nutchy.store import open_table
from nutchy.store.schema import RowUpdate, build_update
from nutchy.testing.hbase_server import HBaseThriftServer


def crawler(tmp_path, **settings):
    """A crawler whose parse pipeline parses in a thread (the parse process has its tests
    below), unless *settings* say otherwise."""
    values = {
        "ADDONS": {NutchAddon: 0},
        "NUTCH_CRAWL_DIR": str(tmp_path / "crawl"),
        "NUTCH_FETCHER_PARSE_PROCESS": False,
        # The tests read the items' title, text and outlinks, which nothing of these crawlers
        # would (test_items_carry_the_parse_fields_when_something_reads_them).
        "NUTCH_ITEM_PARSE_FIELDS": True,
        **settings,
    }
    return get_crawler(settings_dict=values)


def hbase_crawler(tmp_path, server, **settings):
    """A crawler whose table is on the HBase test server *server*."""
    return crawler(
        tmp_path,
        NUTCH_STORAGE_DATA_STORE_CLASS="nutchy.store.hbase.HBaseStore",
        NUTCH_HBASE_HOST="127.0.0.1",
        NUTCH_HBASE_PORT=server.port,
        NUTCH_HBASE_TIMEOUT=2000,
        **settings,
    )


def fetched(url: str, body: bytes) -> FetchedPage:
    return FetchedPage(
        key=reverse_url(url),
        url=url,
        batch_id="b1",
        base_url=url,
        content_type="text/html",
        headers={"Content-Type": "text/html; charset=utf-8"},
        content=body,
        fetch_time=1_700_000_000_123,
    )


def test_off_is_not_configured_and_not_a_warning(tmp_path):
    # Scrapy logs a warning for a NotConfigured with a message: turning a pipeline off by its
    # setting is not one.
    for pipeline, setting in (
        (NutchParsePipeline, "NUTCH_FETCHER_PARSE"),
        (NutchDbUpdatePipeline, "NUTCH_FETCHER_UPDATEDB"),
    ):
        with pytest.raises(NotConfigured) as raised:
            build_from_crawler(pipeline, crawler(tmp_path, **{setting: False}))
        assert not raised.value.args


def test_repr_leaves_content_out():
    assert "secret" not in repr(fetched("http://a.example/", b"secret"))


def test_parses_and_writes_a_batch(tmp_path):
    # The asynchronous path (buffering, the thread) runs in tests/test_fetch_parse.py.
    c = crawler(tmp_path, NUTCH_PARSER_SKIP_TRUNCATED=True)  # Nutch's default, not nutchy's
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    url = "http://a.example/"
    pipeline.table.put(WebPage(reverse_url(url), signature=b"old"), ["signature"])
    truncated = fetched("http://a.example/t", b"<title>T</title>")
    truncated.truncated = True
    items = pipeline._process(
        [fetched(url, b"<title>A</title><a href='/b'>b</a>"), truncated], write=True
    )
    pipeline.table.close()
    assert [type(item) for item in items] == [PageItem, PageItem]
    assert dict(items[0]) == {
        "url": url,
        "batch_id": "b1",
        "status": "status_fetched",
        "fetch_time": "2023-11-14T22:13:20.123Z",
        "http_status": 200,
        "content_type": "text/html",
        "truncated": False,
        "score": 0.0,
        "parse_status": "success_ok",
        "title": "A",
        "text": "b",
        "outlinks": [{"url": "http://a.example/b", "anchor": "b"}],
        "signature": hashlib.md5(b"<title>A</title><a href='/b'>b</a>").hexdigest(),
    }
    # Not parsed: the fetch's fields only; its row was not read (it has none in this table).
    assert dict(items[1]) == {
        "url": "http://a.example/t",
        "batch_id": "b1",
        "status": "status_fetched",
        "fetch_time": "2023-11-14T22:13:20.123Z",
        "http_status": 200,
        "content_type": "text/html",
        "truncated": True,
    }
    with open_table(c.settings) as table:
        page = table.get(url)
        assert (page.title, page.prev_signature) == ("A", b"old")
        assert page.outlinks == {"http://a.example/b": "b"}
        assert page.markers == {"__prsmrk__": "b1"}
        assert table.get("http://a.example/t") is None
    assert c.stats.get_value("nutch/parse/status/1/0") == 1
    assert c.stats.get_value("nutch/parse/skipped/truncated") == 1


def test_pages_waiting_are_parsed_in_chunks_and_a_flush_waits_for_the_last(tmp_path):
    pipeline = build_from_crawler(NutchParsePipeline, crawler(tmp_path))
    try:
        pages = [(fetched(f"http://a.example/{i}", b""), Deferred()) for i in range(70)]
        flush = Deferred()
        pipeline._waiting, pipeline._flushes = list(pages), [flush]
        taken = [pipeline._take() for _ in range(3)]
        assert [len(waiting) for waiting, _ in taken] == [PARSE_CHUNK, PARSE_CHUNK, 6]
        assert [waiting for waiting, _ in taken] == [pages[:32], pages[32:64], pages[64:]]
        assert [flushes for _, flushes in taken] == [[], [], [flush]]
        assert (pipeline._waiting, pipeline._flushes) == ([], [])
    finally:
        pipeline.table.close()


def test_a_store_gone_away_leaves_pages_unparsed_and_is_said_once(tmp_path, caplog):
    server = HBaseThriftServer()
    server.start()
    c = hbase_crawler(tmp_path, server, NUTCH_STORAGE_CRAWL_ID="gone")
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    page = fetched("http://a.example/", b"<title>A</title>")
    pipeline._process([page], write=True)
    assert pipeline.table.get("http://a.example/").title == "A"
    server.stop()
    with caplog.at_level(logging.ERROR):
        items = pipeline._process(
            [page, fetched("http://a.example/b", b"<title>B</title>")], write=True
        )
        pipeline._process([page], write=True)
    # The items still come, parsed, without the score the row would have given.
    assert [item["title"] for item in items] == ["A", "B"]
    assert "score" not in items[0]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert errors[0].exc_info is None  # the store's message says it all: no traceback
    message = errors[0].getMessage()
    assert "Cannot write the parse of 2 pages" in message
    assert f"127.0.0.1:{server.port}" in message
    assert c.stats.get_value("nutch/parse/not_written") == 3
    assert c.stats.get_value("nutch/store/put_error") == 3
    pipeline.table.close()


def parse_process_on_a_server_of_its_own(tmp_path):
    """A parse pipeline with its parse process, and its table on an HBase test server of its
    own, which a test may stop: the server, the crawler and the pipeline."""
    server = HBaseThriftServer()
    server.start()
    c = hbase_crawler(
        tmp_path, server, NUTCH_STORAGE_CRAWL_ID="gone", NUTCH_FETCHER_PARSE_PROCESS=True
    )
    c.stats.open_spider()
    return server, c, build_from_crawler(NutchParsePipeline, c)


@pytest.mark.slow
def test_the_parse_process_says_once_that_the_store_is_gone(tmp_path, caplog):
    server, c, pipeline = parse_process_on_a_server_of_its_own(tmp_path)
    try:
        pipeline.table.create()
        server.stop()
        with caplog.at_level(logging.ERROR):
            items = pipeline._process([fetched("http://a.example/", b"<title>A</title>")], True)
            pipeline._process([fetched("http://a.example/b", b"<title>B</title>")], True)
    finally:
        pipeline.process.close()
        pipeline.table.close()
    assert items[0]["title"] == "A"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert "Cannot write the parse of 1 pages" in errors[0]
    assert f"127.0.0.1:{server.port}" in errors[0]
    assert c.stats.get_value("nutch/parse/not_written") == 2
    assert pipeline.process.process.returncode == 0


PAGES = [
    (
        "http://a.example/",
        b"<title>A</title><p>Hello</p><a href='/b'>b</a><a href='//c.example/'>c",
    ),
    ("http://a.example/b", b"<title>B</title><meta name='robots' content='nofollow'><a href=x>x"),
    ("http://a.example/t", b"<title>T</title>"),  # truncated: not parsed
    ("http://a.example/r", b'<meta http-equiv="refresh" content="0; url=/next">'),
]


@pytest.mark.slow
def table_named(name: str, backend: str, tmp_path, request) -> dict[str, object]:
    """The settings of a table of its own, *name*, on *backend* (``embedded`` or ``hbase``)."""
    if backend == "embedded":
        return {"NUTCH_CRAWL_DIR": str(tmp_path / name)}
    return {**request.getfixturevalue("hbase_settings"), "NUTCH_STORAGE_CRAWL_ID": name}


@pytest.mark.parametrize("backend", ["embedded", "hbase"])
def test_the_parse_process_writes_the_rows_and_items_the_thread_writes(tmp_path, request, backend):
    """The same pages, on two tables of the same rows: parsed in a thread and in the parse
    process, they give the same cells (every column of every row) and the same items."""
    results = []
    for name, in_process in (("thread", False), ("process", True)):
        where = table_named(name, backend, tmp_path, request)
        c = crawler(
            tmp_path,
            NUTCH_FETCHER_PARSE_PROCESS=in_process,
            NUTCH_PARSER_SKIP_TRUNCATED=True,  # the truncated page is skipped by both
            **where,
        )
        c.stats.open_spider()
        pipeline = build_from_crawler(NutchParsePipeline, c)
        try:
            pipeline.table.create()
            pipeline.table.put(
                WebPage(reverse_url(PAGES[0][0]), signature=b"old", score=1.5),
                ["signature", "score"],
            )
            pages = [fetched(url, body) for url, body in PAGES]
            pages[2].truncated = True
            items = pipeline._process(pages[:2], write=False)  # held...
            items += pipeline._process(pages[2:], write=True)  # ...then written with these
            if pipeline.process is not None:
                pipeline.process.close()
            rows = dict(pipeline.table.store.scan())
            if backend == "hbase":
                pipeline.table.store.drop()
        finally:
            pipeline.table.close()
        results.append((rows, [dict(item) for item in items], c.stats.get_stats()))
    (rows, items, stats), (rows_p, items_p, stats_p) = results
    assert len(rows) == 3  # the pages parsed (the first had a row); the truncated one not
    assert rows_p == rows
    assert items_p == items
    assert items[0]["score"] == 1.5 and items[0]["title"] == "A"
    counted = {k: v for k, v in stats.items() if k.startswith("nutch/")}
    assert {k: v for k, v in stats_p.items() if k.startswith("nutch/")} == counted
    assert counted["nutch/parse/skipped/truncated"] == 1


def outcome_of(page: FetchedPage) -> tuple[RowUpdate, FetchEntry]:
    """The fetch's row update of *page* (as the fetch's middleware builds it), and its entry."""
    entry = FetchEntry(page.key, page.url, page.batch_id, fetch_time=5)
    answer = http_outcome(
        page.url,
        200,
        list(page.headers.items()),
        page.content,
        content_limit=-1,
        truncated=page.truncated,
    )
    return build_update(entry.key, *fetch_change(entry, answer, now=page.fetch_time)), entry


def handed_over(pages: list[FetchedPage], writer: OutcomeWriter) -> None:
    """Buffer the outcomes of *pages* in *writer*, as the scheduler does, and give each page
    its way to them, as the ``nutch`` spider does."""
    for page in pages:
        update, entry = outcome_of(page)
        writer.add(update, entry)
        page.handover = (writer, entry)


@pytest.mark.parametrize("backend", ["embedded", "hbase"])
def test_an_outcome_written_with_its_parse_leaves_the_cells_of_two_writes(
    tmp_path, request, backend
):
    """The fetch outcomes of pages the parse process gets are written there, in the same write
    as the pages' parse: every cell of every row is the one the fetch's own write of the
    outcomes, then the parse's, leaves; the fetch's writer writes none, and counts each written
    once the parse process said it wrote it."""
    results = []
    for name, together in (("apart", False), ("together", True)):
        where = table_named(name, backend, tmp_path, request)
        c = crawler(
            tmp_path, NUTCH_FETCHER_PARSE_PROCESS=True, NUTCH_PARSER_SKIP_TRUNCATED=True, **where
        )
        c.stats.open_spider()
        pipeline = build_from_crawler(NutchParsePipeline, c)
        written: list[object] = []
        writer = OutcomeWriter(written.append, flush_size=100, flush_interval=60, stats=c.stats)
        try:
            pipeline.table.create()
            for i, (url, _) in enumerate(PAGES):  # the rows of the batch, as generated
                row = WebPage(reverse_url(url), signature=b"old", score=1.5 + i)
                pipeline.table.put(row, ["signature", "score"])
            pages = [fetched(url, body) for url, body in PAGES]
            pages[2].truncated = True  # skipped by the parse: its outcome is written all the same
            if together:
                handed_over(pages, writer)
                for page in pages:
                    pipeline._take_outcome(page)
                assert writer.pending == len(pages)
            else:
                pipeline.table.write([outcome_of(page)[0] for page in pages])
            items = pipeline._process(pages[:2], write=False)
            pipeline._settle_outcomes()
            assert writer.written == 0  # held in the parse process
            items += pipeline._process(pages[2:], write=True)
            pipeline._settle_outcomes()
            pipeline.process.close()
            rows = dict(pipeline.table.store.scan())
            if backend == "hbase":
                pipeline.table.store.drop()
        finally:
            pipeline.table.close()
        assert written == []  # the fetch's writer wrote nothing
        assert writer.pending == 0
        assert writer.written == (len(pages) if together else 0)
        stats = c.stats.get_stats()
        assert stats.get("nutch/fetch/written", 0) == writer.written
        stats.pop("nutch/fetch/written", None)
        results.append((rows, [dict(item) for item in items], stats))
    (rows, items, stats), (rows_t, items_t, stats_t) = results
    assert len(rows) == 4
    assert all(row[b"f:st"] == b"\x00\x00\x00\x02" for row in rows.values())  # all FETCHED
    assert rows_t == rows
    assert items_t == items
    # The same counts, but the write's time, counted for the metrics when a write carries
    # outcomes (the fetch's own writer counts its writes the same way; here the two writes are
    # made without it).
    latency = {"nutch/store/writes", "nutch/store/write_us"}
    assert stats_t.get("nutch/store/writes", 0) >= 1 and stats_t["nutch/store/write_us"] > 0
    assert "nutch/store/writes" not in stats
    assert {k: v for k, v in stats_t.items() if k.startswith("nutch/") and k not in latency} == {
        k: v for k, v in stats.items() if k.startswith("nutch/")
    }


def test_the_fetch_writes_the_outcomes_a_parse_process_that_died_held(tmp_path):
    """A parse process killed with outcomes it had not written: the parse of the next pages
    fails, and the fetch's writer writes every outcome the parse process did not say it wrote
    (no page fetched is lost; those written twice get the same cells)."""
    c = crawler(tmp_path, NUTCH_FETCHER_PARSE_PROCESS=True)
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    table = pipeline.table
    table.create()

    async def main() -> OutcomeWriter:
        writer = OutcomeWriter(table.write, flush_size=100, flush_interval=60, stats=c.stats)
        pages = [fetched(url, body) for url, body in PAGES]
        handed_over(pages, writer)
        for page in pages:
            pipeline._take_outcome(page)
        pipeline._process(pages[:3], write=False)  # held in the parse process...
        pipeline._settle_outcomes()
        assert pipeline.process is not None
        pipeline.process.process.kill()  # ...which dies
        pipeline.process.process.wait()
        with pytest.raises((RuntimeError, OSError)):
            pipeline._process(pages[3:], write=True)
        pipeline._settle_outcomes(failed=True)
        await writer.drain()
        return writer

    try:
        writer = asyncio.run(main())
        marks = [table.get(url, ["markers", "status"]) for url, _ in PAGES]
    finally:
        if pipeline.process is not None:
            pipeline.process.kill()  # its pipes
        table.close()
    assert writer.written == len(PAGES) and writer.pending == 0 and writer.lost == 0
    assert all(page.markers.get("_ftcmrk_") == "b1" and page.status == 2 for page in marks)


@pytest.mark.slow
def test_outcomes_the_parse_process_cannot_write_go_back_to_the_fetch(tmp_path, caplog):
    """The store goes away while the parse process holds fetch outcomes: its write fails, it
    says which outcomes it could not write, and the fetch's own writer writes them (and counts
    them) instead; none is lost, none counted as written by the parse process."""
    server, c, pipeline = parse_process_on_a_server_of_its_own(tmp_path)
    written: list[list[RowUpdate]] = []
    pages = [fetched(url, body) for url, body in PAGES]

    async def main() -> OutcomeWriter:
        writer = OutcomeWriter(written.append, flush_size=100, flush_interval=60, stats=c.stats)
        handed_over(pages, writer)
        for page in pages:
            pipeline._take_outcome(page)
        pipeline._process(pages[:2], write=False)  # held in the parse process
        pipeline._settle_outcomes()
        assert writer.written == 0 and written == []
        server.stop()
        with caplog.at_level(logging.ERROR):
            pipeline._process(pages[2:], write=True)  # the write of all four fails
        pipeline._settle_outcomes()
        await writer.drain()
        return writer

    try:
        pipeline.table.create()
        writer = asyncio.run(main())
    finally:
        if pipeline.process is not None:
            pipeline.process.close()
        pipeline.table.close()
    assert [u.key for batch in written for u in batch] == [p.key.encode() for p in pages]
    assert written[0] == [outcome_of(page)[0] for page in pages]  # the outcomes as built
    assert writer.written == len(pages) and writer.pending == 0 and writer.lost == 0
    assert c.stats.get_value("nutch/fetch/written") == len(pages)
    # one write, the fetch's writer's: the parse process's failed write is not counted as one
    assert c.stats.get_value("nutch/store/writes") == len(written) == 1
    assert c.stats.get_value("nutch/parse/not_written") >= 2  # the parses held were not written
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and f"127.0.0.1:{server.port}" in errors[0], errors


#: The parse process, with Scrapy and Twisted made impossible to import.
WITHOUT_SCRAPY = """
import sys
sys.modules.update(scrapy=None, twisted=None)
from nutchy._parsework import main
sys.exit(main())
"""


def test_the_parse_process_needs_neither_scrapy_nor_twisted(tmp_path):
    """Its memory is that of the core, the store and lxml: with Scrapy and Twisted blocked, it
    opens the table, parses, answers with the items' fields and writes the parse."""
    settings = load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False)
    with open_table(settings) as table:
        table.create()
    process = ParseProcess(
        subprocess.Popen(
            [sys.executable, "-c", WITHOUT_SCRAPY], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
    )
    try:
        process.begin(settings)
        fields, stats, error, _ = process.parse([fetched(*PAGES[0])], write=True)
    finally:
        process.close()
    assert process.process.returncode == 0
    assert error is None and stats["nutch/parse/status/1/0"] == 1
    assert fields[0]["title"] == "A" and fields[0]["outlinks"][0]["anchor"] == "b"
    with open_table(settings) as table:
        page = table.get(PAGES[0][0], ["title", "outlinks"])
    assert page is not None and page.title == "A"
    assert page.outlinks == {"http://a.example/b": "b", "http://c.example/": "c"}


#: The parse process, saying at its exit whether objects were frozen out of the collector.
SAYS_FROZEN = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0, file=sys.stderr))
from nutchy._parsework import main
sys.exit(main())
"""


def test_the_parse_process_freezes_its_imports_and_table_before_the_parses(tmp_path):
    """Once it has opened the table, the process freezes what it holds out of the cyclic
    collector (its imports, the table, the parser), and parses and writes as before."""
    settings = load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False)
    with open_table(settings) as table:
        table.create()
    child = subprocess.Popen(
        [sys.executable, "-c", SAYS_FROZEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process = ParseProcess(child)
    try:
        process.begin(settings)
        fields, stats, error, _ = process.parse([fetched(*PAGES[0])], write=True)
    finally:
        process.close()
    assert child.stderr is not None
    said = child.stderr.read().decode()
    child.stderr.close()
    assert process.process.returncode == 0, said
    assert said.splitlines()[-1] == "frozen True", said
    assert error is None and stats["nutch/parse/status/1/0"] == 1 and fields[0]["title"] == "A"
    with open_table(settings) as table:
        page = table.get(PAGES[0][0], ["title"])
    assert page is not None and page.title == "A"


def test_an_updatedb_the_store_fails_says_what_to_run_and_fails_the_batch(tmp_path, caplog):
    server = HBaseThriftServer()
    server.start()
    c = hbase_crawler(tmp_path, server)
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchDbUpdatePipeline, c)
    server.stop()
    with caplog.at_level(logging.ERROR), pytest.raises(StoreError):
        asyncio.run(pipeline.batch_parsed("b1", True))
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    message = errors[0].getMessage()
    assert message.startswith("Cannot update batch b1: the HBase Thrift server at 127.0.0.1:")
    assert message.endswith("Once the table can be reached: nutchy updatedb b1")
    assert c.stats.get_value("nutch/updatedb/failed") == 1


def test_the_items_of_pages_by_parse_status(tmp_path):
    c = crawler(tmp_path)
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    url = "http://a.example/"
    pipeline.table.put(WebPage(reverse_url(url), score=2.5), ["score"])
    refresh = fetched(url, b'<meta http-equiv="refresh" content="0; url=/next">')
    binary = fetched("http://a.example/img", b"\x89PNG")
    binary.content_type = "image/png"
    binary.headers = {"Content-Type": "image/png"}
    refreshed, image = pipeline._process([refresh, binary], write=True)
    pipeline.table.close()
    # A meta refresh: its target is the one outlink; no title, text or signature (none written).
    assert refreshed["parse_status"] == "success_redirect"
    assert refreshed["outlinks"] == [{"url": "http://a.example/next", "anchor": ""}]
    assert refreshed["score"] == 2.5
    assert not {"title", "text", "signature"} & set(refreshed)
    # Not parsed: the signature, nothing else of a parse.
    assert image["parse_status"] == "notparsed"
    assert image["signature"] == hashlib.md5(b"\x89PNG").hexdigest()
    assert not {"title", "text", "outlinks", "content"} & set(image)


class ReadsItems:
    """An item pipeline of a project."""

    def process_item(self, item):
        return item


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, False),  # nutchy's pipelines alone, no feed
        ({"FEEDS": {"pages.jsonl": {"format": "jsonlines"}}}, True),
        ({"ITEM_PIPELINES": {ReadsItems: 300}}, True),
        ({"ITEM_PIPELINES": {"tests.test_pipelines.ReadsItems": 300}}, True),
        ({"ITEM_PIPELINES": {ReadsItems: 50}}, False),  # before the parse: sees FetchedPage
        ({"ITEM_PIPELINES": {ReadsItems: None}}, False),  # turned off
        ({"NUTCH_FETCHER_INDEX": True}, False),  # nutchy's index pipeline reads the table
        ({"NUTCH_ITEM_CONTENT": True}, True),
        ({"NUTCH_ITEM_PARSE_FIELDS": False, "ITEM_PIPELINES": {ReadsItems: 300}}, False),
        ({"NUTCH_ITEM_PARSE_FIELDS": "true"}, True),
    ],
)
def test_items_carry_the_parse_fields_when_something_reads_them(tmp_path, settings, expected):
    values = {"ADDONS": {NutchAddon: 0}, "NUTCH_CRAWL_DIR": str(tmp_path / "crawl"), **settings}
    assert item_parse_fields(get_crawler(settings_dict=values).settings) is expected


def test_a_bad_item_parse_fields_value_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="NUTCH_ITEM_PARSE_FIELDS must be a boolean"):
        build_from_crawler(NutchParsePipeline, crawler(tmp_path, NUTCH_ITEM_PARSE_FIELDS="maybe"))


@pytest.mark.parametrize("in_process", [False, True])
def test_items_without_the_parse_fields_write_the_same_rows(tmp_path, in_process):
    """Left out of the items, the title, text and outlinks are still written: the same pages
    give the same cells, and the same items but for those three fields."""
    results = []
    for parse_fields in (True, False):
        c = crawler(
            tmp_path,
            NUTCH_CRAWL_DIR=str(tmp_path / str(parse_fields)),
            NUTCH_FETCHER_PARSE_PROCESS=in_process,
            NUTCH_ITEM_PARSE_FIELDS=parse_fields,
        )
        c.stats.open_spider()
        pipeline = build_from_crawler(NutchParsePipeline, c)
        try:
            pipeline.table.create()
            pipeline.table.put(WebPage(reverse_url(PAGES[0][0]), score=1.5), ["score"])
            items = pipeline._process([fetched(url, body) for url, body in PAGES], write=True)
            if pipeline.process is not None:
                pipeline.process.close()
            rows = dict(pipeline.table.store.scan())
        finally:
            pipeline.table.close()
        results.append((rows, [dict(item) for item in items]))
    (rows, items), (rows_light, items_light) = results
    assert len(rows) == len(PAGES) and rows_light == rows
    parse_fields = {"title", "text", "outlinks"}
    assert items[0]["title"] == "A" and items[3]["outlinks"]  # the meta refresh's target
    assert items_light == [
        {k: v for k, v in item.items() if k not in parse_fields} for item in items
    ]
    assert items_light[0]["score"] == 1.5 and items_light[0]["signature"]


def test_the_content_only_with_its_setting(tmp_path):
    c = crawler(tmp_path, NUTCH_ITEM_CONTENT=True)
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    html = fetched("http://a.example/", "<title>é</title>".encode())
    binary = fetched("http://a.example/img", b"\x89PNG")
    binary.content_type = "image/png"
    binary.headers = {"Content-Type": "image/png"}
    page, image = pipeline._process([html, binary], write=True)
    pipeline.table.close()
    assert type(page) is PageContentItem
    assert (page["content"], page["content_base64"]) == ("<title>é</title>", False)
    assert (image["content"], image["content_base64"]) == ("iVBORw==", True)


def test_other_items_pass_through(tmp_path):
    pipeline = build_from_crawler(NutchParsePipeline, crawler(tmp_path))
    item = {"a": 1}
    assert asyncio.run(pipeline.process_item(item)) is item
    pipeline.table.close()


class _HeldParse:
    """A parse process that holds every parse until :attr:`go` is set, and notes how many are
    under way at once."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.under_way = 0
        self.most = 0
        self.calls: list[list[str]] = []

    def parse(self, pages, write, *, shares=False):
        with self.lock:
            self.under_way += 1
            self.most = max(self.most, self.under_way)
            self.calls.append([page.url for page in pages])
        self.go.wait(5)
        with self.lock:
            self.under_way -= 1
        return [{"url": page.url} for page in pages], {"nutch/parse/x": len(pages)}, None, ([], [])

    def close(self) -> None:
        pass


def test_the_parse_process_gets_the_next_pages_before_it_answers(tmp_path):
    """Two parses are sent to the parse process at once, so that it finds the next pages in its
    pipe when it answers; the pages that come meanwhile wait, and go together in the next."""
    c = crawler(tmp_path)
    c.stats.open_spider()
    held = _HeldParse()
    parser = build_from_crawler(NutchParsePipeline, c).parser
    pipeline = NutchParsePipeline(parser, stats=c.stats, start_process=lambda: held, start_now=True)
    urls = [f"http://a.example/{i}" for i in range(5)]

    async def crawl():
        pages = [asyncio.ensure_future(pipeline.process_item(fetched(u, b"x"))) for u in urls]
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(held.calls) == 2:
                break
        await asyncio.sleep(0.05)
        assert held.under_way == 2 and held.calls == [urls[:1], urls[1:2]]
        held.go.set()
        return await asyncio.gather(*pages)

    items = asyncio.run(crawl())
    parser.table.close()
    assert [item["url"] for item in items] == urls
    assert held.most == 2 and held.calls[2:] == [urls[2:]]
    assert c.stats.get_value("nutch/parse/x") == 5


def test_parses_sent_at_once_to_the_parse_process_get_their_own_answers(tmp_path):
    """Threads calling ParseProcess.parse at once each get the items of their own pages, and
    every parse is written."""
    c = crawler(tmp_path)
    with open_table(c.settings) as table:
        table.create()
    process = ParseProcess.start(c.settings)
    got: dict[int, list[list[str]]] = {}

    def parse(thread: int) -> None:
        got[thread] = []
        for call in range(6):
            pages = [
                fetched(f"http://a.example/{thread}/{call}/{i}", b"<title>%d</title>" % i)
                for i in range(1 + (thread + call) % 4)
            ]
            items, _, error, _ = process.parse(pages, write=call == 5)
            assert error is None
            got[thread].append([item["url"] for item in items])
            assert [item["title"] for item in items] == [str(i) for i in range(len(pages))]

    try:
        threads = [threading.Thread(target=parse, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        process.close()
    assert process.process.returncode == 0
    for n in range(3):
        assert got[n] == [
            [f"http://a.example/{n}/{call}/{i}" for i in range(1 + (n + call) % 4)]
            for call in range(6)
        ]
    with open_table(c.settings) as table:
        titles = {page.key: page.title for page in table.scan(["title"])}
    assert len(titles) == sum(1 + (n + call) % 4 for n in range(3) for call in range(6))
    assert titles[reverse_url("http://a.example/2/5/3")] == "3"


def test_the_parse_process_starts_with_the_nutch_spider_s_pipeline_only(tmp_path):
    """For the nutch spider's crawl the parse process starts with the pipeline; another spider
    of the project (which may never yield a page) starts none until its first page."""
    started = []
    for spidercls in (NutchSpider, Spider):
        values = {
            "ADDONS": {NutchAddon: 0},
            "NUTCH_CRAWL_DIR": str(tmp_path / "crawl"),
            "NUTCH_FETCHER_PARSE_PROCESS": True,
        }
        pipeline = build_from_crawler(NutchParsePipeline, get_crawler(spidercls, values))
        started.append(pipeline.process is not None)
        if pipeline.process is not None:
            pipeline.process.close()
            assert pipeline.process.process.returncode == 0
        pipeline.table.close()
    assert started == [True, False]
