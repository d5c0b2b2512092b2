"""``nutchy crawl`` fetching in its own process (``NUTCH_CRAWL_FETCH_IN_PROCESS``, the default
with one fetcher): no fetch child runs, the table ends as a crawl with a fetch child leaves it on
both stores, Ctrl-C leaves a batch that the same command finishes, and a store gone away during
the fetch stops the crawl as it does with a child.

The crawls run as commands: inside the test process the crawl fetches in a child (conftest.py),
since Twisted's reactor runs once in a process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sites import graph_site

from nutchy.config import load_settings
from nutchy.core.scoring import read_cash
from nutchy.core.status import CrawlStatus
from nutchy.store import open_table
from nutchy.testing.hbase_server import HBaseThriftServer

pytestmark = pytest.mark.slow

#: A home page and 8 pages that link to it and to each other: 9 pages in 2 rounds.
GRAPH: dict[str, tuple[str, list[str]]] = {"/": ("Home", [f"/p{i}" for i in range(8)])}
for _i in range(8):
    GRAPH[f"/p{_i}"] = (f"P{_i}", ["/", f"/p{(_i + 1) % 8}", f"/p{(_i + 3) % 8}"])


def command(crawl_dir: Path, seeds: Path, *settings: str) -> list[str]:
    options = [f"NUTCH_CRAWL_DIR={crawl_dir}", "NUTCH_FETCHER_SERVER_DELAY=0", *settings]
    return [
        *(sys.executable, "-m", "nutchy", "crawl", str(seeds), "-rounds", "10"),
        *(item for setting in options for item in ("-s", setting)),
    ]


def children(pid: int) -> list[str]:
    """The command lines of *pid*'s children (those of all its threads)."""
    pids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids.extend((task / "children").read_text().split())
        except OSError:
            continue
    lines = []
    for child in pids:
        try:
            lines.append(Path(f"/proc/{child}/cmdline").read_bytes().decode().replace("\0", " "))
        except OSError:
            continue
    return lines


def table_of(crawl_dir: Path, **settings: object) -> dict[str, tuple[object, ...]]:
    """Each row's path -> status, score, cash, distance, inlinks, title, outlinks and the marks
    left."""
    loaded = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir), **settings}, project=False)
    with open_table(loaded) as table:
        return {
            page.url.split("/", 3)[3]: (
                page.status,
                page.score,
                read_cash(page.metadata),
                page.markers.get("dist"),
                dict(page.inlinks),
                page.title,
                sorted(page.outlinks),
                sorted(m for m in page.markers if m in ("_gnmrk_", "_ftcmrk_", "__prsmrk__")),
            )
            for page in table.scan()
        }


class Watch:
    """Notes, at each page asked for, the command lines of the crawl's children; runs *then*
    at the *at*-th page (robots.txt aside)."""

    def __init__(self) -> None:
        self.crawl: subprocess.Popen[str] | None = None
        self.seen: list[str] = []
        self.pages = 0
        self.at: int | None = None
        self.then = lambda crawl: None
        self.done = threading.Event()

    def __call__(self, path: str) -> None:
        if self.crawl is None or path == "/robots.txt":
            return
        self.seen.extend(children(self.crawl.pid))
        self.pages += 1
        if self.pages == self.at:
            self.then(self.crawl)
            self.done.set()
            time.sleep(0.2)  # the page is answered after the crawl heard of it

    def run(self, cmd: list[str], timeout: float = 60) -> tuple[int, str]:
        self.seen, self.pages = [], 0
        self.done.clear()
        self.crawl = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        try:
            _, err = self.crawl.communicate(timeout=timeout)
        finally:
            self.crawl.kill()
            self.crawl.wait()
        code, self.crawl = self.crawl.returncode, None
        return code, err


@pytest.fixture(scope="module")
def site_and_watch():
    watch = Watch()
    with graph_site(GRAPH, on_request=watch) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", server, watch


@pytest.fixture
def seeds(tmp_path, site_and_watch, monkeypatch):
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "seeds.txt"
    path.write_text(f"{site_and_watch[0]}/\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_no_fetch_child_runs_and_the_table_is_the_one_a_fetch_child_makes(
    tmp_path, seeds, site_and_watch, store, request
):
    _, _, watch = site_and_watch
    settings: dict[str, object] = {}
    if store == "hbase":
        settings = dict(request.getfixturevalue("hbase_settings"))
    tables = {}
    for mode in ("true", "false"):
        crawl_dir = tmp_path / mode
        if store == "hbase":
            settings["NUTCH_STORAGE_CRAWL_ID"] = f"inproc{mode}{tmp_path.name[-8:]}"
        given = [f"{k}={v}" for k, v in settings.items()]
        cmd = command(crawl_dir, seeds, f"NUTCH_CRAWL_FETCH_IN_PROCESS={mode}", *given)
        code, err = watch.run(cmd)
        assert code == 0, err
        assert "stopped, nothing left to fetch" in err
        fetchers = [line for line in watch.seen if "nutchy._fetchrun" in line]
        if mode == "true":
            assert not fetchers, fetchers
            assert any("nutchy._parsework" in line for line in watch.seen)  # it was watching
            # the fetch's Scrapy log stays hidden, as a quiet child's
            for noise in ("Scrapy", "started (bot:", "Telnet", "Dumping Scrapy"):
                assert noise not in err, err
        else:
            assert fetchers and all("-rounds" in line for line in fetchers)
        assert err.count("pages parsed") == 2, err
        # In this process, the parse process reads the pages back for updatedb as it writes
        # their parses (a fetch child's keeps nothing: updatedb reads them all after the fetch).
        shared = re.findall(r"updatedb: (\d+) pages updated.*\((\d+) pages? updated from", err)
        if mode == "true":
            assert shared == [("1", "1"), ("8", "8")], err
        else:
            assert not shared, err
        tables[mode] = table_of(crawl_dir, **settings)
    assert len(tables["true"]) == len(GRAPH)
    assert all(row[0] == CrawlStatus.FETCHED and not row[-1] for row in tables["true"].values())
    assert tables["true"] == tables["false"]


def test_ctrl_c_during_the_fetch_leaves_a_batch_the_same_command_finishes(
    tmp_path, seeds, site_and_watch
):
    # SIGINT (Ctrl-C) at the 3rd page, in round 2: the fetch stops gracefully (writing the
    # outcomes it has), the crawl names the batch left and exits with 130; run again, it
    # finishes that batch first and ends with every page fetched once more at most.
    _, server, watch = site_and_watch
    cmd = command(tmp_path / "crawl", seeds, "NUTCH_FETCHER_FLUSH_SIZE=1")
    server.hits.clear()
    watch.at, watch.then = 3, lambda crawl: crawl.send_signal(signal.SIGINT)
    try:
        code, err = watch.run(cmd)
    finally:
        watch.at = None
    assert watch.done.is_set()
    assert code == 130, err
    lines = err.strip().splitlines()
    assert lines[-1] == "nutchy crawl: interrupted", err
    batch = re.search(r"round 2: batch (\S+), 8 URLs", err).group(1)
    assert f"nutchy crawl: round 2: interrupted; batch {batch} is left for" in err
    assert "round 2: parse" not in err and "Traceback" not in err
    assert not any("nutchy._fetchrun" in line for line in watch.seen)
    rows = table_of(tmp_path / "crawl")
    assert any("_gnmrk_" in row[-1] for row in rows.values())  # round 2 not updated

    code, err = watch.run(cmd)
    assert code == 0, err
    assert (
        f"round 1: batch {batch}, 8 URLs, left by a crawl that stopped: finishing its fetch" in err
    )
    assert "stopped, nothing left to fetch" in err
    rows = table_of(tmp_path / "crawl")
    assert len(rows) == len(GRAPH)
    assert all(row[0] == CrawlStatus.FETCHED and not row[-1] for row in rows.values()), rows
    fetched = [path for path in server.hits if path != "/robots.txt"]
    assert set(fetched) == set(GRAPH)
    assert len(fetched) - len(GRAPH) <= 3  # again: those in flight at the signal only


def test_a_store_gone_away_during_the_fetch_stops_the_crawl_as_with_a_child(
    tmp_path, seeds, site_and_watch
):
    # As tests/test_crawl_cycle.py's test with a fetch child: the HBase server stops at the 2nd
    # page (round 2); the crawl exits with 1 and names the batch to finish.
    _, _, watch = site_and_watch
    hbase = HBaseThriftServer()
    hbase.start()
    settings = [
        "NUTCH_STORAGE_DATA_STORE_CLASS=nutchy.store.hbase.HBaseStore",
        "NUTCH_HBASE_HOST=127.0.0.1",
        f"NUTCH_HBASE_PORT={hbase.port}",
        "NUTCH_HBASE_TIMEOUT=3000",
    ]
    watch.at, watch.then = 2, lambda crawl: hbase.stop()
    try:
        code, err = watch.run(command(tmp_path / "crawl", seeds, *settings))
    finally:
        watch.at = None
        hbase.stop()
    assert watch.done.is_set()
    assert code == 1, err
    lines = err.strip().splitlines()
    assert any(
        re.fullmatch(r"nutchy crawl: stopped, the fetch of batch \S+ failed \(exit code 1\)", line)
        for line in lines
    ), err
    batch = re.search(r"round 2: batch (\S+),", err).group(1)
    assert any(
        line.startswith(f"nutchy crawl: round 2: batch {batch} is left for the same nutchy crawl")
        for line in lines
    ), err
    assert "round 2: parse" not in err and "round 2: updatedb" not in err
    assert f"127.0.0.1:{hbase.port}" in err  # the fetch says which store failed
    assert "Traceback" not in err
    assert not any("nutchy._fetchrun" in line for line in watch.seen)


@pytest.mark.parametrize("at", ["inject:", "round 1: batch", "round 2: batch"])
def test_ctrl_c_before_the_fetch_opens_or_between_batches_ends_the_crawl_quietly(
    tmp_path, seeds, at
):
    # SIGINT while the fetch starts up (after inject: it waits for its first batch), as it is
    # given its first batch, or between two batches: the crawl exits with 130, and the fetch
    # ends with it, without leaving Scrapy's or asyncio's tasks half done.
    crawl = subprocess.Popen(command(tmp_path / "crawl", seeds), stderr=subprocess.PIPE, text=True)
    assert crawl.stderr is not None
    lines: list[str] = []
    try:
        for line in crawl.stderr:
            if at in line and not any(at in seen for seen in lines):
                crawl.send_signal(signal.SIGINT)
            lines.append(line)
        code = crawl.wait(timeout=30)
    finally:
        crawl.kill()
        crawl.wait()
        crawl.stderr.close()
    err = "".join(lines)
    assert code == 130, err
    assert lines[-1] == "nutchy crawl: interrupted\n", err
    assert "ERROR" not in err and "Traceback" not in err and "Task was destroyed" not in err


def test_the_crawl_with_v_shows_the_fetchs_scrapy_log(tmp_path, seeds):
    # At INFO, as a child's with -v, through the crawl's own log handler (its format).
    crawl_dir = tmp_path / "crawl"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "nutchy", "-v", "crawl", str(seeds), "-rounds", "1"),
            *("-s", f"NUTCH_CRAWL_DIR={crawl_dir}", "-s", "NUTCH_FETCHER_SERVER_DELAY=0"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "started (bot:" in done.stderr and "INFO: Fetched batch" in done.stderr
    assert " scrapy.core.engine INFO: Spider opened" in done.stderr  # not a child's [name]
    assert "nutchy crawl: round 1: fetch: 1 URLs fetched: 1 success;" in done.stderr
