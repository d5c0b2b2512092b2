"""Workers on scrapyd: real ``scrapyd`` daemons on 127.0.0.1, this repository's project deployed
to them with ``scrapyd-deploy``, and ``nutch`` jobs started through ``schedule.json``.

Two daemons on two ports stand in for two machines. The egg is built once for the module, as
a user builds it (``scrapyd-deploy --build-egg`` in the project's folder), and uploaded to each
daemon with ``scrapyd-deploy TARGET --egg``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sites import Site, prepare_batch

from nutchy.core.generate import partition_for
from nutchy.core.status import CrawlStatus
from nutchy.store.hbase import HBaseStore
from nutchy.store.table import WebTable

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
PROJECT = "nutchy"
#: What scrapyd-deploy packs: the project's files, and pyproject.toml, which must not get in
#: the way of its setup.py.
PROJECT_FILES = ("scrapy.cfg", "setup.py", "pyproject.toml", "settings", "spiders")
H2, H3, H4, H5 = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment() -> dict[str, str]:
    # Scrapy sets SCRAPY_SETTINGS_MODULE in this process when it finds the repository's
    # scrapy.cfg; a daemon's jobs take theirs from the egg.
    return {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}


class Scrapyd:
    """A ``scrapyd`` daemon on a free 127.0.0.1 port, with its configuration, eggs, logs and
    databases in *root* (scrapyd reads ``scrapyd.conf`` from the folder it runs in)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        root.mkdir(parents=True)
        (root / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {self.port}\n"
            f"eggs_dir = {root / 'eggs'}\n"
            f"logs_dir = {root / 'logs'}\n"
            f"dbs_dir = {root / 'dbs'}\n"
            "items_dir =\n"
            "max_proc = 2\n"
            "poll_interval = 0.2\n",
            encoding="utf-8",
        )
        self.output = (root / "scrapyd.out").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scrapyd"],
            cwd=root,
            env=environment(),
            stdout=self.output,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.get("daemonstatus.json")["status"] == "ok":
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scrapyd did not start: {self.daemon_log()}")
            time.sleep(0.1)

    def get(self, endpoint: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(self.url + endpoint + query, timeout=30) as answer:
            return json.load(answer)

    def post(self, endpoint: str, fields: list[tuple[str, str]]) -> dict:
        data = urllib.parse.urlencode(fields).encode()
        with urllib.request.urlopen(self.url + endpoint, data=data, timeout=60) as answer:
            return json.load(answer)

    def schedule(self, *, args: dict[str, str], settings: dict[str, object]) -> str:
        fields = [("project", PROJECT), ("spider", "nutch"), *args.items()]
        fields += [("setting", f"{name}={value}") for name, value in settings.items()]
        answer = self.post("schedule.json", fields)
        assert answer["status"] == "ok", answer
        return str(answer["jobid"])

    def wait_finished(self, jobs: set[str], timeout: float = 90) -> dict[str, dict]:
        """The ``listjobs.json`` entries of *jobs* once all are finished."""
        deadline = time.monotonic() + timeout
        while True:
            finished = {j["id"]: j for j in self.get("listjobs.json", project=PROJECT)["finished"]}
            if jobs <= finished.keys():
                return {job: finished[job] for job in jobs}
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs {jobs} not finished: {self.daemon_log()[-3000:]}")
            time.sleep(0.2)

    def job_log(self, job: str) -> str:
        return (self.root / "logs" / PROJECT / "nutch" / f"{job}.log").read_text("utf-8")

    def daemon_log(self) -> str:
        self.output.flush()
        return (self.root / "scrapyd.out").read_text("utf-8", "replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.output.close()


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    """This repository's Scrapy project, copied as scrapyd-deploy sees it."""
    root = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    return root


def scrapyd_deploy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("scrapyd-deploy")), *args]
    return subprocess.run(
        command,
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def egg(project_copy) -> Path:
    """The egg scrapyd-deploy builds of this repository's project."""
    path = project_copy.parent / "nutchy-project.egg"
    built = scrapyd_deploy("--build-egg", str(path), cwd=project_copy)
    assert built.returncode == 0, built.stderr
    return path


@pytest.fixture(scope="module")
def daemons(tmp_path_factory, project_copy, egg) -> Iterator[tuple[Scrapyd, Scrapyd]]:
    """Two daemons, each with the project deployed by ``scrapyd-deploy TARGET --egg``."""
    root = tmp_path_factory.mktemp("scrapyd")
    pair = (Scrapyd(root / "a"), Scrapyd(root / "b"))
    try:
        for daemon in pair:
            daemon.wait_ready()
        # The deploy targets, as a user writes them in scrapy.cfg.
        with (project_copy / "scrapy.cfg").open("a", encoding="utf-8") as cfg:
            for name, daemon in zip("ab", pair, strict=True):
                cfg.write(f"\n[deploy:{name}]\nurl = {daemon.url}\nproject = {PROJECT}\n")
        for name in "ab":
            deployed = scrapyd_deploy(name, "--egg", str(egg), "--version", "1", cwd=project_copy)
            assert deployed.returncode == 0, deployed.stderr
            assert '"status": "ok"' in deployed.stdout, deployed.stdout
            assert '"spiders": 2' in deployed.stdout, deployed.stdout
        yield pair
    finally:
        for daemon in pair:
            daemon.stop()


def test_the_egg_of_this_repository_carries_the_project_and_its_settings_entry_point(egg):
    with zipfile.ZipFile(egg) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("EGG-INFO/entry_points.txt").decode()
    assert "[scrapy]\nsettings = settings" in entry_points
    assert {"settings/__init__.py", "spiders/__init__.py"} <= names
    assert not any(name.startswith("nutchy/") for name in names)  # installed beside scrapyd


def table_settings(store: HBaseStore) -> dict[str, object]:
    """The settings of a job on *store*'s table."""
    return {
        "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
        "NUTCH_HBASE_HOST": store.host,
        "NUTCH_HBASE_PORT": store.port,
        "NUTCH_HBASE_TRANSPORT": store.transport,
        "NUTCH_HBASE_PROTOCOL": store.protocol,
        "NUTCH_STORAGE_CRAWL_ID": store.table_name.removesuffix("_webpage"),
    }


#: Settings of the test jobs: no politeness delay, queues by IP (the hosts are addresses).
FAST = {
    "NUTCH_FETCHER_SERVER_DELAY": 0,
    "NUTCH_FETCHER_QUEUE_MODE": "byIP",
    "TELNETCONSOLE_ENABLED": False,
}


def test_two_daemons_fetch_one_batch_on_hbase_in_two_partitions(
    daemons, hbase_address, hbase_options
):
    crawl_id = f"scrapyd{os.getpid()}"
    host, port = hbase_address
    store = HBaseStore(host, port, crawl_id=crawl_id, timeout=5000, **hbase_options)
    hosts = (H2, H3, H4, H5)
    try:
        with Site(hosts) as site:
            urls = [site.url(h, f"/page/{i}") for h in hosts for i in range(3)]
            parts = {url: partition_for(url.split("/")[2].split(":")[0], 2) for url in urls}
            assert set(parts.values()) == {0, 1}, "pick hosts that fall in both partitions"
            table = prepare_batch(store, urls, batch="b1", num_fetchers=2)
            settings = {**table_settings(store), **FAST}
            jobs = [
                daemon.schedule(args={"batch": "b1", "partition": f"{k}/2"}, settings=settings)
                for k, daemon in enumerate(daemons)
            ]
            finished = [
                daemon.wait_finished({job})[job] for daemon, job in zip(daemons, jobs, strict=True)
            ]

            # every URL fetched once, by the daemon of its partition
            for h in hosts:
                pages = [p for p in site.paths(h) if p != "/robots.txt"]
                assert sorted(pages) == [f"/page/{i}" for i in range(3)], h
            fields = ["status", "markers"]
            for url in urls:
                page = table.get(url, fields)
                assert page.status == CrawlStatus.FETCHED, url
                assert page.markers["_ftcmrk_"] == "b1", url
        for k, (daemon, job, entry) in enumerate(zip(daemons, jobs, finished, strict=True)):
            assert entry["spider"] == "nutch" and entry["end_time"]
            log = daemon.job_log(job)
            assert (
                f"The web table: table {crawl_id}_webpage on the HBase Thrift server"
                f" {host}:{port} (nutchy.store.hbase.HBaseStore)"
            ) in log
            assert f"Fetching batch b1 partition {k}/2 from {crawl_id}_webpage" in log
            mine = sum(1 for p in parts.values() if p == k)
            assert f"Fetched batch b1 (finished): {mine} rows" in log
            assert "'finish_reason': 'finished'" in log
            assert " ERROR: " not in log
            assert f"Process finished: project='{PROJECT}' spider='nutch' job='{job}'" in (
                daemon.daemon_log()
            )
    finally:
        store.drop()
        store.close()


def test_a_job_with_a_relative_crawl_dir_fails_at_start_where_scrapyd_shows_it(daemons):
    daemon = daemons[0]
    job = daemon.schedule(args={}, settings={"TELNETCONSOLE_ENABLED": False})
    entry = daemon.wait_finished({job})[job]
    assert entry["end_time"]
    log = daemon.job_log(job)
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, log
    (line,) = errors
    assert "The nutch spider cannot start: NUTCH_CRAWL_DIR 'crawl' is relative" in line
    assert "the project runs from an egg" in line
    assert "setting=NUTCH_CRAWL_DIR=/srv/crawl" in line
    assert "Traceback" not in log
    assert not (daemon.root / "crawl").exists()  # nothing landed in scrapyd's folder
    assert f"Process died: exitstatus=1 project='{PROJECT}' spider='nutch' job='{job}'" in (
        daemon.daemon_log()
    )


def test_a_job_injects_its_seeds_and_crawls_a_round_on_hbase(daemons, hbase_address, hbase_options):
    crawl_id = f"seeds{os.getpid()}"
    host, port = hbase_address
    store = HBaseStore(host, port, crawl_id=crawl_id, timeout=5000, **hbase_options)
    daemon = daemons[1]
    try:
        with Site((H2, H3)) as site:
            urls = [site.url(H2, "/page/a"), site.url(H3, "/page/b"), site.url(H3, "/page/c")]
            job = daemon.schedule(
                args={"seeds": ",".join(urls), "rounds": "1"},
                settings={**table_settings(store), **FAST},
            )
            daemon.wait_finished({job})
            log = daemon.job_log(job)
            assert f"The web table: table {crawl_id}_webpage on the HBase Thrift server" in log
            assert (
                f"Injected 3 URLs into {crawl_id}_webpage from 3 seed lines given to the spider"
            ) in log
            assert "Round 1 of 1: batch" in log
            assert "Updated batch" in log  # the job fetched the batch whole: updatedb ran
            assert "'finish_reason': 'finished'" in log and " ERROR: " not in log
            table = WebTable(store)
            for url in urls:
                assert table.get(url, ["status"]).status == CrawlStatus.FETCHED, url
            assert sorted(site.paths(H3)) == ["/page/b", "/page/c", "/robots.txt"]
    finally:
        if store.exists():
            store.drop()
        store.close()


def test_two_daemons_share_one_batch_through_the_redis_frontier(
    daemons, hbase_address, hbase_options, redis_server, redis_client
):
    """The two jobs lease the batch's queues from Redis (``NUTCH_FRONTIER = "redis"``) instead of
    splitting it by partitions: each URL is fetched once, each host at its delay across both."""
    crawl_id = f"redis{os.getpid()}"
    host, port = hbase_address
    store = HBaseStore(host, port, crawl_id=crawl_id, timeout=5000, **hbase_options)
    hosts = tuple(f"127.0.0.{i}" for i in range(2, 10))  # eight hosts
    delay = 0.4
    try:
        with Site(hosts) as site:
            # One worker alone would take 8 / 2 x (4 - 1) x 0.4 s = 4.8 s at least: the second,
            # started at the same time, has queues left to lease.
            urls = [site.url(h, f"/page/{i}") for h in hosts for i in range(4)]
            table = prepare_batch(store, urls, batch="b2")
            settings = {
                **table_settings(store),
                **FAST,
                "NUTCH_FETCHER_SERVER_DELAY": delay,
                "NUTCH_FRONTIER": "redis",
                "REDIS_URL": redis_server.url,
                "CONCURRENT_REQUESTS": 2,
                "NUTCH_FETCHER_QUEUE_DEPTH_MULTIPLIER": 1,
            }
            jobs = [daemon.schedule(args={"batch": "b2"}, settings=settings) for daemon in daemons]
            for daemon, job in zip(daemons, jobs, strict=True):
                daemon.wait_finished({job}, timeout=120)

            for h in hosts:
                pages = [p for p in site.paths(h) if p != "/robots.txt"]
                assert sorted(pages) == [f"/page/{i}" for i in range(4)], h
                assert min(site.page_gaps(h)) >= delay * 0.95, h  # across both workers
            for url in urls:
                page = table.get(url, ["status", "markers"])
                assert page.status == CrawlStatus.FETCHED, url
        logs = [daemon.job_log(job) for daemon, job in zip(daemons, jobs, strict=True)]
        for log in logs:
            assert f"The web table: table {crawl_id}_webpage" in log
            assert " ERROR: " not in log, log[-3000:]
            assert "'finish_reason': 'finished'" in log
            assert "'nutch/fetch/leases': " in log, log[-3000:]  # both leased queues
        assert sum("Updated batch b2" in log for log in logs) == 1  # one updatedb, by one job
    finally:
        store.drop()
        store.close()
