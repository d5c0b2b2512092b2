"""Many workers, one batch: real ``scrapy crawl nutch`` processes sharing a batch through the Redis
frontier (``NUTCH_FRONTIER = "redis"``), a real redis-server, loopback HTTP servers that time every
request. What is checked: each URL fetched once, politeness across workers, the table one worker
would make, a worker killed, Redis away, and the bad starts."""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from graph_site import GraphSite, Page
from sites import NOW_MS, FetchProject, Site, parse_stats, prepare_batch

from nutchy.core.status import CrawlStatus
from nutchy.jobs.inject import InjectOptions, inject
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.table import WebTable
from nutchy.testing.redis_server import RedisServer, free_port

HOSTS = tuple(f"127.0.0.{i}" for i in range(2, 12))  # ten hosts


@pytest.fixture
def redis_url(redis_server, redis_client):
    """The session's Redis, emptied for the test."""
    return redis_server.url


class Workers:
    """``scrapy crawl nutch`` worker processes of one project, each logging to its own file."""

    def __init__(self, project: FetchProject, root: Path) -> None:
        self.project = project
        self.root = root
        self.procs: list[subprocess.Popen[str]] = []
        self.logs: list[Path] = []

    def start(self, n: int, batch: str | None = "b1", **args: str) -> None:
        for _ in range(n):
            i = len(self.procs)
            log = self.root / f"worker{i}.log"
            self.logs.append(log)
            with log.open("w") as out:
                self.procs.append(
                    subprocess.Popen(
                        self.project.command(batch, args, {"USER_AGENT": f"worker{i}"}),
                        cwd=self.root,
                        env=self.project.env(),
                        stdout=subprocess.DEVNULL,
                        stderr=out,
                        text=True,
                    )
                )

    def wait(self, timeout: float = 90) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(-9)
        return codes

    def log(self, i: int) -> str:
        return self.logs[i].read_text()

    def all_logs(self) -> str:
        return "\n".join(self.log(i) for i in range(len(self.logs)))

    def stats(self, i: int) -> dict[str, object]:
        return parse_stats(self.log(i))


def worker_project(root: Path, store, redis_url: str, **settings: object) -> FetchProject:
    return FetchProject(
        root,
        store,
        NUTCH_FRONTIER="redis",
        REDIS_URL=redis_url,
        # Small workers, so that a batch of ten hosts is shared between them.
        CONCURRENT_REQUESTS=2,
        NUTCH_FETCHER_QUEUE_DEPTH_MULTIPLIER=2,
        **settings,
    )


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(sorted(times))]


def table_state(table: WebTable) -> dict[str, tuple[object, ...]]:
    """What a crawl decides of each row: status, score, inlinks and outlinks."""
    return {
        p.key: (p.status, round(p.score, 6), dict(p.inlinks), dict(p.outlinks))
        for p in table.scan(["status", "score", "inlinks", "outlinks"])
    }


# --- sharing a batch -----------------------------------------------------------------------------


def build_graph(site: GraphSite) -> list[str]:
    """Four pages per host, each linking to the next page of its host, to the first page of the
    next host, and to a page nobody seeded (a new row at updatedb). Returns the seeds."""
    seeds = []
    for h, host in enumerate(HOSTS):
        following = HOSTS[(h + 1) % len(HOSTS)]
        for i in range(4):
            url = site.url(host, f"/p{i}")
            links = (site.url(host, f"/p{(i + 1) % 4}"), site.url(following, "/p0"))
            site.put(url, Page((*links, site.url(host, f"/new{i}")), title=f"{host} {i}"))
            seeds.append(url)
    return seeds


@pytest.mark.slow
def test_three_workers_fetch_each_url_once_politely_and_make_the_table_one_worker_makes(
    tmp_path, redis_url
):
    delay = 0.25
    settings = {"NUTCH_FETCHER_SERVER_DELAY": delay, "NUTCH_FETCHER_UPDATEDB": True}
    with GraphSite(HOSTS) as site:
        seeds = build_graph(site)
        shared = EmbeddedStore(tmp_path / "shared" / "crawl" / "webpage.sqlite")
        shared.create()
        prepare_batch(shared, seeds)
        workers = Workers(
            worker_project(tmp_path / "shared", shared, redis_url, **settings), tmp_path / "shared"
        )
        workers.start(3)
        assert workers.wait() == [0, 0, 0], workers.all_logs()[-5000:]
        fetched = site.exchanges()

        site.clear()
        single = EmbeddedStore(tmp_path / "single" / "crawl" / "webpage.sqlite")
        single.create()
        prepare_batch(single, seeds)
        alone = FetchProject(tmp_path / "single", single, **settings).crawl()
        assert alone.returncode == 0, alone.log[-3000:]

    # Every URL fetched exactly once, by whichever worker held its host.
    assert Counter(e.url for e in fetched) == dict.fromkeys(seeds, 1)
    by_worker = Counter(e.headers["User-Agent"] for e in fetched)
    assert len(by_worker) >= 2, by_worker  # the batch was shared
    # Politeness across workers: the servers never saw two requests closer than the delay.
    for host in HOSTS:
        times = [e.at for e in fetched if e.url.split("/")[2].split(":")[0] == host]
        assert min(gaps(times)) >= delay - 0.002, (host, gaps(times))
    # updatedb ran once, for all of them, and left the table one worker leaves.
    assert workers.all_logs().count("Updated batch b1") == 1
    assert table_state(WebTable(shared)) == table_state(WebTable(single))
    assert sum(1 for key in table_state(WebTable(single)) if "/new" in key) == 40
    shared.close()
    single.close()


# --- a worker killed -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing_and_only_its_rows_in_flight_come_twice(
    tmp_path, redis_url
):
    delay = 0.2
    with Site(HOSTS) as site:
        urls = [site.url(host, f"/page/{i}") for host in HOSTS for i in range(8)]
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        store.create()
        table = prepare_batch(store, urls)
        project = worker_project(
            tmp_path,
            store,
            redis_url,
            NUTCH_FETCHER_SERVER_DELAY=delay,
            NUTCH_FRONTIER_LEASE_TIMEOUT=3.0,
        )
        workers = Workers(project, tmp_path)
        workers.start(3)

        def requests_by(agent: str) -> int:
            return sum(
                1
                for host in HOSTS
                for hit in list(site.hits[host])
                if hit.headers.get("User-Agent") == agent and hit.path != "/robots.txt"
            )

        deadline = time.monotonic() + 60
        while requests_by("worker0") < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        workers.procs[0].send_signal(signal.SIGKILL)
        codes = workers.wait()
        hits = [
            (host, hit)
            for host in HOSTS
            for hit in list(site.hits[host])
            if hit.path != "/robots.txt"
        ]
    assert codes[0] == -signal.SIGKILL
    assert codes[1:] == [0, 0], workers.all_logs()[-5000:]
    # Nothing lost: every row has its fetch, written by one worker or another.
    assert all("_ftcmrk_" in table.get(u, ["markers"]).markers for u in urls)
    counts = Counter(f"http://{host}:{site.ports[host]}{hit.path}" for host, hit in hits)
    assert set(counts) == set(urls)
    twice = {url for url, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2
    # Only rows the dead worker had asked for came twice, and no more than it could hold.
    first = {}
    for host, hit in sorted(hits, key=lambda h: h[1].at):
        first.setdefault(f"http://{host}:{site.ports[host]}{hit.path}", hit.headers["User-Agent"])
    assert all(first[url] == "worker0" for url in twice), twice
    capacity = 2 * 2 + 2 * 5  # CONCURRENT_REQUESTS * depth, and twice NUTCH_FETCHER_FLUSH_SIZE
    assert len(twice) <= capacity
    # Its queues passed to the others after its lease expired, at their delay.
    for host in HOSTS:
        times = [hit.at for h, hit in hits if h == host]
        assert min(gaps(times)) >= delay - 0.002, (host, gaps(times))
    store.close()


# --- Redis away ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_redis_unreachable_for_20_s_mid_batch_workers_wait_say_so_and_go_on(tmp_path):
    redis = RedisServer()
    redis.start()
    try:
        with Site(HOSTS) as site:
            urls = [site.url(host, f"/page/{i}") for host in HOSTS for i in range(6)]
            store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
            store.create()
            table = prepare_batch(store, urls)
            project = worker_project(
                tmp_path,
                store,
                redis.url,
                NUTCH_FETCHER_SERVER_DELAY=0.3,
                # Renewals every 15 s, socket timeouts of 5 s: a lease renewed last just before
                # the outage still has 30 s to live, more than the 20 s Redis is away.
                NUTCH_FRONTIER_LEASE_TIMEOUT=45.0,
            )
            workers = Workers(project, tmp_path)
            workers.start(2)
            deadline = time.monotonic() + 60
            while sum(len(site.hits[h]) for h in HOSTS) < 15 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert redis.process is not None
            redis.process.send_signal(signal.SIGSTOP)  # it answers nothing, as if cut off
            stopped = sum(len(site.hits[h]) for h in HOSTS)
            time.sleep(20)
            at_20_s = sum(len(site.hits[h]) for h in HOSTS)
            redis.process.send_signal(signal.SIGCONT)
            back = time.monotonic()
            codes = workers.wait(120)
            resumed = min(
                (hit.at for h in HOSTS for hit in site.hits[h] if hit.at > back), default=None
            )
            counts = Counter(
                f"http://{h}:{site.ports[h]}{hit.path}"
                for h in HOSTS
                for hit in site.hits[h]
                if hit.path != "/robots.txt"
            )
    finally:
        redis.close()
    assert codes == [0, 0], workers.all_logs()[-5000:]
    assert all("_ftcmrk_" in table.get(u, ["markers"]).markers for u in urls)
    assert set(counts) == set(urls)
    assert max(counts.values()) == 1  # the leases outlived the outage: nothing came twice
    assert at_20_s < len(urls) + len(HOSTS)  # the outage came mid-batch (robots.txt counted)
    assert resumed is not None
    print(
        f"stopped at {stopped} requests, {at_20_s} after 20 s;"
        f" first request {resumed - back:.2f} s after Redis came back"
    )
    logs = workers.all_logs()
    assert f"Redis at 127.0.0.1:{redis.port} cannot be reached" in logs
    assert "answers again after" in logs
    for i in range(2):
        assert workers.log(i).count("cannot be reached") <= 1  # said once per outage
    store.close()


@pytest.mark.slow
def test_redis_restarted_empty_mid_batch_the_batch_is_published_again_and_nothing_is_lost(
    tmp_path,
):
    delay = 0.3
    redis = RedisServer()
    redis.start()
    try:
        with Site(HOSTS) as site:
            urls = [site.url(host, f"/page/{i}") for host in HOSTS for i in range(8)]
            store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
            store.create()
            table = prepare_batch(store, urls)
            project = worker_project(
                tmp_path,
                store,
                redis.url,
                NUTCH_FETCHER_SERVER_DELAY=delay,
                NUTCH_FETCHER_UPDATEDB=True,
                NUTCH_FRONTIER_LEASE_TIMEOUT=6.0,  # renewals every 2 s, socket timeouts of 2 s
            )
            workers = Workers(project, tmp_path)
            workers.start(2)

            def hits() -> list[tuple[str, object]]:
                return [
                    (h, hit)
                    for h in HOSTS
                    for hit in list(site.hits[h])
                    if hit.path != "/robots.txt"
                ]

            deadline = time.monotonic() + 60
            while len(hits()) < 20 and time.monotonic() < deadline:
                time.sleep(0.02)
            before = len(hits())
            redis.restart()  # killed and started again on its port, empty (no persistence)
            codes = workers.wait(120)
            after = hits()
    finally:
        redis.close()
    assert codes == [0, 0], workers.all_logs()[-5000:]
    # Nothing lost: every URL was asked for, and every row is fetched in the table (updatedb ran
    # on the whole batch: it took the marks off).
    assert {u: table.get(u, ["status"]).status for u in urls} == dict.fromkeys(
        urls, CrawlStatus.FETCHED
    )
    counts = Counter(f"http://{h}:{site.ports[h]}{hit.path}" for h, hit in after)
    assert set(counts) == set(urls)
    twice = [url for url, n in counts.items() if n > 1]
    print(f"restarted after {before} of {len(urls)} requests; fetched twice: {len(twice)}")
    assert before < len(urls)  # mid-batch
    # At most the rows the workers had read and not acknowledged when Redis forgot the batch
    # come twice: per worker, its queued rows (CONCURRENT_REQUESTS * depth) and two flushes of
    # outcomes not yet written. (The batch is published again once the workers stopped fetching
    # from the leases Redis forgot and wrote what they fetched: measured, none come twice.)
    assert max(counts.values()) <= 2
    assert len(twice) <= 2 * (2 * 2 + 2 * 5)
    # Politeness held across the restart: a queue's new holder waited for the old one.
    for host in HOSTS:
        times = [hit.at for h, hit in after if h == host]
        assert min(gaps(times)) >= delay - 0.002, (host, gaps(times))
    for i in range(2):
        log = workers.log(i)
        # One line says what happened, whichever call of the worker found it out.
        assert log.count("no longer knows batch b1 (restarted without its data?)") == 1, log
        assert log.count("cannot be reached") <= 1, log
    assert workers.all_logs().count("Updated batch b1") == 1  # updatedb once, for both
    store.close()


# --- bad starts ----------------------------------------------------------------------------------


def test_redis_down_at_start_is_one_line_naming_it_and_exit_code_1(tmp_path):
    store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
    store.create()
    prepare_batch(store, ["http://127.0.0.2:9/a"])
    port = free_port()
    project = worker_project(tmp_path, store, f"redis://127.0.0.1:{port}/0")
    result = project.crawl(timeout=60)
    assert result.returncode == 1
    errors = [line for line in result.log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, result.log[-3000:]
    assert f"Redis at 127.0.0.1:{port} cannot be reached" in errors[0]
    assert "Traceback" not in result.log
    store.close()


def test_a_batch_never_generated_or_already_done_is_one_line_and_nothing_fetched(
    tmp_path, redis_url
):
    with Site(HOSTS[:2]) as site:
        urls = [site.url(host, f"/page/{i}") for host in HOSTS[:2] for i in range(3)]
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        store.create()
        prepare_batch(store, urls)
        project = worker_project(tmp_path, store, redis_url)

        never = project.crawl("nope")
        assert never.returncode == 0, never.log[-3000:]
        assert "Batch nope is empty (no row left to fetch) in Redis" in never.log
        assert not any(site.hits[h] for h in HOSTS[:2])

        first = project.crawl("b1")
        assert first.returncode == 0, first.log[-3000:]
        assert first.stats["nutch/fetch/written"] == len(urls)
        site.clear()
        again = project.crawl("b1")
        assert again.returncode == 0, again.log[-3000:]
        assert "Batch b1 is done in Redis" in again.log
        assert "nutch/fetch/written" not in again.stats
        assert not any(site.hits[h] for h in HOSTS[:2])
    store.close()


# --- rounds --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_workers_run_rounds_with_one_generate_and_one_updatedb_each(tmp_path, redis_url):
    with GraphSite(HOSTS) as site:
        seeds = build_graph(site)
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        store.create()
        table = WebTable(store)
        seeds_file = tmp_path / "seeds.txt"
        seeds_file.write_text("\n".join(seeds) + "\n")
        # Seeds only: the workers generate every batch.
        inject(table, [seeds_file], InjectOptions(2592000, 1.0, None), now=NOW_MS)
        project = worker_project(
            tmp_path, store, redis_url, NUTCH_FETCHER_UPDATEDB=True, NUTCH_FETCHER_SERVER_DELAY=0.1
        )
        workers = Workers(project, tmp_path)
        workers.start(2, batch=None, rounds="2")
        codes = workers.wait(120)
        fetched = site.exchanges()
    assert codes == [0, 0], workers.all_logs()[-5000:]
    logs = workers.all_logs()
    assert logs.count("Round 1 of 2: batch") == 1
    assert logs.count("Round 2 of 2: batch") == 1
    assert logs.count("Updated batch") == 2
    assert Counter(e.url for e in fetched).most_common(1)[0][1] == 1  # nothing fetched twice
    # Round 2 fetched the pages nobody seeded, found by round 1's updatedb.
    assert any("/new" in e.url for e in fetched)
    store.close()


# --- generate publishes --------------------------------------------------------------------------


def test_nutchy_generate_publishes_the_batch_and_a_worker_finds_it(
    tmp_path, redis_url, monkeypatch, capsys
):
    from nutchy.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    with Site(HOSTS[:3]) as site:
        urls = [site.url(host, f"/page/{i}") for host in HOSTS[:3] for i in range(3)]
        (tmp_path / "seeds.txt").write_text("\n".join(urls) + "\n")
        crawl = tmp_path / "crawl"
        options = ["-s", f"NUTCH_CRAWL_DIR={crawl}"]
        redis = [*options, "-s", "NUTCH_FRONTIER=redis", "-s", f"REDIS_URL={redis_url}"]
        assert main(["inject", str(tmp_path / "seeds.txt"), *options]) == 0
        assert main(["generate", "-batchId", "g1", *redis]) == 0
        err = capsys.readouterr().err
        assert "batch g1: 9 URLs published to Redis at 127.0.0.1:" in err

        store = EmbeddedStore(crawl / "webpage.sqlite")
        project = worker_project(tmp_path / "crawl", store, redis_url)
        result = project.crawl("g1")
        assert result.returncode == 0, result.log[-3000:]
        assert "Published batch" not in result.log  # Redis had it
        assert result.stats["nutch/fetch/written"] == 9
        assert sum(len(site.hits[h]) for h in HOSTS[:3]) == 9 + 3  # and robots.txt

        # Redis down: generate says so, the batch is in the table for a worker to publish.
        port = free_port()
        down = [*options, "-s", "NUTCH_FRONTIER=redis", "-s", f"REDIS_URL=redis://127.0.0.1:{port}"]
        assert main(["inject", str(tmp_path / "seeds.txt"), *options]) == 0
        code = main(["generate", "-batchId", "g2", "-adddays", "40", *down])
        err = capsys.readouterr().err
        assert code == 1
        assert f"batch g2 NOT published (Redis at 127.0.0.1:{port} cannot be reached" in err
        assert "scrapy crawl nutch -a batch=g2" in err
    store.close()
