"""The HBase store's leases: modify() without row locks, the lease table, and what happens to the
lease of a writer that dies, stalls or lives on."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import happybase
import pytest

from nutchy.exceptions import StoreError
from nutchy.store.hbase import LOCK_COLUMN, MODIFY_BUCKETS, HBaseStore, modify_bucket
from nutchy.store.hbase_lease import COLUMN, RELEASED, SIDE_TABLE_SUFFIX, LeaseLost
from nutchy.store.schema import RowUpdate

_LEASE_LOG = "nutchy.store.hbase_lease"


@pytest.fixture
def open_hstore(hbase_address, hbase_options, request):
    """Opens stores on one table of a crawl id of this test's own, dropped at the end."""
    host, port = hbase_address
    crawl_id = f"l{abs(hash(request.node.name)) % 10**8}"
    opened: list[HBaseStore] = []

    def factory(**kwargs) -> HBaseStore:
        store = HBaseStore(host, port, crawl_id=crawl_id, **{**hbase_options, **kwargs})
        opened.append(store)
        return store

    first = factory()
    first.create()
    yield factory
    first.drop()
    for store in opened:
        store.close()


@pytest.fixture
def hstore(open_hstore):
    return open_hstore()


def _raw(store: HBaseStore, hbase_address, table: str = "webpage"):
    host, port = hbase_address
    prefix = store.table_name[: -len("_webpage")]
    conn = happybase.Connection(
        host, port, table_prefix=prefix, transport=store.transport, protocol=store.protocol
    )
    return conn, conn.table(table)


def store_options(store: HBaseStore) -> list[str]:
    """The transport and protocol of *store*, as a child process's arguments."""
    return [store.transport, store.protocol]


def _count(cells) -> int:
    return 0 if cells is None else int.from_bytes(cells[b"s:s"], "big")


def _plus_one(key, cells):
    return RowUpdate(key, {b"s:s": (_count(cells) + 1).to_bytes(8, "big")})


def _bucket_lease(key: bytes) -> str:
    return f"modify:{modify_bucket(key):02d}"


def test_modify_locks_no_row_and_costs_a_constant_per_bucket(hstore, fake_hbase):
    calls = {}
    for n in (200, 2500):
        keys = [b"com.example%05d:http/" % i for i in range(n)]
        assert len({modify_bucket(k) for k in keys}) == MODIFY_BUCKETS
        fake_hbase.reset_stats()
        assert hstore.modify(keys, [b"s:s"], _plus_one, chunk_size=1000) == n
        calls[n] = fake_hbase.call_counts
        chunks = math.ceil(n / 1000)
        # one write per chunk of 1000 rows, whatever the buckets
        assert calls[n]["mutateRowsTs"] + calls[n]["mutateRows"] == chunks
    # the leases: taken and released once per bucket, nothing per row
    assert calls[200]["checkAndPut"] == calls[2500]["checkAndPut"] == 2 * MODIFY_BUCKETS
    assert calls[2500]["mutateRow"] + calls[2500]["mutateRowTs"] == 0
    # one read per chunk, and one of the leases each time the held buckets run short
    assert calls[2500]["getRowsWithColumns"] <= 3 + MODIFY_BUCKETS
    counts = [_count(c) for c in hstore.get_many(keys, [b"s:s"]).values()]
    assert counts == [2] * 200 + [1] * 2300  # the first 200 keys were in both calls


def test_reads_never_show_an_old_lock_cell_and_modify_deletes_it(hstore, hbase_address):
    conn, raw = _raw(hstore, hbase_address)
    try:
        raw.put(b"a", {b"s:s": (1).to_bytes(8, "big"), LOCK_COLUMN: b"1700000000000 old:1:ab"})
        assert LOCK_COLUMN not in hstore.get(b"a")
        assert LOCK_COLUMN not in hstore.get_many([b"a"])[b"a"]
        assert all(LOCK_COLUMN not in cells for _, cells in hstore.scan())
        assert hstore.modify([b"a"], [b"s:s", b"mk"], _plus_one) == 1
        assert LOCK_COLUMN not in raw.row(b"a")
        assert _count(raw.row(b"a")) == 2
    finally:
        conn.close()


def test_leases_live_in_a_side_table_that_drop_removes(open_hstore, hbase_address):
    store = open_hstore()
    store.modify([b"a"], [b"s:s"], _plus_one)
    conn, side = _raw(store, hbase_address, "webpage" + SIDE_TABLE_SUFFIX)
    try:
        assert side.row(_bucket_lease(b"a").encode()) == {COLUMN: RELEASED}
        assert sorted(side.families()) == [b"l"]
        # the web table holds the rows written and nothing else
        assert [k for k, _ in store.scan()] == [b"a"]
        store.drop()
        assert store.table_name.encode() + SIDE_TABLE_SUFFIX.encode() not in conn.tables()
    finally:
        conn.close()
        store.create()  # for the fixture's drop


def test_a_dead_writers_lease_is_taken_over(hstore, hbase_address, caplog):
    hstore.modify([b"b"], [b"s:s"], _plus_one)  # creates the lease table
    name = _bucket_lease(b"a").encode()
    conn, side = _raw(hstore, hbase_address, "webpage" + SIDE_TABLE_SUFFIX)
    try:
        expired = int(time.time() * 1000) - 1000
        side.put(name, {COLUMN: b"%d gone:1:ab" % expired})
        with caplog.at_level(logging.WARNING, _LEASE_LOG):
            assert hstore.modify([b"a"], [b"s:s"], _plus_one) == 1
        assert side.row(name) == {COLUMN: RELEASED}
    finally:
        conn.close()
    assert f"Took over the lease {name.decode()}" in caplog.text
    assert "gone:1:ab" in caplog.text


@pytest.mark.slow
def test_a_live_writers_lease_is_waited_for_and_never_taken_over(open_hstore, caplog):
    """The holder keeps its lease for more than twice the lease time: its thread renews it, so
    the other writer waits until it is released, and then adds on top of what it wrote."""
    holder = open_hstore(timeout=500, lock_lease=1500)
    waiter = open_hstore(timeout=500, lock_lease=1500)
    held = threading.Event()
    events: list[str] = []

    def hold() -> None:
        with holder.exclusive(_bucket_lease(b"a")) as still_held:
            held.set()
            time.sleep(3.5)
            still_held()  # raises if it was taken over
            holder.write([RowUpdate(b"a", {b"s:s": (10).to_bytes(8, "big")})])
            events.append("released")

    with caplog.at_level(logging.WARNING, _LEASE_LOG), ThreadPoolExecutor(1) as pool:
        holding = pool.submit(hold)
        assert held.wait(10)
        assert waiter.modify([b"a"], [b"s:s"], _plus_one) == 1
        events.append("modified")
        holding.result()
    assert events == ["released", "modified"]
    assert _count(waiter.get(b"a")) == 11
    assert "Took over" not in caplog.text


def test_a_writer_waits_at_most_the_lock_timeout_and_names_the_holder(open_hstore):
    holder = open_hstore()
    impatient = open_hstore(lock_timeout=300)
    impatient.modify([b"a"], [b"s:s"], _plus_one)
    held_by = rf"{_bucket_lease(b'a')} by \d+ [^ ]+:\d+:"
    with holder.exclusive(_bucket_lease(b"a")), pytest.raises(StoreError, match=held_by):
        impatient.modify([b"a"], [b"s:s"], _plus_one)
    assert _count(impatient.get(b"a")) == 1  # nothing written
    assert impatient.modify([b"a"], [b"s:s"], _plus_one) == 1


def test_a_lease_lost_meanwhile_is_noticed_before_writing(open_hstore, hbase_address):
    store = open_hstore(timeout=500, lock_lease=1500)
    with store.exclusive("generate") as still_held:
        conn, side = _raw(store, hbase_address, "webpage" + SIDE_TABLE_SUFFIX)
        try:
            side.put(b"generate", {COLUMN: b"%d thief:2:cd" % (time.time() * 1000 + 60000)})
        finally:
            conn.close()
        time.sleep(0.8)  # past half the lease time: the check asks the server
        with pytest.raises(LeaseLost, match="taken over"):
            still_held()


def test_exclusive_holds_out_other_holders(open_hstore):
    stores = [open_hstore() for _ in range(3)]
    inside = 0
    most = 0
    guard = threading.Lock()

    def run(store: HBaseStore) -> None:
        nonlocal inside, most
        for _ in range(3):
            with store.exclusive("generate"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.02)
                with guard:
                    inside -= 1

    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(run, s) for s in stores]:
            done.result()
    assert most == 1


HOLDER = textwrap.dedent(
    """
    import sys, time
    from nutchy.store.hbase import HBaseStore

    store = HBaseStore("127.0.0.1", int(sys.argv[1]), crawl_id=sys.argv[2], timeout=500,
                       lock_lease=1500, transport=sys.argv[3], protocol=sys.argv[4])
    with store.exclusive("generate"):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_a_killed_holders_lease_is_taken_over_after_the_lease_time(
    open_hstore, hbase_address, caplog
):
    store = open_hstore(timeout=500, lock_lease=1500)
    crawl_id = store.table_name[: -len("_webpage")]
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hbase_address[1]), crawl_id, *store_options(store)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "held\n"
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    with caplog.at_level(logging.WARNING, _LEASE_LOG), store.exclusive("generate") as still_held:
        still_held()
    assert "Took over the lease generate" in caplog.text
