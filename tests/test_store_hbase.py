"""What only the HBase store promises: Nutch's bytes on the server, server-side filters, regions,
and clear failures when the server is away."""

from __future__ import annotations

import socket
import time

import happybase
import pytest

from nutchy.config import load_settings
from nutchy.core.status import ProtocolStatus
from nutchy.core.webpage import WebPage
from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store import open_store
from nutchy.store.base import Scan
from nutchy.store.hbase import LOCK_COLUMN, HBaseStore
from nutchy.store.schema import RowUpdate, build_update
from nutchy.store.table import WebTable
from nutchy.testing.hbase_server import HBaseThriftServer


@pytest.fixture
def hstore(hbase_address, request):
    host, port = hbase_address
    store = HBaseStore(host, port, crawl_id=f"h{abs(hash(request.node.name)) % 10**8}")
    store.create()
    yield store
    store.drop()
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_table_is_nutchs(hstore, hbase_address):
    connection = happybase.Connection(*hbase_address)
    try:
        assert hstore.table_name.encode() in connection.tables()
        families = connection.table(hstore.table_name).families()
    finally:
        connection.close()
    assert sorted(families) == sorted(
        [b"f", b"p", b"s", b"il", b"ol", b"h", b"mtdt", b"mk", b"stm"]
    )
    assert {d["max_versions"] for d in families.values()} == {1}


def test_a_family_replaced_by_a_store_opened_later_masks_what_an_earlier_one_wrote(
    hstore, hbase_address
):
    # Writes in a burst get timestamps ahead of the wall clock (each at least 2 ms after the
    # last); a store opened next must still stamp its family delete after them, or HBase keeps
    # the cells it was meant to remove.
    for n in range(200):
        hstore.write([RowUpdate(b"k", {b"ol:a": b"%d" % n, b"f:st": b"s"})])
    later = HBaseStore(*hbase_address, crawl_id=hstore.table_name.removesuffix("_webpage"))
    try:
        later.write([build_update(b"k", replace={"outlinks": {"b": "new"}})])
        assert later.get(b"k") == {b"ol:b": b"new", b"f:st": b"s"}
    finally:
        later.close()


def test_settings_name_the_hbase_store_and_crawl_id(hbase_address):
    host, port = hbase_address
    for name in ("nutchy.store.hbase.HBaseStore", "org.apache.gora.hbase.store.HBaseStore"):
        settings = load_settings(
            {
                "NUTCH_STORAGE_DATA_STORE_CLASS": name,
                "NUTCH_HBASE_HOST": host,
                "NUTCH_HBASE_PORT": port,
                "NUTCH_STORAGE_CRAWL_ID": "news",
            },
            project=False,
        )
        with open_store(settings) as store:
            assert isinstance(store, HBaseStore)
            assert store.table_name == "news_webpage"


def test_the_server_holds_nutchs_bytes(hstore, fake_hbase):
    table = WebTable(hstore)
    table.put(
        WebPage(
            "com.example.www:http/",
            status=2,
            fetch_time=1500000000000,
            score=0.5,
            protocol_status=ProtocolStatus(21),
            markers={"_gnmrk_": "b1"},
        ),
        ["status", "fetch_time", "score", "protocol_status", "markers"],
    )
    stored = fake_hbase.cells(hstore.table_name, b"com.example.www:http/")
    newest = {column: versions[0][1] for column, versions in stored.items()}
    assert newest == {
        b"f:st": bytes.fromhex("00000002"),
        b"f:ts": bytes.fromhex("0000015d3ef79800"),
        b"s:s": bytes.fromhex("3f000000"),
        b"f:prot": bytes.fromhex("2a0000"),
        b"mk:_gnmrk_": b"b1",
    }


def test_a_row_written_as_nutch_writes_it_reads_back(hstore, hbase_address):
    connection = happybase.Connection(*hbase_address)
    try:
        connection.table(hstore.table_name).put(
            b"org.apache.nutch:http/",
            {
                b"f:ts": bytes.fromhex("0000015d3ef79800"),
                b"f:fi": bytes.fromhex("00278d00"),
                b"s:s": bytes.fromhex("3f800000"),
                b"mtdt:_csh_": bytes.fromhex("3f800000"),
                b"mk:_injmrk_": b"y",
                b"mk:dist": b"0",
                b"f:prot": b"\x18\x02\x2chttp://example.com/new\x00\x00",
            },
        )
    finally:
        connection.close()
    page = WebTable(hstore).get("http://nutch.apache.org/")
    assert page.status == 0
    assert (page.fetch_time, page.fetch_interval, page.score) == (1500000000000, 2592000, 1.0)
    assert page.markers == {"_injmrk_": "y", "dist": "0"}
    assert page.protocol_status == ProtocolStatus(12, ("http://example.com/new",))


def test_conditions_are_evaluated_on_the_server(hstore, fake_hbase):
    updates = []
    for i in range(100):
        fields = {"fetch_time": i * 1000}
        markers = {"_gnmrk_": "b1"} if i % 20 == 0 else {}
        updates.append(build_update(f"com.example:http/{i:03d}", fields, {"markers": markers}))
    hstore.write(updates)
    fake_hbase.reset_stats()
    assert len(list(hstore.scan(Scan(marker=(b"_gnmrk_", b"b1"))))) == 5
    assert fake_hbase.rows_shipped == 5
    fake_hbase.reset_stats()
    assert len(list(hstore.scan(Scan(due_before=9000, columns=[b"f:ts"]), page_size=4))) == 10
    assert fake_hbase.rows_shipped == 10


def test_splits_follow_the_regions(hstore, fake_hbase):
    keys = [f"com.example{n}:http/".encode() for n in range(9)]
    hstore.write([RowUpdate(k, {b"f:st": b"\x00\x00\x00\x01"}) for k in keys])
    fake_hbase.split_table(hstore.table_name, [b"com.example3", b"com.example6"])
    splits = hstore.splits()
    assert splits == [
        (b"", b"com.example3"),
        (b"com.example3", b"com.example6"),
        (b"com.example6", None),
    ]
    seen = [[k for k, _ in hstore.scan(Scan(start=start, stop=stop))] for start, stop in splits]
    assert [len(part) for part in seen] == [3, 3, 3]
    assert [k for part in seen for k in part] == keys


def test_a_missing_table_says_how_to_create_it(hbase_address):
    with HBaseStore(*hbase_address, crawl_id="nothere") as store:
        assert not store.exists()
        with pytest.raises(TableMissing, match="nutchy storage init"):
            store.get(b"k")


def test_an_unreachable_server_is_named_quickly():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
        HBaseStore("127.0.0.1", port, timeout=2000)
    assert time.monotonic() - started < 2.5


def test_a_server_that_goes_away_mid_crawl_is_named_and_nothing_hangs():
    server = HBaseThriftServer()
    server.start()
    store = HBaseStore("127.0.0.1", server.port, timeout=2000)
    store.create()
    store.write([RowUpdate(b"k", {b"f:st": b"\x00\x00\x00\x01"})])
    assert store.get(b"k") == {b"f:st": b"\x00\x00\x00\x01"}
    server.stop()
    started = time.monotonic()
    for call in (
        lambda: store.get(b"k"),
        lambda: store.write([RowUpdate(b"k", {b"f:st": b"\x00\x00\x00\x02"})]),
        lambda: list(store.scan()),
    ):
        with pytest.raises(StoreError, match=f"127.0.0.1:{server.port}"):
            call()
    assert time.monotonic() - started < 10
    store.close()


def _raw_table(hstore, hbase_address):
    host, port = hbase_address
    conn = happybase.Connection(host, port, table_prefix=hstore.table_name.rsplit("_", 1)[0])
    return conn, conn.table("webpage")


def _plus_one(key, cells):
    score = 0 if cells is None else int.from_bytes(cells[b"s:s"], "big")
    return RowUpdate(key, {b"s:s": (score + 1).to_bytes(8, "big")})


def test_modify_locks_with_a_cell_that_reads_never_show(hstore, hbase_address):
    hstore.modify([b"a"], [b"s:s"], _plus_one)
    conn, raw = _raw_table(hstore, hbase_address)
    try:
        assert raw.row(b"a")[LOCK_COLUMN] == b""  # free again, and on the server
    finally:
        conn.close()
    assert LOCK_COLUMN not in hstore.get(b"a")
    assert LOCK_COLUMN not in hstore.get_many([b"a"])[b"a"]
    assert all(LOCK_COLUMN not in cells for _, cells in hstore.scan())
    assert all(LOCK_COLUMN not in cells for _, cells in hstore.scan(Scan(columns=[b"mk"])))


def test_a_dead_writers_lock_is_taken_over(hstore, hbase_address, caplog):
    conn, raw = _raw_table(hstore, hbase_address)
    try:
        stale = int(time.time() * 1000) - hstore.lock_lease - 1000
        raw.put(b"a", {b"s:s": (1).to_bytes(8, "big"), LOCK_COLUMN: b"%d gone:1:ab" % stale})
        assert hstore.modify([b"a"], [b"s:s"], _plus_one) == 1
        assert raw.row(b"a")[LOCK_COLUMN] == b""
    finally:
        conn.close()
    assert int.from_bytes(hstore.get(b"a")[b"s:s"], "big") == 2
    assert "Took over the lock of row b'a'" in caplog.text


def test_a_row_locked_by_a_live_writer_waits_then_fails_naming_it(hbase_address):
    host, port = hbase_address
    store = HBaseStore(host, port, crawl_id="lockwait", lock_timeout=300)
    store.create()
    conn, raw = _raw_table(store, hbase_address)
    try:
        holder = b"%d other:2:cd" % int(time.time() * 1000)
        raw.put(b"a", {b"s:s": (1).to_bytes(8, "big"), LOCK_COLUMN: holder})
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"row b'a' stayed locked by b'\d+ other:2:cd'"):
            store.modify([b"a"], [b"s:s"], _plus_one)
        assert time.monotonic() - started >= 0.3
        assert int.from_bytes(store.get(b"a")[b"s:s"], "big") == 1  # nothing written
        raw.put(b"a", {LOCK_COLUMN: b""})  # the holder lets go
        assert store.modify([b"a"], [b"s:s"], _plus_one) == 1
    finally:
        conn.close()
        store.drop()
        store.close()
