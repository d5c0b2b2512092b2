"""The clean job on both stores: gone, redirected and duplicate pages leave every index writer's
index (a JSON lines file and an Elasticsearch index on the wire-level test server), the index
marks go once committed, and the others stay."""

from __future__ import annotations

import json

import pytest

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus, ParseStatus
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.index.document import Document
from nutchy.index.servers import ElasticsearchIndexWriter
from nutchy.index.writers import JSONLinesIndexWriter
from nutchy.jobs.clean import clean
from nutchy.store import open_table
from nutchy.store.table import WebTable
from nutchy.testing.search_server import SearchServer

PARSED = ParseStatus(1, 0)
PAGES = {
    "http://a.com/ok": (CrawlStatus.FETCHED, PARSED),
    "http://a.com/same": (CrawlStatus.NOTMODIFIED, PARSED),
    "http://a.com/gone": (CrawlStatus.GONE, PARSED),
    "http://a.com/moved": (CrawlStatus.REDIR_PERM, PARSED),
    "http://a.com/moved-for-now": (CrawlStatus.REDIR_TEMP, None),
    "http://a.com/refresh": (CrawlStatus.FETCHED, ParseStatus(1, 100, ("http://a.com/ok", "0"))),
    "http://a.com/copy": (CrawlStatus.DUPLICATE, PARSED),
    "http://a.com/retry": (CrawlStatus.RETRY, None),
    "http://a.com/new": (CrawlStatus.UNFETCHED, None),
}
LEAVING = {
    "http://a.com/gone",
    "http://a.com/moved",
    "http://a.com/moved-for-now",
    "http://a.com/refresh",
    "http://a.com/copy",
}


@pytest.fixture(scope="module")
def es():
    with SearchServer("elasticsearch") as server:
        yield server


def fill(table):
    for url, (status, parse_status) in PAGES.items():
        markers = {} if url.endswith(("/new", "/moved-for-now")) else {"_idxmrk_": "b1"}
        page = WebPage(reverse_url(url), status=status, parse_status=parse_status, markers=markers)
        table.put(page, ALL_FIELDS)


def es_writer(server):
    return ElasticsearchIndexWriter(server.url, index="crawl", backoff=0.001, retries=2)


def index_everything(server):
    writer = es_writer(server)
    writer.open()
    writer.write([Document(url) for url in PAGES])
    writer.commit()
    writer.close()


def test_clean_deletes_from_every_writer(store, es, tmp_path):
    es.clear()
    table = WebTable(store, read_limit=4, write_limit=3)
    fill(table)
    index_everything(es)
    jsonl = JSONLinesIndexWriter(tmp_path / "index.jsonl")
    counts = clean(table, [jsonl, es_writer(es)])
    assert (counts.rows, counts.gone, counts.redirected, counts.duplicates) == (9, 1, 3, 1)
    assert set(es.documents("crawl", visible=True)) == set(PAGES) - LEAVING
    lines = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert {line["id"] for line in lines} == LEAVING
    assert {line["action"] for line in lines} == {"delete"}
    marks = {p.url: p.markers.get("_idxmrk_") for p in table.scan(["markers"])}
    assert {url for url, mark in marks.items() if mark} == set(PAGES) - LEAVING - {
        "http://a.com/new"
    }
    assert counts.unmarked == 4  # moved-for-now never had the mark


def test_no_commit_sends_the_deletions_and_keeps_the_marks(embedded_store_factory, es):
    es.clear()
    store = embedded_store_factory()
    store.create()
    table = WebTable(store)
    fill(table)
    index_everything(es)
    counts = clean(table, [es_writer(es)], commit=False)
    assert counts.deleted == 5 and counts.unmarked == 0
    assert set(es.documents("crawl")) == set(PAGES) - LEAVING
    assert len(es.documents("crawl", visible=True)) == len(PAGES)  # no refresh asked
    assert table.get("http://a.com/gone", ["markers"]).markers["_idxmrk_"] == "b1"


def test_the_command(tmp_path, es, capsys, monkeypatch):
    es.clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    settings = {
        "NUTCH_CRAWL_DIR": str(tmp_path / "crawl"),
        "NUTCH_INDEX_WRITERS": json.dumps(
            {
                "nutchy.index.writers.JSONLinesIndexWriter": 100,
                "nutchy.index.servers.ElasticsearchIndexWriter": 200,
            }
        ),
        "NUTCH_ELASTIC_URL": es.url,
        "NUTCH_ELASTIC_INDEX": "crawl",
    }
    with open_table(load_settings(settings, project=False)) as table:
        table.create()
        fill(table)
    index_everything(es)
    args = [item for name, value in settings.items() for item in ("-s", f"{name}={value}")]
    assert main(["clean", *args]) == 0
    err = capsys.readouterr().err
    assert "9 rows read; deleted 5 URLs (1 gone, 3 redirected, 1 duplicates) from" in err
    assert "JSONLinesIndexWriter" in err and "ElasticsearchIndexWriter" in err
    assert set(es.documents("crawl", visible=True)) == set(PAGES) - LEAVING
    # An unreachable writer: one line, exit code 2, the marks kept for the next run.
    down = [
        *args,
        "-s",
        "NUTCH_ELASTIC_URL=http://127.0.0.1:9",
        "-s",
        "NUTCH_ELASTIC_EXPONENTIAL_BACKOFF_RETRIES=0",
    ]
    assert main(["clean", *down]) == 2
    assert "gave up after 1 attempts: GET /" in capsys.readouterr().err
