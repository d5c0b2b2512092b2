"""``nutchy crawl`` reading sitemaps in its rounds (``-sitemaps``, ``-sitemapsFromHostdb``), on a
loopback site whose robots.txt names a sitemap with ``lastmod``: a re-crawl asks only the pages
the sitemap says changed; a sitemap that cannot be read leaves the crawl running."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sites import ServedPages

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.webpage import WebPage
from nutchy.jobs.crawl import SitemapOptions, _read_sitemaps
from nutchy.store import open_table

PAGES = ("/p1", "/p2", "/p3", "/p4", "/p5", "/p6")
CHANGED = ("/p2", "/p5")
#: Settings of every command: no politeness delay, short timeouts, the history on.
FAST = {
    "NUTCH_FETCHER_SERVER_DELAY": "0",
    "NUTCH_HTTP_TIMEOUT": "2000",
    "NUTCH_FETCHER_FLUSH_INTERVAL": "0.5",
    "NUTCH_CRAWL_HISTORY": "True",
    "TELNETCONSOLE_ENABLED": "False",
}


def _lastmod(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def _page(path: str, version: int, links: tuple[str, ...] = ()) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return (
        f"<html><head><title>{path}</title></head><body><p>{path}, version {version}</p>"
        f"{anchors}</body></html>"
    ).encode()


def _sitemap(root: str, lastmods: dict[str, float]) -> bytes:
    entries = "".join(
        f"<url><loc>{root}{path}</loc><lastmod>{_lastmod(when)}</lastmod></url>"
        for path, when in lastmods.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    ).encode()


def _nutchy(settings: dict[str, str], *args: str) -> int:
    options = [f"{name}={value}" for name, value in {**FAST, **settings}.items()]
    return main([*args, *(x for option in options for x in ("-s", option))])


def _rows(settings: dict[str, str]) -> dict[str, WebPage]:
    with open_table(load_settings(settings, project=False)) as table:
        return {page.url: page for page in table.scan()}


class _Asked(list[str]):
    """The paths a :class:`ServedPages` was asked for; at each, the command lines of the
    children of :attr:`crawl` (a process) are noted in :attr:`children`."""

    def __init__(self) -> None:
        super().__init__()
        self.crawl: subprocess.Popen[str] | None = None
        self.children: list[str] = []

    def append(self, path: str) -> None:
        super().append(path)
        if self.crawl is None:
            return
        for task in Path(f"/proc/{self.crawl.pid}/task").glob("*"):
            with contextlib.suppress(OSError):  # a thread or a child gone meanwhile
                for child in (task / "children").read_text().split():
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                    self.children.append(cmdline.replace(b"\0", b" ").decode())


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no Scrapy project: the CLI's and the fetch's settings only
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    return tmp_path


def test_the_options_say_which_sitemaps_are_read_before_which_generate():
    assert SitemapOptions().spider_args(first=True) is None
    assert SitemapOptions(None, "never").spider_args(first=True) is None
    assert SitemapOptions(None, "once").spider_args(first=True) == {"robots": True}
    assert SitemapOptions(None, "once").spider_args(first=False) is None
    assert SitemapOptions(None, "always").spider_args(first=False) == {"robots": True}
    assert SitemapOptions("a.txt", "never").spider_args(first=True) == {
        "robots": False,
        "sitemaps": "a.txt",
    }
    assert SitemapOptions("a.txt", "never").spider_args(first=False) is None
    with pytest.raises(ValueError, match="from_hosts must be one of never, once, always"):
        SitemapOptions(None, "sometimes")


@pytest.mark.slow
def test_a_recrawl_with_the_sitemaps_asks_only_the_pages_that_changed(crawl_dir, capfd):
    settings = {"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}
    with ServedPages() as site:
        root = site.root
        site.add(
            "/robots.txt", f"User-agent: *\nSitemap: {root}/sitemap.xml\n".encode(), "text/plain"
        )
        site.add("/", _page("/", 1, PAGES), "text/html")
        for path in PAGES:
            site.add(path, _page(path, 1), "text/html")
        an_hour_ago = time.time() - 3600
        site.add("/sitemap.xml", _sitemap(root, dict.fromkeys(("/", *PAGES), an_hour_ago)))
        seeds = crawl_dir / "seeds.txt"
        seeds.write_text(f"{root}/\n")

        # The first crawl reads no sitemap: none was asked for.
        assert _nutchy(settings, "crawl", str(seeds), "-rounds", "3") == 0
        log = capfd.readouterr().err
        assert "sitemaps:" not in log
        assert "/sitemap.xml" not in site.asked
        assert sorted(p for p in site.asked if p != "/robots.txt") == sorted(("/", *PAGES))
        first = _rows(settings)
        assert len(first) == 7
        assert all(page.signature for page in first.values())

        # Two pages change, and the sitemap says so.
        for path in CHANGED:
            site.add(path, _page(path, 2), "text/html")
        lastmods = dict.fromkeys(("/", *PAGES), an_hour_ago)
        lastmods.update(dict.fromkeys(CHANGED, time.time() + 1))
        site.add("/sitemap.xml", _sitemap(root, lastmods))
        site.asked = asked = _Asked()

        # As a command, whose fetch runs in its own process (NUTCH_CRAWL_FETCH_IN_PROCESS; not
        # in this test process, where Twisted's reactor may have run): the sitemaps are read by
        # a second crawler of the fetch's Scrapy process, not in a child of their own.
        options = [f"{name}={value}" for name, value in {**FAST, **settings}.items()]
        asked.crawl = subprocess.Popen(
            [
                *(sys.executable, "-m", "nutchy", "crawl", str(seeds), "-rounds", "1"),
                *("-sitemapsFromHostdb", "once", *(x for o in options for x in ("-s", o))),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _, log = asked.crawl.communicate(timeout=60)
        finally:
            asked.crawl.kill()
        assert asked.crawl.returncode == 0, log
        assert any("nutchy._parsework" in line for line in asked.children), asked.children
        assert not any("nutchy._sitemaprun" in line for line in asked.children), asked.children
        assert not any("nutchy._fetchrun" in line for line in asked.children), asked.children
        assert "round 1: sitemaps: 1 read: 7 URLs listed, 2 made due;" in log
        assert "round 1: fetch: 2 URLs fetched: 2 success;" in log
        pages_asked = [p for p in site.asked if p not in ("/robots.txt", "/sitemap.xml")]
        assert sorted(pages_asked) == sorted(CHANGED)  # each once, and nothing else
        assert site.asked.count("/sitemap.xml") == 1

        again = _rows(settings)
        assert set(again) == set(first)
        for url, page in again.items():
            old = first[url]
            if url.removeprefix(root) in CHANGED:
                assert page.fetch_time > old.fetch_time, url
                assert page.signature != old.signature, url
                assert b"version 2" in page.content, url
            else:
                assert (page.fetch_time, page.prev_fetch_time) == (
                    old.fetch_time,
                    old.prev_fetch_time,
                ), url
                assert page.signature == old.signature, url

        history = [
            json.loads(line)
            for line in (crawl_dir / "crawl" / "history.jsonl").read_text().splitlines()
        ]
        assert len(history) == 3  # two rounds (the third found nothing to fetch), then one
        assert all("sitemaps" not in line for line in history[:2])
        assert history[2]["sitemaps"]["read"] == 1
        assert history[2]["sitemaps"]["due"] == 2
        assert history[2]["fetched"] == 2
        assert "sitemaps" in history[2]["seconds"]


@pytest.mark.slow
def test_a_sitemap_that_cannot_be_read_leaves_the_crawl_running(crawl_dir, capfd, caplog):
    settings = {"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}
    with ServedPages() as site:
        root = site.root
        # robots.txt names a sitemap that is not there; -sitemaps names one that is no XML.
        site.add("/robots.txt", f"User-agent: *\nSitemap: {root}/gone.xml\n".encode(), "text/plain")
        site.add("/broken.xml", b"<html><body>not a sitemap", "text/html")
        site.add("/", _page("/", 1, ("/p1",)), "text/html")
        site.add("/p1", _page("/p1", 1), "text/html")
        seeds = crawl_dir / "seeds.txt"
        seeds.write_text(f"{root}/\n")
        # Two fetch processes: the sitemaps are read in a child process of their own.
        code = _nutchy(
            settings,
            *("crawl", str(seeds), "-rounds", "3", "-numFetchers", "2"),
            *("-sitemaps", f"{root}/broken.xml", "-sitemapsFromHostdb", "always"),
        )
        assert code == 0
        log = capfd.readouterr().err
        assert "round 1: sitemaps: 0 read, 1 failed, 1 not sitemaps;" in log
        assert "round 2: sitemaps: 0 read, 1 failed;" in log  # -sitemaps: the first time only
        assert "Cannot read the sitemap" in log  # the sitemap child's warnings
        assert "Not a sitemap (root element 'html')" in log
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert [w for w in warnings if "no sitemap could be read" in w] == [
            f"Round {n}: no sitemap could be read; the round goes on" for n in (1, 2, 3)
        ]
        assert "round 1: fetch: 1 URLs fetched: 1 success;" in log
        assert "round 2: fetch: 1 URLs fetched: 1 success;" in log
        assert "stopped, nothing left to fetch" in log
        assert site.asked.count("/broken.xml") == 1
        assert site.asked.count("/gone.xml") == 3  # before each of the three generates
        assert {page.url for page in _rows(settings).values()} == {f"{root}/", f"{root}/p1"}


def test_the_sitemap_options_are_checked_before_the_crawl_starts(crawl_dir, capsys):
    seeds = crawl_dir / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    assert main(["crawl", str(seeds), "-sitemapsFromHostdb", "sometimes"]) == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err
    assert main(["crawl", str(seeds), "-sitemaps", str(crawl_dir / "none.txt")]) == 2
    assert "cannot read the sitemap list" in capsys.readouterr().err
    assert not (crawl_dir / "crawl").exists()  # nothing was written


def test_a_sitemap_child_that_cannot_start_is_a_warning(crawl_dir, caplog):
    lines: list[str] = []
    counts, seconds = _read_sitemaps(
        SitemapOptions(str(crawl_dir / "none.txt")),
        first=True,
        overrides={"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"), "LOG_LEVEL": "CRITICAL"},
        number=1,
        log=lines.append,
    )
    assert counts == {}
    assert seconds > 0
    assert lines[0].startswith("round 1: sitemaps: 0 read; ")
    assert "Round 1: the sitemap crawl could not start (exit code 1); the round goes on" in [
        r.getMessage() for r in caplog.records
    ]
