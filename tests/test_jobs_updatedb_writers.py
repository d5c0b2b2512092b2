"""Updatedb with several writers and with crashes, on both stores: two runs at once leave the
table one run after the other leaves, and a run killed in the middle of its fold, then run
again, leaves the table a run that was never killed leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from nutchy.core.schedule import DefaultFetchSchedule
from nutchy.core.scoring import cash_bytes, read_cash
from nutchy.core.status import CrawlStatus
from nutchy.core.update import UpdateConfig
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.jobs.updatedb import UPDATED_BY_KEY, updatedb
from nutchy.store.hbase import MODIFY_BUCKETS, HBaseStore
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
DAY = 86_400_000
#: Two batches of pages with many outlinks, most to the same targets: each page shares a cash
#: equal to its number of outlinks, so every share is 1.0 and every sum exact, in any order.
SHARED = [f"http://t.example.net/{i}" for i in range(240)]
BATCHES = {
    "b1": [f"http://p{i}.example.com/" for i in range(3)],
    "b2": [f"http://q{i}.example.com/" for i in range(3)],
}


def _own(url: str) -> list[str]:
    return [f"{url}own{j}" for j in range(20)]


def build(table: WebTable) -> None:
    for batch, urls in BATCHES.items():
        for url in urls:
            links = {target: f"to {target[-3:]}" for target in [*SHARED, *_own(url)]}
            page = WebPage(
                reverse_url(url),
                status=CrawlStatus.FETCHED,
                fetch_time=NOW - DAY,
                fetch_interval=2592000,
                score=1.0,
                outlinks=links,
                metadata={"_csh_": cash_bytes(float(len(links)))},
                markers={"_gnmrk_": batch, "dist": "0"},
            )
            table.put(
                page,
                ["status", "fetch_time", "fetch_interval", "score", "outlinks", "metadata"],
            )
            table.update(page.key, entries={"markers": page.markers})
    # a target that is already a row, with a score and inlinks of its own
    known = WebPage(reverse_url(SHARED[0]), fetch_time=NOW, score=0.5, inlinks={"http://o/": "o"})
    table.put(known, ["fetch_time", "score", "inlinks"])


def run(table: WebTable, batch: str):
    return updatedb(
        table, batch, now=NOW + 1000, config=UpdateConfig(schedule=DefaultFetchSchedule())
    )


def state(table: WebTable) -> dict[str, tuple]:
    """Every row as what updatedb decides: status, schedule, score, cash, inlinks, marks and the
    batches recorded in ``mtdt:_nub_`` (as a set: their order is the order the runs came in)."""
    rows = {}
    for page in table.scan():
        nub = page.metadata.get(UPDATED_BY_KEY)
        rows[page.key] = (
            page.status,
            page.fetch_time,
            page.fetch_interval,
            page.score,
            read_cash(page.metadata),
            dict(page.inlinks),
            dict(page.markers),
            None if nub is None else frozenset(nub.split(b" ")),
        )
    return rows


def _opener(backend: str, request, tmp_path):
    """A function that opens (or reopens) table *name* of *backend*, and what closes them."""
    opened = []
    if backend == "embedded":
        from nutchy.store.embedded import EmbeddedStore

        def store_for(name: str):
            return EmbeddedStore(tmp_path / f"{name}.sqlite")
    else:
        host, port = request.getfixturevalue("hbase_address")
        options = request.getfixturevalue("hbase_options")
        prefix = f"w{os.getpid()}x{abs(hash(request.node.name)) % 10**6}"

        def store_for(name: str):
            return HBaseStore(host, port, crawl_id=f"{prefix}{name}", timeout=2000, **options)

    def factory(name: str, read_limit: int = 25) -> WebTable:
        store = store_for(name)
        store.create()
        opened.append(store)
        return WebTable(store, read_limit=read_limit, write_limit=25)

    def close() -> None:
        dropped = set()
        for store in opened:
            if backend == "hbase" and store.table_name not in dropped:
                store.drop()
                dropped.add(store.table_name)
            store.close()

    return factory, close


@pytest.fixture(params=["embedded", "hbase"])
def open_table(request, tmp_path):
    """``open_table(name)`` opens (or reopens) table *name* of one backend, on each backend."""
    factory, close = _opener(request.param, request, tmp_path)
    yield factory
    close()


@pytest.fixture
def open_hbase_table(request, tmp_path):
    factory, close = _opener("hbase", request, tmp_path)
    yield factory
    close()


def one_writer(open_table) -> dict[str, tuple]:
    """The table one writer leaves: b1 then b2, in one process."""
    table = open_table("one")
    build(table)
    run(table, "b1")
    run(table, "b2")
    return state(table)


def test_two_writers_at_once_leave_the_table_one_writer_leaves(open_table):
    expected = one_writer(open_table)
    table = open_table("two")
    build(table)
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run, open_table("two"), batch) for batch in BATCHES]
        counts = [done.result() for done in runs]
    assert [c.batch_pages for c in counts] == [3, 3]
    assert state(table) == expected
    target = expected[reverse_url(SHARED[5])]
    assert (target[3], target[4], len(target[5])) == (6.0, 6.0, 6)


def test_two_writers_make_no_more_calls_per_row_than_one(open_hbase_table, fake_hbase):
    open_table, server = open_hbase_table, fake_hbase
    one = open_table("one", read_limit=100)
    build(one)
    server.reset_stats()
    run(one, "b1")
    run(one, "b2")
    alone = server.call_counts
    two = open_table("two", read_limit=100)
    build(two)
    tables = [open_table("two", read_limit=100) for _ in BATCHES]
    server.reset_stats()
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(run, t, b) for t, b in zip(tables, BATCHES, strict=True)]:
            done.result()
    together = server.call_counts
    assert state(two) == state(one)
    # Measured: alone 8 mutateRowsTs, 17 getRowsWithColumns (rows and leases), 76 checkAndPut
    # (2 per bucket of each modify call), 111 calls in all; together 10, 21-22, 79-82, 129.
    mutates = ("mutateRows", "mutateRowsTs")
    # a writer that waits for the other writes what it holds: a short chunk per wait at most
    assert sum(together[m] for m in mutates) <= sum(alone[m] for m in mutates) + 4
    # what waiting costs is lease calls, bounded per bucket, not per row
    assert sum(together.values()) <= sum(alone.values()) + 4 * MODIFY_BUCKETS
    assert alone["checkAndPut"] <= 2 * 2 * 2 * MODIFY_BUCKETS  # two modify calls per run


class Crash(Exception):
    pass


class CrashingStore:
    """A store whose :meth:`modify` fails after *rows* changes were computed: the chunks written
    before stay, the one being computed is not written."""

    def __init__(self, store, rows: int) -> None:
        self._store = store
        self._left = rows

    def __getattr__(self, name):
        return getattr(self._store, name)

    def modify(self, keys, columns, change, chunk_size=None):
        def counted(key, cells):
            self._left -= 1
            if self._left < 0:
                raise Crash
            return change(key, cells)

        return self._store.modify(keys, columns, counted, chunk_size)


@pytest.mark.parametrize("rows", [60, 290, 302])
def test_a_run_that_fails_in_its_fold_then_runs_again_counts_everything_once(open_table, rows):
    # 60 rows: in the middle of the targets; 290: after them (the pages of the batch come last);
    # 302: the pages of the batch being written
    expected = one_writer(open_table)
    table = open_table("crash")
    build(table)
    crashing = WebTable(CrashingStore(table.store, rows), read_limit=25, write_limit=25)
    with pytest.raises(Crash):
        run(crashing, "b1")
    assert run(table, "b1").already_counted > 0
    run(table, "b2")
    assert state(table) == expected


def test_a_rerun_after_other_batches_updated_the_same_rows_counts_once(open_table):
    """b1 fails in its fold; b2 then updates the same targets (its id is now their last); the
    re-run of b1 still knows which rows it already gave to."""
    expected = one_writer(open_table)
    table = open_table("crash")
    build(table)
    with pytest.raises(Crash):
        run(WebTable(CrashingStore(table.store, 100), read_limit=25), "b1")
    run(table, "b2")
    run(table, "b1")
    assert state(table) == expected


WRITER = textwrap.dedent(
    """
    import sys, time
    from nutchy.core.schedule import DefaultFetchSchedule
    from nutchy.core.update import UpdateConfig
    from nutchy.jobs.updatedb import updatedb
    from nutchy.store.hbase import MODIFY_BUCKETS, HBaseStore
    from nutchy.store.table import WebTable

    store = HBaseStore("127.0.0.1", int(sys.argv[1]), crawl_id=sys.argv[2], timeout=500,
                       lock_lease=1500, transport=sys.argv[3], protocol=sys.argv[4])
    modify = store.modify

    def slow_modify(keys, columns, change, chunk_size=None):
        def slow(key, cells):
            time.sleep(0.004)
            return change(key, cells)
        return modify(keys, columns, slow, chunk_size)

    store.modify = slow_modify
    table = WebTable(store, read_limit=10)
    print("started", flush=True)
    updatedb(table, "b1", now=NOW,
             config=UpdateConfig(schedule=DefaultFetchSchedule()))
    print("finished", flush=True)
    """
).replace("NOW", str(NOW + 1000))


@pytest.mark.slow
def test_a_run_killed_in_its_fold_then_run_again_counts_everything_once(open_hbase_table):
    """SIGKILL in the middle of the fold on HBase: the leases the dead run held are taken over
    once they expire, and the re-run adds only what the dead run had not written. (The embedded
    store's writes are transactions that a kill cannot cut: tests/test_store_crash.py.)"""
    open_table = open_hbase_table
    expected = one_writer(open_table)
    table = open_table("killed")
    build(table)
    store = table.store
    port = store.port
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(port),
            store.table_name[: -len("_webpage")],
            store.transport,
            store.protocol,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "started\n"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until part of the fold is written
            written = sum(UPDATED_BY_KEY in page.metadata for page in table.scan(["metadata"]))
            if written >= 40:
                break
            time.sleep(0.05)
        assert 40 <= written < len(SHARED)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    crawl_id = store.table_name[: -len("_webpage")]
    rerun = WebTable(
        HBaseStore(
            store.host,
            port,
            crawl_id=crawl_id,
            timeout=500,
            lock_lease=1500,
            transport=store.transport,
            protocol=store.protocol,
        ),
        read_limit=25,
    )
    assert run(rerun, "b1").already_counted >= 40
    run(rerun, "b2")
    rerun.store.close()
    assert state(table) == expected
