"""What only the HBase store promises: Nutch's bytes on the server, server-side filters, regions,
and clear failures when the server is away."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time

import happybase
import pytest

from nutchy.config import load_settings
from nutchy.core.status import ProtocolStatus
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError, StoreError, StoreUnavailable, TableMissing
from nutchy.store import open_store
from nutchy.store.base import Scan
from nutchy.store.hbase import HBaseStore, marker_filter
from nutchy.store.schema import RowUpdate, build_update
from nutchy.store.table import WebTable
from nutchy.testing.hbase_server import HBaseThriftServer


@pytest.fixture
def hstore(hbase_address, hbase_options, request):
    host, port = hbase_address
    store = HBaseStore(
        host, port, crawl_id=f"h{abs(hash(request.node.name)) % 10**8}", **hbase_options
    )
    store.create()
    yield store
    store.drop()
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_table_is_nutchs(hstore, hbase_address, hbase_options):
    connection = happybase.Connection(*hbase_address, **hbase_options)
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
    hstore, hbase_address, hbase_options
):
    # Writes in a burst get timestamps ahead of the wall clock (each at least 2 ms after the
    # last); a store opened next must still stamp its family delete after them, or HBase keeps
    # the cells it was meant to remove.
    for n in range(200):
        hstore.write([RowUpdate(b"k", {b"ol:a": b"%d" % n, b"f:st": b"s"})])
    later = HBaseStore(
        *hbase_address, crawl_id=hstore.table_name.removesuffix("_webpage"), **hbase_options
    )
    try:
        later.write([build_update(b"k", replace={"outlinks": {"b": "new"}})])
        assert later.get(b"k") == {b"ol:b": b"new", b"f:st": b"s"}
    finally:
        later.close()


def test_settings_name_the_hbase_store_and_crawl_id(hbase_settings):
    for name in ("nutchy.store.hbase.HBaseStore", "org.apache.gora.hbase.store.HBaseStore"):
        settings = load_settings(
            {
                **hbase_settings,
                "NUTCH_STORAGE_DATA_STORE_CLASS": name,
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


def test_a_row_written_as_nutch_writes_it_reads_back(hstore, hbase_address, hbase_options):
    connection = happybase.Connection(*hbase_address, **hbase_options)
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


def test_a_missing_table_says_how_to_create_it(hbase_address, hbase_options):
    with HBaseStore(*hbase_address, crawl_id="nothere", **hbase_options) as store:
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


def _plus_one(key, cells):
    score = 0 if cells is None else int.from_bytes(cells[b"s:s"], "big")
    return RowUpdate(key, {b"s:s": (score + 1).to_bytes(8, "big")})


# --- a real Thrift server's limits -----------------------------------------------------------


def _server_connections(server: HBaseThriftServer, expected: int) -> int:
    """How many connections the server holds open, once that is *expected* or after 2 s (the
    server's threads notice a closed connection soon, not at once)."""
    deadline = time.monotonic() + 2
    while True:
        with server._connections_lock:
            count = len(server._connections)
        if count == expected or time.monotonic() > deadline:
            return count
        time.sleep(0.01)


class CuttingProxy:
    """A TCP proxy in front of the test server that can cut a connection the moment the client
    sends a given Thrift call, before the server sees it: a network failure in mid-call."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.method: bytes | None = None
        self.spare = 0
        self.times: int | None = 0
        self.cuts = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, method: bytes, *, spare: int = 0, times: int | None = 1) -> None:
        """Cut the connection of the next *times* calls of *method* (``None``: all of them),
        after letting *spare* of them through."""
        with self._lock:
            self.method, self.spare, self.times, self.cuts = method, spare, times, 0

    def heal(self) -> None:
        with self._lock:
            self.method = None

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _cuts(self, data: bytes) -> bool:
        with self._lock:
            if self.method is None:
                return False
            # A binary-protocol call starts with its name, after the name's 4-byte length.
            if len(self.method).to_bytes(4, "big") + self.method not in data:
                return False
            if self.spare:
                self.spare -= 1
                return False
            if self.times is not None and self.cuts >= self.times:
                return False
            self.cuts += 1
            return True

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if from_client and self._cuts(data):
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxied(fake_hbase, hbase_options):
    """An HBase store that reaches the session's test server through a :class:`CuttingProxy`."""
    proxy = CuttingProxy(fake_hbase.port)
    store = HBaseStore(
        "127.0.0.1", proxy.port, crawl_id=f"cut{os.getpid()}", timeout=3000, **hbase_options
    )
    store.create()
    yield store, proxy
    proxy.heal()
    store.drop()
    store.close()
    proxy.close()


def test_close_closes_every_connection_of_the_pool():
    with HBaseThriftServer() as server:
        store = HBaseStore("127.0.0.1", server.port, crawl_id="pool", pool_size=4)
        store.create()
        together = threading.Barrier(4, timeout=5)

        def use_one() -> None:
            store._call(lambda conn: together.wait() or conn.client.getTableNames())

        threads = [threading.Thread(target=use_one) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _server_connections(server, 4) == 4
        store.close()
        assert _server_connections(server, 0) == 0
        assert store.exists()  # a closed store connects again when used


def test_connections_the_server_closed_while_idle_are_replaced_before_use():
    # HBase's Thrift server closes a connection after 60 s without a request; here after 0.3 s.
    with HBaseThriftServer(idle_timeout=0.3) as server:
        store = HBaseStore("127.0.0.1", server.port, crawl_id="idle", pool_size=2)
        store.create()
        store.write([RowUpdate(b"a", {b"s:s": (1).to_bytes(8, "big")})])
        deadline = time.monotonic() + 5
        while server.connection_counts["closed_idle"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.connection_counts["closed_idle"] >= 1
        server.reset_stats()
        # A call that is never sent twice (checkAndPut, in modify's leases) goes through too:
        # the dead connection is noticed before anything is sent on it.
        assert store.modify([b"a"], [b"s:s"], _plus_one) == 1
        assert int.from_bytes(store.get(b"a")[b"s:s"], "big") == 2
        assert server.connection_counts["opened"] == 1
        store.drop()
        store.close()


def test_reads_and_writes_are_sent_again_on_a_new_connection_after_a_cut(proxied, fake_hbase):
    store, proxy = proxied
    store.write([RowUpdate(b"a", {b"f:st": b"\x00\x00\x00\x01"})])
    for method, call in (
        (b"mutateRowsTs", lambda: store.write([RowUpdate(b"b", {b"f:st": b"\x00\x00\x00\x02"})])),
        (b"getRowWithColumns", lambda: store.get(b"a")),
        (b"getRowsWithColumns", lambda: store.get_many([b"a", b"b"])),
        (b"scannerOpenWithScan", lambda: list(store.scan())),
        (b"getTableRegions", lambda: store.splits()),
        (b"getTableNames", lambda: store.exists()),
    ):
        proxy.cut(method)
        call()
        assert proxy.cuts == 1, method
    proxy.heal()
    assert store.get_many([b"a", b"b"]) == {
        b"a": {b"f:st": b"\x00\x00\x00\x01"},
        b"b": {b"f:st": b"\x00\x00\x00\x02"},
    }


def test_a_cut_that_persists_fails_as_unavailable_after_one_more_try(proxied):
    store, proxy = proxied
    proxy.cut(b"mutateRowsTs", times=None)
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{proxy.port} failed: TTransport"):
        store.write([RowUpdate(b"b", {b"f:st": b"\x00\x00\x00\x02"})])
    assert proxy.cuts == 2  # the first try and one more, no third


def test_a_call_that_must_not_be_sent_twice_is_not(proxied, fake_hbase, hbase_options):
    _, proxy = proxied
    # createTable is not idempotent (the second would answer AlreadyExists): one try only.
    other = HBaseStore(
        "127.0.0.1", proxy.port, crawl_id=f"cut{os.getpid()}b", timeout=3000, **hbase_options
    )
    try:
        proxy.cut(b"createTable")
        with pytest.raises(StoreUnavailable):
            other.create()
        assert proxy.cuts == 1
        proxy.heal()
        assert not other.exists()
    finally:
        other.close()


def _mutate_calls(server: HBaseThriftServer) -> int:
    return server.call_counts["mutateRowsTs"] + server.call_counts["mutateRows"]


def test_write_batches_are_bounded_by_bytes_as_well_as_rows(
    hbase_address, hbase_options, fake_hbase
):
    host, port = hbase_address
    with HBaseStore(
        host, port, crawl_id="bytes", batch_size=1000, batch_bytes=100_000, **hbase_options
    ) as store:
        store.create()
        try:
            body = b"x" * 30_000
            fake_hbase.reset_stats()
            store.write([RowUpdate(b"r%02d" % i, {b"f:cnt": body}) for i in range(10)])
            assert _mutate_calls(fake_hbase) == 4  # 3 rows of ~30 KB per call, then the last
            fake_hbase.reset_stats()
            store.write([RowUpdate(b"big", {b"f:cnt": b"y" * 250_000})])  # alone, still written
            assert _mutate_calls(fake_hbase) == 1
            fake_hbase.reset_stats()
            store.write(
                [RowUpdate(b"s%04d" % i, {b"f:st": b"\x00\x00\x00\x01"}) for i in range(2500)]
            )
            assert _mutate_calls(fake_hbase) == 3  # small rows: 1000 per call
            assert len(store.get_many([b"r%02d" % i for i in range(10)] + [b"big"])) == 11
            assert len(list(store.scan(Scan(prefix=b"s")))) == 2500
        finally:
            store.drop()


@pytest.mark.parametrize("protocol", ["binary", "compact"])
def test_a_framed_server_with_hbases_2_mb_frames_takes_a_fetchs_flush(protocol):
    # 100 pages of 64 KiB (one flush of the fetcher) is 6.6 MB: over the frame limit in one call.
    with HBaseThriftServer(transport="framed", protocol=protocol) as server:
        settings = load_settings(
            {
                "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
                "NUTCH_HBASE_HOST": "127.0.0.1",
                "NUTCH_HBASE_PORT": server.port,
                "NUTCH_HBASE_TRANSPORT": "framed",
                "NUTCH_HBASE_PROTOCOL": protocol,
            },
            project=False,
        )
        with open_store(settings) as store:
            assert (store.transport, store.protocol) == ("framed", protocol)
            store.create()
            pages = [
                RowUpdate(b"com.example:http/%03d" % i, {b"f:cnt": os.urandom(65536)})
                for i in range(100)
            ]
            store.write(pages)
            assert server.connection_counts["closed_frame_too_large"] == 0
            got = store.get_many([page.key for page in pages])
            assert all(got[page.key] == page.puts for page in pages)


def test_a_family_is_refilled_before_it_is_emptied(proxied, fake_hbase):
    store, proxy = proxied
    store.write([RowUpdate(b"a", {b"ol:x": b"1", b"ol:y": b"2", b"f:st": b"s"})])
    replace = build_update(b"a", {"status": 3}, replace={"outlinks": {"z": "3"}})
    fake_hbase.reset_stats()
    proxy.cut(b"mutateRowsTs", spare=1, times=None)  # the first call goes, the next ones fail
    with pytest.raises(StoreUnavailable):
        store.write([replace])
    proxy.heal()
    # The new cells are in, the old ones not yet gone: extra entries, never a row without `ol`.
    assert store.get(b"a", [b"ol"]) == {b"ol:x": b"1", b"ol:y": b"2", b"ol:z": b"3"}
    store.write([replace])  # done again, it leaves exactly the new content
    assert store.get(b"a") == {b"ol:z": b"3", b"f:st": b"\x00\x00\x00\x03"}


def test_a_write_replacing_families_takes_two_calls_per_batch(hstore, fake_hbase):
    updates = [
        build_update(b"k%03d" % i, {"status": 2}, replace={"outlinks": {f"t{i}": "a"}})
        for i in range(1500)
    ]
    fake_hbase.reset_stats()
    hstore.write(updates)
    # Per batch of 1000 rows: the cells at ts, then the family deletes at ts - 1.
    assert fake_hbase.call_log == ["mutateRowsTs"] * 4
    assert hstore.get(b"k007", [b"ol"]) == {b"ol:t7": b"a"}


def test_splits_of_a_missing_table_say_so(hbase_address, hbase_options):
    with (
        HBaseStore(*hbase_address, crawl_id="nosplits", **hbase_options) as store,
        pytest.raises(TableMissing, match="nutchy storage init"),
    ):
        store.splits()


def test_errors_are_told_apart_by_their_thrift_type_not_their_text(hstore):
    # HBase's IOError for an unknown family; its text has "connect" in it, not a network error.
    with pytest.raises(StoreError, match="NoSuchColumnFamily") as failed:
        hstore.write([RowUpdate(b"k", {b"connect:x": b"1"})])
    assert not isinstance(failed.value, StoreUnavailable)
    # A filter the server refuses (IllegalArgument / TApplicationException): a StoreError.
    with pytest.raises(StoreError) as refused:
        hstore._call(lambda conn: list(conn.table("webpage").scan(filter=b"NoSuchFilter()")))
    assert not isinstance(refused.value, (StoreUnavailable, TableMissing))
    assert hstore.exists()  # the connection that carried the error is still good


def test_transport_and_protocol_settings_must_be_known(hbase_settings):
    for name, value in (("NUTCH_HBASE_TRANSPORT", "http"), ("NUTCH_HBASE_PROTOCOL", "json")):
        settings = load_settings(
            {
                **hbase_settings,
                name: value,
            },
            project=False,
        )
        with pytest.raises(ConfigError, match=f"{name} must be one of .*got '{value}'"):
            open_store(settings)


@pytest.fixture
def slow_rows(monkeypatch):
    """The test server reads each row of a filtered or key-only scan in *delay* seconds, as a
    region server reading from disk would: a page is then slow in proportion to the rows the
    server reads for it, not to the rows it returns."""
    import nutchy.testing.hbase_server as server_module

    read_row = server_module._read_row
    delay = 0.001

    def slow_read_row(*args, **kwargs):
        time.sleep(delay)
        return read_row(*args, **kwargs)

    monkeypatch.setattr(server_module, "_read_row", slow_read_row)
    return delay


def test_a_sparse_filtered_scan_goes_on_in_stretches_when_a_page_times_out(slow_rows, caplog):
    # 400 rows, 3 in the batch: a page of the filtered scan reads all 400 (0.4 s on this server),
    # longer than the scanner timeout; a stretch of a few dozen rows does not.
    with HBaseThriftServer() as server:
        store = HBaseStore("127.0.0.1", server.port, crawl_id="sparse", scanner_timeout=150)
        store.create()
        marked = {17, 205, 398}
        store.write(
            [
                RowUpdate(
                    b"r%03d" % i,
                    {
                        b"f:st": b"\x00\x00\x00\x01",
                        **({b"mk:_gnmrk_": b"b1"} if i in marked else {}),
                    },
                )
                for i in range(400)
            ]
        )
        with pytest.raises(StoreUnavailable, match="did not answer within 150 ms"):
            store._page(b"", None, None, marker_filter(b"_gnmrk_", b"b1"), 1000)
        caplog.set_level(logging.INFO, logger="nutchy.store.hbase")
        keys = [k for k, _ in store.scan(Scan(marker=(b"_gnmrk_", b"b1"), columns=[b"f:st"]))]
        assert keys == [b"r%03d" % i for i in sorted(marked)]
        assert "reading on in stretches of" in caplog.text
        # An unfiltered scan returns every row it reads: its pages never time out.
        assert len(list(store.scan(Scan(columns=[b"f:st"]), page_size=100))) == 400
        store.close()


def test_a_filtered_scan_reads_no_further_than_a_region_per_call(monkeypatch, fake_hbase):
    import nutchy.testing.hbase_server as server_module

    opened: list[tuple[bytes, bytes]] = []
    open_scanner = server_module._HBaseHandler.scannerOpenWithScan

    def recording(self, name, scan, attributes):
        opened.append((scan.startRow, scan.stopRow))
        return open_scanner(self, name, scan, attributes)

    monkeypatch.setattr(server_module._HBaseHandler, "scannerOpenWithScan", recording)
    with HBaseThriftServer() as server:
        store = HBaseStore("127.0.0.1", server.port, crawl_id="regions")
        store.create()
        store.write([RowUpdate(b"r%d" % i, {b"mk:_gnmrk_": b"b%d" % (i % 2)}) for i in range(9)])
        server.split_table(store.table_name, [b"r3", b"r6"])
        batch = Scan(marker=(b"_gnmrk_", b"b1"))
        assert [k for k, _ in store.scan(batch)] == [b"r1", b"r3", b"r5", b"r7"]
        assert opened == [(b"", b"r3"), (b"r3", b"r6"), (b"r6", None)]
        opened.clear()
        assert [k for k, _ in store.scan(Scan(start=b"r4", marker=batch.marker))] == [b"r5", b"r7"]
        assert opened == [(b"r4", b"r6"), (b"r6", None)]
        opened.clear()
        assert len(list(store.scan())) == 9  # no condition: every row read is returned
        assert opened == [(b"", None)]
        store.close()


def test_scanner_settings_reach_the_store(hbase_settings, fake_hbase):
    settings = load_settings(
        {
            **hbase_settings,
            "NUTCH_STORAGE_CRAWL_ID": "caching",
            "NUTCH_HBASE_SCANNER_CACHING": 10,
            "NUTCH_HBASE_SCANNER_TIMEOUT": 30000,
        },
        project=False,
    )
    with open_store(settings) as store:
        assert (store.scanner_caching, store.scanner_timeout) == (10, 30000)
        store.create()
        try:
            store.write(
                [RowUpdate(b"r%02d" % i, {b"f:st": b"\x00\x00\x00\x01"}) for i in range(45)]
            )
            fake_hbase.reset_stats()
            assert len(list(store.scan(page_size=1000))) == 45
            # One scanner, read 10 rows a call: 4 full calls and the last 5.
            assert fake_hbase.call_counts["scannerGetList"] == 5
            assert fake_hbase.call_counts["scannerOpenWithScan"] == 1
        finally:
            store.drop()
    settings = load_settings(
        {
            "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
            "NUTCH_HBASE_SCANNER_TIMEOUT": 0,
        },
        project=False,
    )
    with pytest.raises(ConfigError, match="NUTCH_HBASE_SCANNER_TIMEOUT must be > 0"):
        open_store(settings)


def test_a_server_of_another_transport_is_named_as_a_possible_cause():
    with HBaseThriftServer(transport="framed") as server:
        store = HBaseStore("127.0.0.1", server.port, transport="buffered", timeout=2000)
        with pytest.raises(
            StoreUnavailable, match="does not speak the buffered transport and binary protocol"
        ):
            store.exists()
        store.close()


def test_an_answer_that_is_not_thrift_is_a_store_error():
    # Settings naming an HTTP server instead of the Thrift server: its answer does not decode.
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_http() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(1 << 16)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    time.sleep(0.2)

    threading.Thread(target=answer_http, daemon=True).start()
    try:
        store = HBaseStore("127.0.0.1", listener.getsockname()[1], timeout=2000)
        with pytest.raises(StoreError, match=f"127.0.0.1:{listener.getsockname()[1]}"):
            store.get(b"k")
        store.close()
    finally:
        listener.close()
