"""Index and search after real crawls of a loopback site: a page found only by the anchor text
of a link to it, duplicate pages, a page that turns noindex and a page that goes 404 between two
crawls; searched through ``nutchy search`` and the Python API. And the index pipeline of
``scrapy crawl nutch``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus, Mark
from nutchy.index import search
from nutchy.store import open_table

LINKS = (
    '<a href="/apples">apples</a> <a href="/bananas">bananas</a>'
    ' <a href="/cherries-1">cherries</a> <a href="/cherries-2">more cherries</a>'
    ' <a href="/durian">durian</a> <a href="/elsewhere">zanzibar spice market</a>'
)
CHERRIES = (
    "<html><head><title>Cherries</title></head><body>Cherries are small and red.</body></html>"
)
PAGES = {
    "/": f"<html><head><title>Fruit</title></head><body>A fruit index. {LINKS}</body></html>",
    "/apples": "<html><head><title>Apples</title></head><body>Apples grow on trees.</body></html>",
    "/bananas": "<html><head><title>Bananas</title></head><body>Bananas are yellow.</body></html>",
    "/cherries-1": CHERRIES,
    "/cherries-2": CHERRIES,
    "/durian": "<html><head><title>Durian</title></head><body>Durian smells.</body></html>",
    "/elsewhere": "<html><head><title>Cloves</title></head><body>Dried flower buds.</body></html>",
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):
        pass

    def do_GET(self):
        body = self.server.pages.get(self.path)
        status = 200 if body is not None else 404
        data = (body or "not found").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.pages = dict(PAGES)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch, site):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds.txt").write_text(f"http://127.0.0.1:{site.server_port}/\n")
    return tmp_path


def settings(crawl_dir):
    return [
        "-s",
        f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}",
        "-s",
        "NUTCH_FETCHER_SERVER_DELAY=0",
        "-s",
        "TELNETCONSOLE_ENABLED=False",
        "-s",
        "LOG_LEVEL=WARNING",
    ]


def nutchy(crawl_dir, *args):
    return main([*args, *settings(crawl_dir)])


def found(crawl_dir, query, capsys):
    """The paths of the hits of ``nutchy search -json QUERY``."""
    capsys.readouterr()
    nutchy(crawl_dir, "search", query, "-json")
    out = json.loads(capsys.readouterr().out)
    return sorted(hit["url"].split("/", 3)[3] for hit in out["hits"])


@pytest.mark.slow
def test_two_crawls_indexed_and_searched(crawl_dir, site, capsys):
    seeds = str(crawl_dir / "seeds.txt")
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "2") == 0
    assert nutchy(crawl_dir, "index", "-all") == 0
    err = capsys.readouterr().err
    assert "7 rows read, 7 indexed, 0 deleted" in err

    # The home page's text has its links' words; each page has its own.
    assert found(crawl_dir, "apples", capsys) == ["", "apples"]
    assert found(crawl_dir, "grow trees", capsys) == ["apples"]
    # Found by the anchor text of the link to it: its own text has none of these words.
    assert found(crawl_dir, "zanzibar", capsys) == ["", "elsewhere"]
    assert found(crawl_dir, '"spice market"', capsys) == ["", "elsewhere"]
    assert found(crawl_dir, "anchor:zanzibar", capsys) == ["elsewhere"]
    # Same content at two URLs: both are indexed until nutchy dedup marks one a duplicate,
    # which the next nutchy index deletes (it had the index mark).
    assert found(crawl_dir, "small red", capsys) == ["cherries-1", "cherries-2"]
    assert nutchy(crawl_dir, "dedup") == 0
    assert nutchy(crawl_dir, "index", "-all") == 0
    assert "7 rows read, 6 indexed, 1 deleted" in capsys.readouterr().err
    kept = found(crawl_dir, "small red", capsys)
    assert kept in (["cherries-1"], ["cherries-2"])  # the one dedup kept (by its order)

    # The plain output: rank, title, URL, snippet; the count on standard error.
    assert nutchy(crawl_dir, "search", "bananas") == 0
    out, err = capsys.readouterr()
    base = f"http://127.0.0.1:{site.server_port}"
    assert out.splitlines()[:3] == ["1. Bananas", f"   {base}/bananas", "   Bananas are yellow"]
    assert err.startswith("2 of 2 pages for 'bananas'")

    # Between the two crawls, bananas turns noindex and durian goes away.
    site.pages["/bananas"] = (
        '<html><head><meta name="robots" content="noindex,follow"><title>Bananas</title>'
        "</head><body>Bananas are yellow.</body></html>"
    )
    del site.pages["/durian"]
    # This crawl indexes its round itself (NUTCH_FETCHER_INDEX), as nutchy index BATCH does.
    capsys.readouterr()
    assert (
        nutchy(
            crawl_dir, "crawl", seeds, "-rounds", "1", "-adddays", "31",
            "-s", "NUTCH_FETCHER_INDEX=True",
        )
        == 0
    )  # fmt: skip
    assert "round 1: index: 4 indexed, 2 deleted" in capsys.readouterr().err
    with open_table(load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")})) as table:
        rows = {p.url.removeprefix(base): p for p in table.scan(["status", "markers"])}
    assert rows["/durian"].status == CrawlStatus.GONE
    batch = rows["/apples"].markers[Mark.UPDATEDB]
    assert rows["/durian"].markers[Mark.UPDATEDB] != batch  # 404: no parse, no new updatedb mark
    assert Mark.INDEX not in rows["/durian"].markers  # deleted: its index mark dropped
    # Indexing the batch again changes nothing and deletes nothing twice.
    assert nutchy(crawl_dir, "index", batch) == 0
    assert "6 rows read, 4 indexed, 0 deleted, 1 kept out by a filter" in capsys.readouterr().err

    assert found(crawl_dir, "yellow", capsys) == []
    assert found(crawl_dir, "smells", capsys) == []
    assert found(crawl_dir, "trees OR small", capsys) == ["apples", *kept]
    # The Python API sees the same index.
    hits = search(crawl_dir / "crawl", "zanzibar OR trees", limit=5)
    assert sorted(hit.url.removeprefix(base) for hit in hits) == ["/", "/apples", "/elsewhere"]
    assert {hit.title for hit in hits} == {"Fruit", "Apples", "Cloves"}

    # The index folder deleted: search says so in one line; -all -rebuild builds it again.
    shutil.rmtree(crawl_dir / "crawl" / "index")
    capsys.readouterr()
    assert nutchy(crawl_dir, "search", "apples") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("nutchy search: no index in ") and "nutchy index -all" in line
    assert nutchy(crawl_dir, "index", "-all", "-rebuild") == 0
    assert "7 rows read, 4 indexed, 0 deleted" in capsys.readouterr().err
    assert found(crawl_dir, "trees", capsys) == ["apples"]
    assert found(crawl_dir, "smells OR yellow", capsys) == []


def test_bad_queries_and_a_corrupted_index_are_one_line(crawl_dir, capsys):
    assert nutchy(crawl_dir, "storage", "init") == 0
    assert nutchy(crawl_dir, "index", "-all") == 0
    capsys.readouterr()
    for query, reason in [
        ("apples AND (", "Syntax Error"),
        ("nofield:x", "Field does not exist"),
        ("", "the query is empty"),
    ]:
        assert nutchy(crawl_dir, "search", query) == 2
        out, err = capsys.readouterr()
        (line,) = err.splitlines()
        assert line.startswith("nutchy search: ") and reason in line
        assert out == ""
    index_dir = crawl_dir / "crawl" / "index"
    for path in index_dir.iterdir():
        path.write_bytes(b"\x00garbage")
    assert nutchy(crawl_dir, "search", "apples") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "cannot be opened (corrupted?)" in line and "nutchy index -all -rebuild" in line
    assert nutchy(crawl_dir, "index", "-all") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "nutchy index -all -rebuild" in line
    assert nutchy(crawl_dir, "index", "-all", "-rebuild") == 0
    assert nutchy(crawl_dir, "search", "apples") == 1  # a good index, with no hit
    # -rebuild is for every row.
    assert nutchy(crawl_dir, "index", "b1", "-rebuild") == 2
    assert "use it with -all" in capsys.readouterr().err


@pytest.mark.slow
def test_scrapy_crawl_nutch_indexes_each_batch_it_updated(crawl_dir, site):
    command = [sys.executable, "-m", "nutchy.cli"]
    where = settings(crawl_dir)
    assert nutchy(crawl_dir, "inject", str(crawl_dir / "seeds.txt")) == 0
    assert nutchy(crawl_dir, "generate", "-batchId", "b1") == 0
    fetched = subprocess.run(
        [*command, "fetch", "b1", *where, "-s", "NUTCH_FETCHER_INDEX=True"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert "Traceback" not in fetched.stderr
    hits = search(crawl_dir / "crawl", "fruit")
    assert [hit.title for hit in hits] == ["Fruit"]
