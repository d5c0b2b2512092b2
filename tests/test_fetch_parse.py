"""Parsing during the fetch: ``NutchParsePipeline`` (``NUTCH_FETCHER_PARSE``)."""

from __future__ import annotations

import pytest
from sites import FetchProject, Site, prepare_batch

from nutchy.core.status import ParseStatusMajor

H2 = "127.0.0.2"


@pytest.fixture
def store_factory(embedded_store_factory):
    """Crawl mechanics, not storage: the embedded store (the parse job runs on both)."""
    return embedded_store_factory


def test_pages_parsed_during_the_fetch(store, tmp_path):
    with Site((H2,)) as site:
        urls = [site.url(H2, f"/page/{i}") for i in range(3)] + [site.url(H2, "/binary")]
        table = prepare_batch(store, urls)
        result = FetchProject(tmp_path, store, NUTCH_FETCHER_FLUSH_SIZE=2).crawl()
        assert result.returncode == 0, result.log[-3000:]
        assert result.stats["nutch/parse/status/1/0"] == 3
        assert result.stats["nutch/parse/status/0/0"] == 1
        for i in range(3):
            page = table.get(urls[i])
            assert page.title == f"/page/{i}"
            assert page.parse_status.major == ParseStatusMajor.SUCCESS
            assert page.signature is not None
            assert page.markers["__prsmrk__"] == page.markers["_ftcmrk_"] == "b1"
        assert table.get(urls[3]).parse_status.major == ParseStatusMajor.NOTPARSED


def test_parse_off(store, tmp_path):
    with Site((H2,)) as site:
        urls = [site.url(H2, "/page/x")]
        table = prepare_batch(store, urls)
        result = FetchProject(tmp_path, store, NUTCH_FETCHER_PARSE=False).crawl()
        assert result.returncode == 0, result.log[-3000:]
        page = table.get(urls[0])
        assert page.title is None and "__prsmrk__" not in page.markers
        assert page.markers["_ftcmrk_"] == "b1"
