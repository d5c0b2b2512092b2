"""Politeness beyond one process, measured by the servers: the host memory beside the web table
(robots.txt answers with an expiry, each host's last request) on both stores, and a
``nutchy crawl`` of several rounds (one fetch process each, and two fetchers at once) in which no
host sees two requests closer than its delay or Crawl-delay, robots.txt included, and robots.txt
is asked for once."""

from __future__ import annotations

import itertools
import re

import pytest
from graph_site import GraphSite, Page
from sites import store_settings

from nutchy.cli import main
from nutchy.store.hosts import RobotsRecord, Visit, open_host_memory

H2, H3 = "127.0.0.2", "127.0.0.3"
DELAY = 0.3
CRAWL_DELAY = 0.6


def test_host_memory_keeps_robots_answers_and_the_last_visit(store_factory):
    store = store_factory()
    store.create()
    memory = open_host_memory(store)
    try:
        assert memory.robots(["http://a.example:80"]) == {}
        assert memory.visits(["http://a.example"]) == {}
        record = RobotsRecord(1_700_000_000_000, 200, b"User-agent: *\nDisallow: /x\n\xff")
        memory.keep_robots(
            {"http://a.example:80": record, "https://b.example": RobotsRecord(1, 404)}
        )
        memory.keep_visits(
            {"http://a.example": Visit(1_000, 5.0), "http://b.example": Visit(7, 0.25)}
        )
        memory.keep_visits({"http://a.example": Visit(2_000, 1.5)})
    finally:
        memory.close()
    # Another process (a store opened again) finds them.
    again = open_host_memory(store_factory())
    try:
        assert again.robots(["http://a.example:80", "http://c.example"]) == {
            "http://a.example:80": record
        }
        assert again.robots(["https://b.example"])["https://b.example"].status == 404
        visits = again.visits(["http://a.example", "http://b.example", "http://c.example"])
        assert visits == {"http://a.example": Visit(2_000, 1.5), "http://b.example": Visit(7, 0.25)}
        assert visits["http://a.example"].ready_at() == 3_500
    finally:
        again.close()


def test_the_embedded_memory_keeps_the_later_visit(embedded_store_factory):
    """Two processes writing a queue's last request: the later one stays, whichever writes last."""
    store = embedded_store_factory()
    store.create()
    memory = open_host_memory(store)
    try:
        memory.keep_visits({"http://a.example": Visit(2_000, 1.0)})
        memory.keep_visits({"http://a.example": Visit(1_000, 9.0)})
        assert memory.visits(["http://a.example"]) == {"http://a.example": Visit(2_000, 1.0)}
    finally:
        memory.close()


def build_site(site: GraphSite) -> list[str]:
    """On each of two hosts, a home page linking to three pages of both hosts, so that each of
    two rounds fetches pages of both; return the seeds."""
    below = ("/a", "/b", "/c")
    for host in (H2, H3):
        links = tuple(site.url(h, p) for h in (H2, H3) for p in below)
        site.put(site.url(host, "/"), Page(links, title=f"{host} home"))
        for path in below:
            site.put(site.url(host, path), Page((), title=f"{host}{path}"))
    return [site.url(H2, "/"), site.url(H3, "/")]


@pytest.mark.slow
def test_no_gap_below_the_delay_across_rounds_and_processes(
    embedded_store_factory, tmp_path, monkeypatch, capfd
):
    """Two rounds of ``nutchy crawl -numFetchers 2``: each round's fetch in new processes, which
    find robots.txt and each host's last request in the host memory."""
    store = embedded_store_factory()
    store.create()
    store.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    robots = {
        H2: "User-agent: *\nDisallow: /nothing\n",
        H3: f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n",
    }
    with GraphSite((H2, H3), robots=robots) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"{url}\n" for url in build_site(site)))
        settings = {
            **store_settings(store),
            "NUTCH_FETCHER_SERVER_DELAY": DELAY,
            "NUTCH_FETCHER_FLUSH_INTERVAL": 0.5,
            "TELNETCONSOLE_ENABLED": False,
        }
        options = [x for name, value in settings.items() for x in ("-s", f"{name}={value}")]
        code = main(["crawl", str(seeds), "-rounds", "2", "-numFetchers", "2", *options])
        log = capfd.readouterr().err
        assert code == 0, log
        assert re.findall(r"round (\d): fetch: (\d+) URLs", log) == [("1", "2"), ("2", "6")], log
        for host, delay in ((H2, DELAY), (H3, CRAWL_DELAY)):
            arrivals = site.arrivals(host)
            # robots.txt once in two rounds, by the first process; then every page once
            assert arrivals[0][0].endswith("/robots.txt")
            assert [url.endswith("/robots.txt") for url, _ in arrivals].count(True) == 1
            assert len(arrivals) == 1 + 4
            gaps = [b - a for (_, a), (_, b) in itertools.pairwise(arrivals)]
            assert min(gaps) >= delay, (host, gaps)
