"""``nutchy crawl`` killed with SIGKILL (its fetch child, the crawl itself during a fetch, the crawl
during parse and updatedb), then run again with the same command: the table ends as the table of
a crawl that was never killed, row for row (status, score, inlinks), with no row left marked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sites import FetchProject, graph_site, prepare_batch

from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus
from nutchy.store import open_table
from nutchy.store.embedded import EmbeddedStore

pytestmark = pytest.mark.slow

#: A home page and 12 pages that link to it and to each other: 13 pages in 2 rounds.
GRAPH: dict[str, tuple[str, list[str]]] = {"/": ("Home", [f"/p{i}" for i in range(12)])}
for _i in range(12):
    GRAPH[f"/p{_i}"] = (f"P{_i}", ["/", f"/p{(_i + 1) % 12}", f"/p{(_i + 5) % 12}"])


def command(crawl_dir: Path, seeds: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nutchy",
        "crawl",
        str(seeds),
        "-rounds",
        "10",
        "-s",
        f"NUTCH_CRAWL_DIR={crawl_dir}",
        "-s",
        "NUTCH_FETCHER_SERVER_DELAY=0",
        "-s",
        # outcomes written one by one: what a kill loses is the page in flight
        "NUTCH_FETCHER_FLUSH_SIZE=1",
    ]


def table_of(crawl_dir: Path) -> dict[str, tuple[object, ...]]:
    """Each row's URL -> status, score, inlinks and markers (the generate, fetch and parse marks
    are gone from a finished crawl's rows)."""
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir)}, project=False)
    with open_table(settings) as table:
        return {
            page.url.split("/", 3)[3]: (
                page.status,
                page.score,
                dict(page.inlinks),
                sorted(m for m in page.markers if m in ("_gnmrk_", "_ftcmrk_", "__prsmrk__")),
            )
            for page in table.scan()
        }


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(p) for p in path.read_text().split()]
    except OSError:
        return []


def batch_fetch(pid: int) -> bool:
    """Whether *pid* runs ``python -m nutchy._fetchrun BATCH ...``, a fetch of one batch."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return False
    return "nutchy._fetchrun" in args and "-rounds" not in args


class Killer:
    """Kills, from the site's request hook, the crawl or its fetch child when the *n*-th page
    is asked for."""

    def __init__(self) -> None:
        self.crawl: subprocess.Popen[bytes] | None = None
        self.at: int | None = None
        self.target = "child"
        self.seen = 0
        self.killed = threading.Event()

    def __call__(self, path: str) -> None:
        if path == "/robots.txt" or self.crawl is None or self.at is None:
            return
        self.seen += 1
        if self.seen != self.at:
            return
        victims = children(self.crawl.pid) if self.target == "child" else [self.crawl.pid]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        self.killed.set()
        time.sleep(0.2)  # the page is answered to a process that is gone


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def site_and_killer():
    killer = Killer()
    with graph_site(GRAPH, on_request=killer) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", server, killer


def test_sigkill_anywhere_then_the_same_command_makes_the_table_of_an_unkilled_crawl(
    tmp_path, site_and_killer
):
    site, server, killer = site_and_killer
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site}/\n", encoding="utf-8")

    whole = run(command(tmp_path / "whole", seeds))
    assert whole.returncode == 0, whole.stderr
    assert "stopped, nothing left to fetch" in whole.stderr
    expected = table_of(tmp_path / "whole")
    assert len(expected) == len(GRAPH)
    hits_whole = len(server.hits)
    server.hits.clear()

    crawl_dir = tmp_path / "killed"
    cmd = command(crawl_dir, seeds)
    codes = []
    # 1. the fetch child, at the 4th page (round 2); 2. nutchy crawl itself during the fetch
    # of that batch resumed, at the 4th page of the next run; 3. nutchy crawl as soon as the
    # fetch child of the next run has ended, in its parse and updatedb of the batch.
    # The first asks for a fetch child (NUTCH_CRAWL_FETCH_IN_PROCESS off); the others fetch in
    # the crawl's own process, but for the resumed batch's fetch.
    child = [*cmd, "-s", "NUTCH_CRAWL_FETCH_IN_PROCESS=false"]
    for target, at in (("child", 4), ("crawl", 4)):
        killer.seen, killer.at, killer.target = 0, at, target
        killer.killed.clear()
        killer.crawl = subprocess.Popen(
            child if target == "child" else cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, err = killer.crawl.communicate(timeout=120)
        codes.append(killer.crawl.returncode)
        assert killer.killed.is_set(), err.decode()
        killer.crawl = None
    killer.at = None
    crawl = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fetch = None
    while crawl.poll() is None:
        # the resumed batch's own fetch child (its settings differ from the long-lived fetch
        # process's, started ahead with the crawl, which waits meanwhile)
        found = [pid for pid in children(crawl.pid) if batch_fetch(pid)]
        if fetch is None and found:
            fetch = found[0]
        elif fetch is not None and fetch not in found:  # the fetch child has ended
            crawl.kill()
            break
        time.sleep(0.001)
    crawl.wait()
    codes.append(crawl.returncode)
    assert fetch is not None
    # left for the next: the crawl's own line says how to finish the killed fetch's batch
    assert codes[0] == 1 and codes[1] == codes[2] == -signal.SIGKILL

    last = run(cmd)
    assert last.returncode == 0, last.stderr
    assert "left by a crawl that stopped" in last.stderr
    assert "stopped, nothing left to fetch" in last.stderr
    assert table_of(crawl_dir) == expected
    # every page at least once; again only those in flight at a kill
    fetched = Counter(path for path in server.hits if path != "/robots.txt")
    assert set(fetched) == set(GRAPH)
    # a kill's page in flight, and at most the page fetched before it whose outcome was still
    # being written (NUTCH_FETCHER_FLUSH_SIZE=1, one request per host at a time; seen on a
    # loaded machine), as docs/crawl.md's "After a crash" bounds it
    assert sum(fetched.values()) - len(GRAPH) <= 4
    assert hits_whole > 0


def test_the_printed_resume_command_parses_what_the_killed_fetch_left_before_updatedb(tmp_path):
    # A killed fetch leaves pages whose fetch was written and whose parse was not (the parse
    # is written after the outcome): here the first fetch parses nothing. The command printed
    # for a killed batch, scrapy crawl nutch -a batch=ID -a resume=true, fetches nothing more
    # and must parse those pages before its updatedb takes their marks off.
    graph = {"/": ("Home", ["/a", "/b"]), "/a": ("A", ["/c"]), "/b": ("B", []), "/c": ("C", [])}
    with graph_site(graph) as server:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        prepare_batch(store, [f"{site}/", f"{site}/a"], "b1")
        store.close()
        project = FetchProject(tmp_path, store)
        killed = project.crawl("b1", settings={"NUTCH_FETCHER_PARSE": False})
        assert killed.returncode == 0, killed.log
        resumed = project.crawl("b1", resume="true", settings={"NUTCH_FETCHER_UPDATEDB": True})
        assert resumed.returncode == 0, resumed.log
        hits = list(server.hits)
    assert hits.count("/") == hits.count("/a") == 1  # nothing fetched twice
    rows = table_of(tmp_path / "crawl")
    # the outlinks of both pages became rows: they were parsed, then updated
    assert set(rows) == {"", "a", "b", "c"}
    assert rows[""][0] == rows["a"][0] == CrawlStatus.FETCHED
    assert rows[""][3] == rows["a"][3] == []  # no generate, fetch or parse mark left
    assert rows["c"][2] == {f"{site}/a": "to /c"}
