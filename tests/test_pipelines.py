"""NutchParsePipeline as a component: built from a crawler, other items pass through, pages are
parsed and written in batches."""

from __future__ import annotations

import asyncio
import logging

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from nutchy.addon import NutchAddon
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.exceptions import StoreError
from nutchy.pipelines import FetchedPage, NutchDbUpdatePipeline, NutchParsePipeline
from nutchy.store import open_table
from nutchy.testing.hbase_server import HBaseThriftServer


def crawler(tmp_path, **settings):
    values = {"ADDONS": {NutchAddon: 0}, "NUTCH_CRAWL_DIR": str(tmp_path / "crawl"), **settings}
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
    c = crawler(tmp_path)
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    url = "http://a.example/"
    pipeline.table.put(WebPage(reverse_url(url), signature=b"old"), ["signature"])
    truncated = fetched("http://a.example/t", b"<title>T</title>")
    truncated.truncated = True
    pipeline._parse_and_write([fetched(url, b"<title>A</title><a href='/b'>b</a>"), truncated])
    pipeline.table.close()
    with open_table(c.settings) as table:
        page = table.get(url)
        assert (page.title, page.prev_signature) == ("A", b"old")
        assert page.outlinks == {"http://a.example/b": "b"}
        assert page.markers == {"__prsmrk__": "b1"}
        assert table.get("http://a.example/t") is None
    assert c.stats.get_value("nutch/parse/status/1/0") == 1
    assert c.stats.get_value("nutch/parse/skipped/truncated") == 1


def test_a_store_gone_away_leaves_pages_unparsed_and_is_said_once(tmp_path, caplog):
    server = HBaseThriftServer()
    server.start()
    c = hbase_crawler(tmp_path, server, NUTCH_STORAGE_CRAWL_ID="gone")
    c.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, c)
    pipeline.table.create()
    page = fetched("http://a.example/", b"<title>A</title>")
    pipeline._parse_and_write([page])
    assert pipeline.table.get("http://a.example/").title == "A"
    server.stop()
    with caplog.at_level(logging.ERROR):
        pipeline._parse_and_write([page, fetched("http://a.example/b", b"<title>B</title>")])
        pipeline._parse_and_write([page])
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert errors[0].exc_info is None  # the store's message says it all: no traceback
    message = errors[0].getMessage()
    assert "Cannot write the parse of 2 pages" in message
    assert f"127.0.0.1:{server.port}" in message
    assert c.stats.get_value("nutch/parse/not_written") == 3
    assert c.stats.get_value("nutch/store/put_error") == 3
    pipeline.table.close()


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
