"""Which rows ``scrapy crawl nutch`` fetches and how a fetch ends: the time limit, resume after a
kill -9 mid-batch, partitions, redirects followed within the fetch, and the garbage collector's threshold while it runs."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from sites import FetchProject, Site, prepare_batch

from nutchy.core.generate import partition_for
from nutchy.core.status import CrawlStatus, ProtocolStatusCode
from nutchy.store.hbase import HBaseStore
from nutchy.testing.hbase_server import HBaseThriftServer

H2, H3, H4 = "127.0.0.2", "127.0.0.3", "127.0.0.4"
P = ProtocolStatusCode


@pytest.fixture
def store_factory(embedded_store_factory):
    """Crawl mechanics, not storage: the embedded store (test_fetch_outcomes covers both)."""
    return embedded_store_factory


def fetched(table, urls):
    return {url for url in urls if "_ftcmrk_" in table.get(url, ["markers"]).markers}


def test_time_limit_stops_cleanly_and_resume_fetches_the_rest(store, tmp_path):
    with Site((H2,)) as site:
        urls = [site.url(H2, f"/page/{i:02d}") for i in range(20)]
        table = prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_SERVER_DELAY=0.5)
        first = project.crawl(timelimit="0.04")  # 2.4 s: 5 or 6 pages at one per 0.5 s
        assert first.returncode == 0, first.log[-3000:]
        done = fetched(table, urls)
        assert 3 <= len(done) <= 7
        assert first.stats["nutch/fetch/hit_by_time_limit"] > 0
        assert "the rest of the batch is left for -a resume=true" in first.log
        assert first.stats["finish_reason"] == "finished"

        second = project.crawl(resume="true", settings={"NUTCH_FETCHER_SERVER_DELAY": 0})
        assert second.returncode == 0, second.log[-3000:]
        assert fetched(table, urls) == set(urls)
        assert second.stats["nutch/fetch/skipped/resumed"] == len(done)
        pages = [p for p in site.paths(H2) if p != "/robots.txt"]
        assert sorted(pages) == sorted(f"/page/{i:02d}" for i in range(20))  # once each


def test_resume_after_kill_fetches_every_row_at_most_once_more(store, tmp_path):
    hosts = (H2, H3, H4)
    with Site(hosts) as site:
        urls = [site.url(host, f"/page/{i:03d}") for host in hosts for i in range(200)]
        table = prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, CONCURRENT_REQUESTS=8)
        process = project.start()
        deadline = time.monotonic() + 30
        while sum(len(site.paths(h)) for h in hosts) < 200 and time.monotonic() < deadline:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        assert process.returncode == -signal.SIGKILL
        before = fetched(table, urls)
        assert 0 < len(before) < len(urls)

        result = project.crawl(resume="true")
        assert result.returncode == 0, result.log[-3000:]
        assert fetched(table, urls) == set(urls)
        hits = dict.fromkeys(urls, 0)
        for host in hosts:
            for path in site.paths(host):
                if path != "/robots.txt":
                    hits[site.url(host, path)] += 1
        assert min(hits.values()) == 1
        assert max(hits.values()) <= 2
        # Fetched twice: only what was lost with the kill, at most 2 x the flush size (5) plus
        # CONCURRENT_REQUESTS (8).
        assert sum(n == 2 for n in hits.values()) <= 2 * 5 + 8
        for url in before:
            assert hits[url] == 1  # written before the kill: not fetched again


def test_partitions_split_a_batch(store, tmp_path):
    hosts = (H2, H3, H4)
    with Site(hosts) as site:
        urls = [site.url(host, f"/page/{i}") for host in hosts for i in range(3)]
        table = prepare_batch(store, urls, num_fetchers=2)
        parts = {url: partition_for(url.split("/")[2].split(":")[0], 2) for url in urls}
        assert set(parts.values()) == {0, 1}, "pick hosts that fall in both partitions"
        # Queues by IP: the hosts are addresses already, so nothing leaves the machine.
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_QUEUE_MODE="byIP")
        first = project.crawl(partition="0/2")
        assert first.returncode == 0, first.log[-3000:]
        assert fetched(table, urls) == {url for url, p in parts.items() if p == 0}
        assert first.stats["nutch/fetch/skipped/other_partition"] == sum(parts.values())
        hosts = {url.split("/")[2] for url, p in parts.items() if p == 0}
        assert first.stats["nutch/fetch/queues"] == len(hosts)
        second = project.crawl(partition="1/2")
        assert second.returncode == 0, second.log[-3000:]
        assert fetched(table, urls) == set(urls)


def test_redirects_followed_within_the_fetch(store, tmp_path):
    with Site((H2, H3)) as site:
        chain = site.url(H2, "/chain/2")
        loop = site.url(H2, "/loop/a")
        long_chain = site.url(H3, "/chain/6")
        table = prepare_batch(store, [chain, loop, long_chain])
        project = FetchProject(tmp_path, store, NUTCH_HTTP_REDIRECT_MAX=3)
        result = project.crawl()
        assert result.returncode == 0, result.log[-3000:]
        fields = ["status", "protocol_status", "markers", "outlinks", "batch_id", "fetch_interval"]

        # /chain/2 → /chain/1 → /chain/0: every hop fetched once and recorded on its own row.
        assert [p for p in site.paths(H2) if p.startswith("/chain")] == [
            "/chain/2",
            "/chain/1",
            "/chain/0",
        ]
        first = table.get(chain, fields)
        assert first.status == CrawlStatus.REDIR_PERM
        assert first.outlinks == {site.url(H2, "/chain/1"): ""}
        middle = table.get(site.url(H2, "/chain/1"), fields)
        assert middle.status == CrawlStatus.REDIR_PERM
        assert middle.markers["_gnmrk_"] == middle.markers["_ftcmrk_"] == "b1"
        assert middle.batch_id == "b1"
        assert middle.fetch_interval == 2592000  # a new row: the default interval
        end = table.get(site.url(H2, "/chain/0"), fields)
        assert end.status == CrawlStatus.FETCHED and end.markers["_ftcmrk_"] == "b1"

        # /loop/a → /loop/b → /loop/a: the loop is seen, /loop/a is not fetched again.
        assert [p for p in site.paths(H2) if p.startswith("/loop")] == ["/loop/a", "/loop/b"]
        b = table.get(site.url(H2, "/loop/b"), fields)
        assert b.status == CrawlStatus.REDIR_TEMP and b.outlinks == {loop: ""}

        # More hops than http.redirect.max: the last one is recorded as a redirect only.
        assert [p for p in site.paths(H3) if p != "/robots.txt"] == [
            "/chain/6",
            "/chain/5",
            "/chain/4",
            "/chain/3",
        ]
        last = table.get(site.url(H3, "/chain/3"), fields)
        assert last.protocol_status.code == P.MOVED
        assert last.outlinks == {site.url(H3, "/chain/2"): ""}
        assert table.get(site.url(H3, "/chain/2")) is None

        stats = result.stats
        assert stats["nutch/fetch/redirect/followed"] == 2 + 1 + 3
        assert stats["nutch/fetch/redirect/loop"] == 1
        assert stats["nutch/fetch/redirect/exceeded"] == 1


def test_a_write_that_fails_stops_the_fetch(tmp_path):
    # An HBase server of the test's own, stopped after the fifth page: the next write of
    # outcomes fails, and the fetch stops asking for pages it could not record.
    hbase = HBaseThriftServer()
    hbase.start()
    store = HBaseStore("127.0.0.1", hbase.port, crawl_id="writefail", timeout=3000)
    with Site((H2,)) as site:
        urls = [site.url(H2, f"/page/{i:02d}") for i in range(30)]
        prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_SERVER_DELAY=0.2)

        def stop_after_five_pages() -> None:
            while sum(p != "/robots.txt" for p in site.paths(H2)) < 5:
                time.sleep(0.01)
            hbase.stop()

        stopper = threading.Thread(target=stop_after_five_pages)
        stopper.start()
        run = project.crawl()
        stopper.join()
        pages = [p for p in site.paths(H2) if p != "/robots.txt"]
    assert run.returncode == 0, run.log[-3000:]  # scrapy crawl: the log and stats say it
    assert "Cannot write" in run.log and "the fetch stops taking URLs" in run.log
    assert "was not fetched whole (a write error)" in run.log
    assert run.stats["nutch/fetch/stopped_by_write_error"] > 0
    assert run.stats["nutch/store/put_error"] > 0
    assert run.stats["finish_reason"] == "nutch_store_error"
    # at one page every 0.2 s, the outcomes of pages 1-5 go in one write (flush size 5) and the
    # next write fails: a few pages more were asked, not the 30
    assert 5 <= len(pages) <= 12, pages


def test_a_fetch_stopped_by_a_signal_says_what_updates_its_batch(store, tmp_path):
    with Site((H2,)) as site:
        urls = [site.url(H2, f"/page/{i:02d}") for i in range(20)]
        prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_SERVER_DELAY=0.3)
        process = project.start()
        while sum(p != "/robots.txt" for p in site.paths(H2)) < 2:
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=60)
    assert "Received SIGTERM, shutting down gracefully" in log
    assert (
        "Batch b1 was not fetched whole (the crawl is closing): run nutchy updatedb b1 once the"
        " rest is fetched"
    ) in log
    assert "the rest is left for -a resume=true" in log


#: A project extension that notes the garbage collector's young threshold in the stats when the
#: spider opens (the scheduler has opened) and when it closes (the scheduler has closed); with
#: ``PROBE_GC_SET``, it sets a young threshold of its own once it has noted the first.
GC_PROBE = """
import gc

from scrapy import signals


class GcProbe:
    def __init__(self, crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def opened(self):
        self.stats.set_value("probe/gc_opened", gc.get_threshold())
        young = self.crawler.settings.getint("PROBE_GC_SET")
        if young:
            gc.set_threshold(young, *gc.get_threshold()[1:])

    def closed(self):
        self.stats.set_value("probe/gc_closed", gc.get_threshold())
"""


@pytest.mark.parametrize("theirs", [0, 4321])
def test_the_fetch_runs_with_its_own_garbage_collector_threshold(store, tmp_path, theirs):
    """The fetch's young threshold while it runs, the one it found put back at its close, or,
    when another component set one of its own meanwhile (*theirs*), that one kept."""
    (tmp_path / "gcprobe.py").write_text(GC_PROBE, encoding="utf-8")
    with Site((H2,)) as site:
        prepare_batch(store, [site.url(H2, f"/page/{i}") for i in range(3)])
        project = FetchProject(
            tmp_path,
            store,
            EXTENSIONS={"gcprobe.GcProbe": 0},
            NUTCH_FETCHER_GC_THRESHOLD=12345,
            PROBE_GC_SET=theirs,
        )
        done = project.crawl()
        assert done.returncode == 0, done.log[-3000:]
        assert done.stats["nutch/fetch/written"] == 3
        opened, closed = done.stats["probe/gc_opened"], done.stats["probe/gc_closed"]
        assert opened[0] == 12345
        if theirs:
            assert closed[0] == theirs  # the extension's, not the one found at the open
        else:
            assert closed[0] != 12345  # the interpreter's, put back
        assert opened[1:] == closed[1:]
