"""Politeness of ``scrapy crawl nutch``, measured by the servers: delays between requests to one
host never below the delay, robots.txt Crawl-delay, deferral on a robots.txt 5xx, Retry-After,
and hosts progressing in parallel, a slow one stalling none of the others."""

from __future__ import annotations

import statistics

import pytest
from sites import FetchProject, Site, prepare_batch

from nutchy.core.status import CrawlStatus, ProtocolStatusCode

H2, H3, H4, H5 = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"


@pytest.fixture
def store(store_factory):
    """These tests measure timing, not storage: the embedded store only."""
    store = store_factory()
    store.create()
    return store


@pytest.fixture
def store_factory(embedded_store_factory):
    """Crawl mechanics, not storage: the embedded store only."""
    return embedded_store_factory


def test_delays_and_crawl_delay_are_honoured_and_hosts_progress_together(store, tmp_path):
    robots = {
        H3: (200, "User-agent: *\nCrawl-delay: 1\n"),
        H4: (200, "User-agent: *\nCrawl-delay: 100\n"),  # above fetcher.max.crawl.delay (30)
    }
    with Site((H2, H3, H4), robots=robots) as site:
        urls = [site.url(H2, f"/page/{i}") for i in range(6)]
        urls += [site.url(H3, f"/page/{i}") for i in range(3)]
        urls += [site.url(H4, f"/page/{i}") for i in range(2)]
        table = prepare_batch(store, urls)
        result = FetchProject(tmp_path, store, NUTCH_FETCHER_SERVER_DELAY=0.4).crawl()
        assert result.returncode == 0, result.log[-3000:]

        delay_gaps = site.page_gaps(H2)
        crawl_delay_gaps = site.page_gaps(H3)
        assert len(delay_gaps) == 5 and len(crawl_delay_gaps) == 2
        assert min(delay_gaps) >= 0.4  # never below the delay, no jitter
        assert statistics.median(delay_gaps) < 0.4 + 0.25  # and not much above it
        assert min(crawl_delay_gaps) >= 1.0
        # The two hosts were fetched at the same time, not one after the other.
        h2 = [h.at for h in site.hits[H2] if h.path != "/robots.txt"]
        h3 = [h.at for h in site.hits[H3] if h.path != "/robots.txt"]
        assert h3[0] < h2[-1] and h2[0] < h3[-1]
        # A Crawl-delay above fetcher.max.crawl.delay: ROBOTS_DENIED, nothing requested.
        assert site.paths(H4) == ["/robots.txt"]
        for i in range(2):
            page = table.get(site.url(H4, f"/page/{i}"), ["status", "protocol_status"])
            assert page.status == CrawlStatus.GONE
            assert page.protocol_status.code == ProtocolStatusCode.ROBOTS_DENIED
        assert result.stats["nutch/fetch/robots/crawl_delay_too_long"] == 2


def test_a_slow_host_never_stalls_the_others(store, tmp_path):
    with Site((H2, H3, H4)) as site:
        urls = [site.url(H2, f"/slow?s=1.5&n={i}") for i in range(2)]
        urls += [site.url(host, f"/page/{i}") for host in (H3, H4) for i in range(15)]
        prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, CONCURRENT_REQUESTS=2)
        result = project.crawl()
        assert result.returncode == 0, result.log[-3000:]
        slow = [h.at for h in site.hits[H2] if h.path.startswith("/slow")]
        fast = [h.at for host in (H3, H4) for h in site.hits[host] if "/page/" in h.path]
        assert len(slow) == 2 and len(fast) == 30
        # One slot serves the slow host, one request at a time; the other serves everyone else,
        # who are done long before the slow host's second page even starts.
        assert max(fast) < slow[1]
        assert slow[1] - slow[0] >= 1.5


def test_robots_5xx_defers_the_host_and_retry_after_slows_it_down(store, tmp_path):
    robots = {H2: (503, "busy"), H3: (403, "forbidden")}
    with Site((H2, H3, H4, H5), robots=robots) as site:
        deferred = [site.url(H2, f"/page/{i}") for i in range(3)]
        forbidden = [site.url(H3, f"/page/{i}") for i in range(2)]
        throttled = [site.url(H4, "/status/503?retry_after=1")]
        throttled += [site.url(H4, f"/z/page/{i}") for i in range(2)]
        dropped = [site.url(H5, "/status/429?retry_after=120")]
        dropped += [site.url(H5, f"/z/page/{i}") for i in range(2)]
        table = prepare_batch(store, deferred + forbidden + throttled + dropped)
        project = FetchProject(
            tmp_path,
            store,
            NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_DELAY=300,
            NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_RETRIES=1,
            NUTCH_HTTP_ROBOTS_403_ALLOW=False,
        )
        result = project.crawl()
        assert result.returncode == 0, result.log[-3000:]

        # robots.txt 503: the host is asked again after the deferral delay, then left for a
        # later fetch; its pages are neither requested nor recorded.
        assert site.paths(H2) == ["/robots.txt", "/robots.txt"]
        gaps = [b.at - a.at for a, b in zip(site.hits[H2], site.hits[H2][1:], strict=False)]
        assert gaps[0] >= 0.3
        for url in deferred:
            assert "_ftcmrk_" not in table.get(url, ["markers"]).markers
        # robots.txt 403 with http.robots.403.allow=false: everything denied.
        assert site.paths(H3) == ["/robots.txt"]
        for url in forbidden:
            page = table.get(url, ["protocol_status"])
            assert page.protocol_status.code == ProtocolStatusCode.ROBOTS_DENIED
        # 503 with Retry-After: 1 → the host's next request a second later at the earliest.
        h4 = [h for h in site.hits[H4] if h.path != "/robots.txt"]
        assert h4[0].path.startswith("/status/503") and len(h4) == 3
        assert h4[1].at - h4[0].at >= 1.0
        # 429 asking for longer than fetcher.max.crawl.delay: the rest of the host is left.
        assert [h.path for h in site.hits[H5] if h.path != "/robots.txt"] == [
            "/status/429?retry_after=120"
        ]
        assert table.get(dropped[0], ["status"]).status == CrawlStatus.RETRY
        for url in dropped[1:]:
            assert "_ftcmrk_" not in table.get(url, ["markers"]).markers
        stats = result.stats
        assert stats["nutch/fetch/queue_dropped/robots_deferred"] == 1
        assert stats["nutch/fetch/queue_dropped/retry_after"] == 1
        assert stats["nutch/fetch/backoff/retry_after"] == 1
        assert "Deferring http://127.0.0.2" in result.log


def test_pages_waiting_together_for_robots_txt(store, tmp_path):
    """Several requests of one host (fetcher.threads.per.queue = 4) wait for the same robots.txt,
    fetched once; each then gets the host's verdict."""
    with Site((H2,), robots={H2: (200, "User-agent: *\nDisallow: /private\n")}) as site:
        public = [site.url(H2, f"/page/{i}") for i in range(4)]
        private = [site.url(H2, f"/private/page/{i}") for i in range(4)]
        table = prepare_batch(store, public + private)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_THREADS_PER_QUEUE=4)
        result = project.crawl()
        assert result.returncode == 0, result.log[-3000:]
        assert site.count(H2, "/robots.txt") == 1
        assert sorted(p for p in site.paths(H2) if p != "/robots.txt") == [
            f"/page/{i}" for i in range(4)
        ]
        for url in public:
            assert table.get(url, ["status"]).status == CrawlStatus.FETCHED
        for url in private:
            code = table.get(url, ["protocol_status"]).protocol_status.code
            assert code == ProtocolStatusCode.ROBOTS_DENIED
