"""``nutchy freegen``, ``nutchy parsechecker`` and ``nutchy indexchecker`` against a loopback site."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nutchy.cli import main
from nutchy.core.status import CrawlStatus, Mark
from nutchy.core.urls import reverse_url
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.table import WebTable
from tests.sites import ServedPages

LATER = 4_000_000_000_000  # ms, in 2096: not due


@pytest.fixture
def site() -> Iterator[ServedPages]:
    with ServedPages() as served:
        served.add("/robots.txt", b"User-agent: *\nDisallow: /private\n", "text/plain")
        served.add(
            "/page",
            b"<html><head><title>A page\x07 title</title></head><body><p>Apples and pears.</p>"
            b'<a href="/known">known</a> <a href="/new">brand new</a>'
            b'<a href="http://127.0.0.2:9/x">elsewhere</a></body></html>',
            "text/html",
        )
        served.add("/known", b"<html><title>Known</title></html>", "text/html")
        served.add(
            "/hidden",
            b'<html><head><meta name="robots" content="noindex"><title>Hidden</title></head>'
            b"<body>secret</body></html>",
            "text/html",
        )
        served.add("/private/x", b"<html>private</html>", "text/html")
        yield served


@pytest.fixture
def table(tmp_path) -> Iterator[WebTable]:
    table = WebTable(EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite"))
    table.create()
    yield table
    table.close()


def _cli(tmp_path, *args: str) -> int:
    return main(
        [
            *args,
            "-s",
            f"NUTCH_CRAWL_DIR={tmp_path / 'crawl'}",
            "-s",
            "NUTCH_FETCHER_SERVER_DELAY=0",
        ]
    )


def test_freegen_marks_the_urls_of_a_file_due_or_not(tmp_path, table, capsys):
    table.update(reverse_url("http://127.0.0.1/later"), {"fetch_time": LATER, "score": 2.0})
    table.update(
        reverse_url("http://127.0.0.1/taken"),
        {"fetch_time": 0},
        {"markers": {Mark.GENERATE: "other-batch"}},
    )
    urls = tmp_path / "urls.txt"
    urls.write_text(
        "http://127.0.0.1/later\nhttp://127.0.0.1/taken\nhttp://127.0.0.1/new\n"
        "http://127.0.0.1/image.png\nno url at all\n",
        encoding="utf-8",
    )
    assert _cli(tmp_path, "freegen", str(urls)) == 0
    captured = capsys.readouterr()
    batch = captured.out.strip()
    assert "2 URLs marked (1 new, 1 left to another batch, 1 filtered, 1 malformed)" in captured.err
    later, taken, new = (
        table.get(f"http://127.0.0.1/{name}") for name in ("later", "taken", "new")
    )
    assert later is not None and taken is not None and new is not None
    assert later.markers[Mark.GENERATE] == batch and later.batch_id == batch
    assert later.fetch_time == LATER and later.score == 2.0  # its schedule is its own
    assert new.markers[Mark.GENERATE] == batch
    assert taken.markers[Mark.GENERATE] == "other-batch"
    assert table.get("http://127.0.0.1/image.png") is None
    # The rows are a batch as generate makes one: a second freegen finds them taken.
    assert _cli(tmp_path, "freegen", str(urls)) == 1
    assert "0 URLs marked" in capsys.readouterr().err


@pytest.mark.slow
def test_parsechecker_shows_the_fetch_the_parse_and_what_updatedb_would_set(
    tmp_path, table, site, capsys
):
    table.update(reverse_url(f"{site.root}/known"), {"fetch_time": LATER, "score": 1.0})
    before = {page.key for page in table.scan(("fetch_time",))}
    assert _cli(tmp_path, "parsechecker", f"{site.root}/page", "-text", "12") == 0
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0].strip(): line for line in out.splitlines()}
    assert "SUCCESS" in lines["fetch"]
    assert "text/html" in lines["content"]
    assert "A page\\x07 title" in lines["title"]  # a control character cannot reach the terminal
    assert "Apples and p …" in lines["text"]
    assert lines["outlinks"].endswith("3")
    assert f"{site.root}/new  brand new" in out
    assert len(lines["signature"].split()[-1]) == 32
    assert "fetched (2), was not in the table" in lines["status"]
    assert "days" in lines["next fetch"] and "2592000 s" in lines["interval"]
    assert "2 (outlinks the table does not hold)" in lines["new URLs"]  # /new and 127.0.0.2
    # The crawl's table was only read.
    assert {page.key for page in table.scan(("fetch_time",))} == before
    assert site.asked.count("/page") == 1


@pytest.mark.slow
def test_the_checkers_obey_robots_and_the_filter_and_indexchecker_shows_the_document(
    tmp_path, table, site, capsys
):
    assert _cli(tmp_path, "parsechecker", f"{site.root}/private/x") == 0
    out = capsys.readouterr().out
    assert "ROBOTS_DENIED" in out and f"gone ({int(CrawlStatus.GONE)})" in out
    assert "/private/x" not in site.asked
    assert _cli(tmp_path, "parsechecker", f"{site.root}/style.css") == 1
    assert "the URL filter rejects it" in capsys.readouterr().err
    assert _cli(tmp_path, "indexchecker", f"{site.root}/page") == 0
    out = capsys.readouterr().out
    assert "index:        this document:" in out
    assert f"  url: {site.root}/page" in out and "  title: A page\\x07 title" in out
    assert _cli(tmp_path, "indexchecker", f"{site.root}/hidden") == 0
    assert "an indexing filter keeps it out" in capsys.readouterr().out
