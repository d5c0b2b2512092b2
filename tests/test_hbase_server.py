"""The in-memory HBase Thrift1 server, exercised through real happybase over real sockets.

Each test states an HBase behaviour nutchy depends on (or a way the server must fail loudly) and
checks it the way nutchy's HBase store will see it: through ``happybase.Connection``.
"""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import happybase
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TMemoryBuffer, TTransportException

from nutchy.testing.hbase_server import (
    LATEST_TIMESTAMP,
    Hbase_thrift,
    HBaseThriftServer,
    _ClientSocket,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

BE64 = struct.Struct(">q")
BE32 = struct.Struct(">i")


@pytest.fixture(scope="module")
def server() -> Iterator[HBaseThriftServer]:
    with HBaseThriftServer() as server:
        yield server


@pytest.fixture
def connection(server: HBaseThriftServer) -> Iterator[happybase.Connection]:
    connection = happybase.Connection("127.0.0.1", server.port)
    yield connection
    connection.close()


def _new_table(connection: happybase.Connection, families: dict[str, dict[str, int]]) -> bytes:
    name = f"t_{uuid.uuid4().hex[:12]}".encode()
    connection.create_table(name, families)
    return name


@pytest.fixture
def table(connection: happybase.Connection) -> Iterator[happybase.Table]:
    """A fresh table with family ``f`` (3 versions, HBase's default) and ``m`` (1 version)."""
    name = _new_table(connection, {"f": {}, "m": {"max_versions": 1}})
    yield connection.table(name)
    if name in connection.tables():
        connection.delete_table(name, disable=True)


def keys(scanner: Iterator[tuple[bytes, dict[bytes, bytes]]]) -> list[bytes]:
    return [key for key, _ in scanner]


def message(raised: pytest.ExceptionInfo[Exception]) -> str:
    """The message of a Thrift exception. happybase reads with ``decode_response=False``, so it
    arrives as bytes, and ``str()`` of such an exception raises TypeError."""
    text = raised.value.message  # type: ignore[attr-defined]
    return text.decode() if isinstance(text, bytes) else str(text)


def quote(value: bytes) -> bytes:
    """A filter-language string argument: single quotes, with ``'`` doubled."""
    return b"'" + value.replace(b"'", b"''") + b"'"


# -- transports, protocols and the server's lifecycle -----------------------------------------


@pytest.mark.parametrize("transport", ["buffered", "framed"])
@pytest.mark.parametrize("protocol", ["binary", "compact"])
def test_every_transport_and_protocol_round_trips(transport: str, protocol: str) -> None:
    with HBaseThriftServer(transport=transport, protocol=protocol) as server:
        connection = happybase.Connection(
            "127.0.0.1", server.port, transport=transport, protocol=protocol
        )
        try:
            connection.create_table("pages", {"f": {}})
            pages = connection.table("pages")
            with pages.batch() as batch:
                batch.put(b"b", {b"f:st": b"2", b"f:\xff": b"\x00'\xff"})
                batch.put(b"a", {b"f:st": b"1"})
            assert pages.row(b"b") == {b"f:st": b"2", b"f:\xff": b"\x00'\xff"}
            assert keys(pages.scan(filter=b"SingleColumnValueFilter('f','st',=,'binary:2')")) == [
                b"b"
            ]
            assert pages.counter_inc(b"a", b"f:n", 5) == 5
            assert connection.tables() == [b"pages"]
            connection.delete_table("pages", disable=True)
            assert connection.tables() == []
        finally:
            connection.close()
        assert server.call_counts["mutateRows"] == 1


def test_stop_closes_connections_and_refuses_new_ones_quickly() -> None:
    server = HBaseThriftServer()
    server.start()
    port = server.port
    assert port != 0
    connection = happybase.Connection("127.0.0.1", port)
    try:
        assert connection.tables() == []
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 2

        started = time.monotonic()
        with pytest.raises(TTransportException):
            happybase.Connection("127.0.0.1", port)
        assert time.monotonic() - started < 1
        with pytest.raises((TTransportException, OSError)):
            connection.tables()
    finally:
        connection.close()
    server.stop()  # stopping twice is harmless


def test_command_line_serves_until_sigterm() -> None:
    command = [sys.executable, "-m", "nutchy.testing.hbase_server", "--port", "0"]
    command += ["--transport", "framed", "--protocol", "compact"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("listening on 127.0.0.1:")
            port = int(line.rsplit(":", 1)[1])
            connection = happybase.Connection(
                "127.0.0.1", port, transport="framed", protocol="compact"
            )
            try:
                connection.create_table("t", {"f": {}})
                assert connection.tables() == [b"t"]
            finally:
                connection.close()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_constructor_rejects_unknown_transport_and_protocol() -> None:
    with pytest.raises(ValueError, match="transport"):
        HBaseThriftServer(transport="http")
    with pytest.raises(ValueError, match="protocol"):
        HBaseThriftServer(protocol="json")
    with pytest.raises(ValueError, match="idle_timeout"):
        HBaseThriftServer(idle_timeout=0)
    with pytest.raises(ValueError, match="max_frame_size"):
        HBaseThriftServer(max_frame_size=0)


def test_defaults_are_hbases() -> None:
    # hbase.thrift.server.socket.read.timeout = 60000 ms;
    # hbase.regionserver.thrift.framed.max_frame_size_in_mb = 2
    server = HBaseThriftServer()
    assert server.idle_timeout == 60
    assert server.max_frame_size == 2 * 1024 * 1024


# -- the Thrift server's limits: idle connections and frame sizes -------------------------------


@pytest.mark.parametrize(("transport", "protocol"), [("buffered", "binary"), ("framed", "compact")])
def test_an_idle_connection_is_closed_by_the_server(transport: str, protocol: str) -> None:
    # As HBase's thread-pool server does after hbase.thrift.server.socket.read.timeout: the
    # client learns it only on its next call, from a dead socket.
    with HBaseThriftServer(transport=transport, protocol=protocol, idle_timeout=0.3) as server:
        busy = happybase.Connection(
            "127.0.0.1", server.port, transport=transport, protocol=protocol
        )
        idle = happybase.Connection(
            "127.0.0.1", server.port, transport=transport, protocol=protocol
        )
        try:
            busy.create_table("t", {"f": {}})
            assert idle.tables() == [b"t"]
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:  # a connection in use is never idle
                busy.table("t").put(b"r", {b"f:a": b"v"})
                time.sleep(0.05)
            with pytest.raises((TTransportException, OSError)):
                idle.tables()
            assert busy.tables() == [b"t"]
            assert server.connection_counts["closed_idle"] == 1

            fresh = happybase.Connection(
                "127.0.0.1", server.port, transport=transport, protocol=protocol
            )
            try:
                assert fresh.table("t").row(b"r") == {b"f:a": b"v"}
            finally:
                fresh.close()
        finally:
            busy.close()
            idle.close()


def test_idle_timeout_none_keeps_connections() -> None:
    with HBaseThriftServer(idle_timeout=None) as server:
        connection = happybase.Connection("127.0.0.1", server.port)
        try:
            assert connection.tables() == []
            time.sleep(0.4)
            assert connection.tables() == []
            assert server.connection_counts["closed_idle"] == 0
        finally:
            connection.close()


@pytest.mark.parametrize("protocol", ["binary", "compact"])
def test_framed_transport_closes_the_connection_on_a_frame_over_the_limit(protocol: str) -> None:
    limit = 64 * 1024
    with HBaseThriftServer(transport="framed", protocol=protocol, max_frame_size=limit) as server:

        def connect() -> happybase.Connection:
            return happybase.Connection(
                "127.0.0.1", server.port, transport="framed", protocol=protocol
            )

        connection = connect()
        try:
            connection.create_table("t", {"f": {}})
            table = connection.table("t")
            table.put(b"small", {b"f:v": b"x" * (limit - 1024)})  # a frame just under the limit
            with pytest.raises((TTransportException, OSError)):
                table.put(b"big", {b"f:v": b"x" * limit})  # over it by the call's own bytes
        finally:
            connection.close()
        assert server.connection_counts["closed_frame_too_large"] == 1
        assert server.cells("t", "big") == {}  # nothing of the refused frame was applied
        again = connect()
        try:
            assert again.table("t").row(b"small") == {b"f:v": b"x" * (limit - 1024)}
            with again.table("t").batch(batch_size=6) as batch:  # 6 rows of 8 KiB a frame
                for i in range(30):
                    batch.put(b"row%02d" % i, {b"f:v": b"y" * 8192})
            assert len(list(again.table("t").scan(row_prefix=b"row"))) == 30
        finally:
            again.close()


class _Chunks:
    """A socket whose recv() hands out preset chunks, for _ClientSocket."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def recv(self, size: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 300), max_size=30),
)
def test_frame_limit_follows_frames_however_reads_cut_them(
    sizes: list[int], cuts: list[int]
) -> None:
    limit = 30
    stream = b"".join(BE32.pack(size) + b"x" * size for size in sizes)
    chunks, position = [], 0
    for cut in sorted(set(cuts)):
        if position < cut < len(stream):
            chunks.append(stream[position:cut])
            position = cut
    chunks.append(stream[position:])
    client = _ClientSocket(_Chunks(chunks), limit)  # type: ignore[arg-type]
    first_too_large = next((i for i, size in enumerate(sizes) if size > limit), None)
    read = b""
    if first_too_large is None:
        while len(read) < len(stream):
            read += client.read(4096)
        assert read == stream
        return
    # The refusal comes with the read that completes the frame's size, before its body.
    header_end = sum(4 + size for size in sizes[:first_too_large]) + 4
    with pytest.raises(TTransportException, match=f"Frame size \\({sizes[first_too_large]}\\)"):
        while True:
            read += client.read(4096)
    assert len(read) < header_end <= client.bytes_read


def test_the_default_frame_limit_is_2_mib() -> None:
    with HBaseThriftServer(transport="framed") as server:
        connection = happybase.Connection("127.0.0.1", server.port, transport="framed")
        try:
            connection.create_table("t", {"f": {}})
            connection.table("t").put(b"r", {b"f:v": b"x" * (2 * 1024 * 1024 - 200)})
            with pytest.raises((TTransportException, OSError)):
                connection.table("t").put(b"r", {b"f:v": b"x" * (2 * 1024 * 1024)})
        finally:
            connection.close()
        assert server.connection_counts["closed_frame_too_large"] == 1


def test_the_buffered_transport_has_no_frame_limit() -> None:
    with HBaseThriftServer(max_frame_size=1024) as server:
        connection = happybase.Connection("127.0.0.1", server.port)
        try:
            connection.create_table("t", {"f": {}})
            connection.table("t").put(b"r", {b"f:v": b"x" * 100_000})
            assert connection.table("t").row(b"r") == {b"f:v": b"x" * 100_000}
        finally:
            connection.close()


# -- row keys and scans -------------------------------------------------------------------------


def test_row_keys_sort_as_unsigned_bytes(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"\xff", b"b", b"a\x00", b"a", b"\x00", b"\x7f", b"\x80"]:
            batch.put(key, {b"f:q": b"v"})
    assert keys(table.scan()) == [b"\x00", b"a", b"a\x00", b"b", b"\x7f", b"\x80", b"\xff"]
    assert keys(table.scan(reverse=True)) == [
        b"\xff",
        b"\x80",
        b"\x7f",
        b"b",
        b"a\x00",
        b"a",
        b"\x00",
    ]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(st.binary(min_size=1, max_size=3), min_size=1, max_size=20, unique=True),
    prefix=st.binary(min_size=1, max_size=2),
    bounds=st.tuples(st.binary(max_size=2), st.binary(max_size=2)),
)
def test_scans_match_a_sorted_model(
    server: HBaseThriftServer, rows: list[bytes], prefix: bytes, bounds: tuple[bytes, bytes]
) -> None:
    connection = happybase.Connection("127.0.0.1", server.port)
    try:
        name = _new_table(connection, {"f": {}})
        table = connection.table(name)
        with table.batch() as batch:
            for row in rows:
                batch.put(row, {b"f:q": row})
        model = sorted(rows)
        start, stop = sorted(bounds)
        assert keys(table.scan(batch_size=3)) == model
        assert keys(table.scan(row_prefix=prefix)) == [r for r in model if r.startswith(prefix)]
        assert keys(table.scan(row_start=start, row_stop=stop or None)) == [
            r for r in model if r >= start and (not stop or r < stop)
        ]
        assert keys(table.scan(reverse=True, batch_size=2)) == model[::-1]
        connection.delete_table(name, disable=True)
    finally:
        connection.close()


def test_scan_start_stop_prefix_and_limit(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a", b"b", b"ba", b"bb", b"b\xff", b"c"]:
            batch.put(key, {b"f:q": key})
    assert keys(table.scan(row_start=b"b", row_stop=b"bb")) == [b"b", b"ba"]
    assert keys(table.scan(row_start=b"b0")) == [b"ba", b"bb", b"b\xff", b"c"]
    assert keys(table.scan(row_stop=b"b")) == [b"a"]
    assert keys(table.scan(row_prefix=b"b")) == [b"b", b"ba", b"bb", b"b\xff"]
    assert keys(table.scan(row_prefix=b"b\xff")) == [b"b\xff"]
    assert keys(table.scan(row_prefix=b"zz")) == []
    assert keys(table.scan(row_start=b"b", limit=2)) == [b"b", b"ba"]


def test_reverse_scans_follow_hbase_and_happybase(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a", b"b", b"ba", b"bb", b"c"]:
            batch.put(key, {b"f:q": key})
    assert keys(table.scan(reverse=True)) == [b"c", b"bb", b"ba", b"b", b"a"]
    # The start row is the larger key and inclusive; the stop row is exclusive.
    assert keys(table.scan(row_start=b"bb", row_stop=b"a", reverse=True)) == [b"bb", b"ba", b"b"]
    assert keys(table.scan(row_start=b"bz", reverse=True)) == [b"bb", b"ba", b"b", b"a"]
    assert keys(table.scan(reverse=True, limit=2)) == [b"c", b"bb"]
    # happybase sends start=increment(prefix), stop=prefix for a reversed prefix scan, so the row
    # equal to the prefix is left out and the row equal to increment(prefix) comes back.
    assert keys(table.scan(row_prefix=b"b", reverse=True)) == [b"c", b"bb", b"ba"]


def test_scanner_pages_by_batch_size_and_ends_on_an_empty_list(
    server: HBaseThriftServer, table: happybase.Table
) -> None:
    with table.batch() as batch:
        for i in range(5):
            batch.put(b"r%d" % i, {b"f:q": b"v"})
    server.reset_stats()
    assert len(list(table.scan(batch_size=2))) == 5
    # 2 + 2 + 1 rows, then the empty list that ends the scan.
    assert server.call_log == ["scannerOpenWithScan"] + ["scannerGetList"] * 4 + ["scannerClose"]
    assert server.call_counts["scannerGetList"] == 4
    assert server.rows_shipped == 5

    server.reset_stats()
    assert keys(table.scan(batch_size=2, limit=3)) == [b"r0", b"r1", b"r2"]
    assert server.call_counts["scannerGetList"] == 2  # happybase asks for min(2, 3 - 2) last
    assert server.rows_shipped == 3


def test_writes_during_a_scan_neither_repeat_nor_skip_rows(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a", b"b", b"c", b"d", b"e", b"f"]:
            batch.put(key, {b"f:q": key})
    seen = []
    for key, _ in table.scan(batch_size=2):
        seen.append(key)
        if key == b"b":
            table.put(b"a0", {b"f:q": b"behind"})  # before the scanner: not seen
            table.put(b"c5", {b"f:q": b"ahead"})  # after it: seen
            table.delete(b"e")  # deleted before the scanner reaches it
    assert seen == [b"a", b"b", b"c", b"c5", b"d", b"f"]


def test_scan_columns_families_and_the_empty_qualifier(table: happybase.Table) -> None:
    table.put(b"r", {b"f:": b"empty", b"f:a": b"a", b"m:x": b"x"})
    assert table.row(b"r", columns=[b"f:"]) == {b"f:": b"empty"}
    assert table.row(b"r", columns=[b"f"]) == {b"f:": b"empty", b"f:a": b"a"}
    assert dict(table.scan(columns=[b"f:a", b"m"])) == {b"r": {b"f:a": b"a", b"m:x": b"x"}}
    # As with Scan.addFamily/addColumn: a column after its family narrows the family, a family
    # after one of its columns widens it again.
    assert table.row(b"r", columns=[b"f", b"f:a"]) == {b"f:a": b"a"}
    assert table.row(b"r", columns=[b"f:a", b"f"]) == {b"f:": b"empty", b"f:a": b"a"}
    assert table.row(b"r", columns=[b"f:missing"]) == {}
    assert keys(table.scan(columns=[b"f:missing"])) == []

    table.delete(b"r", columns=[b"f:"])
    assert table.row(b"r") == {b"f:a": b"a", b"m:x": b"x"}
    table.delete(b"r", columns=[b"f"])
    assert table.row(b"r") == {b"m:x": b"x"}


def test_sorted_columns_order_by_family_then_qualifier(connection: happybase.Connection) -> None:
    table = connection.table(_new_table(connection, {"f": {}, "f1": {}}))
    table.put(b"r", {b"f1:a": b"3", b"f:z": b"2", b"f:b": b"1"})
    [(_, row)] = table.scan(sorted_columns=True)
    # Not the byte order of b"fam:qual" strings, where b"f1:a" < b"f:b".
    assert list(row) == [b"f:b", b"f:z", b"f1:a"]


def test_scan_batching_splits_wide_rows(table: happybase.Table) -> None:
    table.put(b"r", {b"f:%d" % i: b"v" for i in range(5)})
    table.put(b"s", {b"f:0": b"v"})
    results = list(table.scan(scan_batching=2, batch_size=1))
    assert [(key, sorted(row)) for key, row in results] == [
        (b"r", [b"f:0", b"f:1"]),
        (b"r", [b"f:2", b"f:3"]),
        (b"r", [b"f:4"]),
        (b"s", [b"f:0"]),
    ]


def test_rows_keeps_the_requested_order_and_omits_missing_rows(table: happybase.Table) -> None:
    table.put(b"a", {b"f:x": b"1", b"f:y": b"2"})
    table.put(b"b", {b"f:y": b"3"})
    assert table.rows([b"b", b"missing", b"a"], columns=[b"f:x", b"f:y"]) == [
        (b"b", {b"f:y": b"3"}),
        (b"a", {b"f:x": b"1", b"f:y": b"2"}),
    ]
    assert table.rows([b"b"], columns=[b"f:x"]) == []


# -- timestamps and versions ---------------------------------------------------------------------


def test_latest_timestamp_is_stamped_with_server_time(table: happybase.Table) -> None:
    before = time.time_ns() // 1_000_000
    table.put(b"r", {b"f:a": b"v"})
    after = time.time_ns() // 1_000_000
    _, ts = table.row(b"r", include_timestamp=True)[b"f:a"]
    assert before <= ts <= after
    table.put(b"r", {b"f:b": b"v"}, timestamp=1234)
    assert table.row(b"r", include_timestamp=True)[b"f:b"] == (b"v", 1234)


def test_read_timestamps_are_exclusive_upper_bounds(table: happybase.Table) -> None:
    table.put(b"r", {b"f:a": b"v10"}, timestamp=10)
    table.put(b"r", {b"f:a": b"v20"}, timestamp=20)
    assert table.row(b"r") == {b"f:a": b"v20"}
    assert table.row(b"r", timestamp=21) == {b"f:a": b"v20"}
    assert table.row(b"r", timestamp=20) == {b"f:a": b"v10"}
    assert table.row(b"r", timestamp=10) == {}
    assert dict(table.scan(timestamp=20)) == {b"r": {b"f:a": b"v10"}}
    assert table.rows([b"r"], timestamp=20) == [(b"r", {b"f:a": b"v10"})]
    assert table.cells(b"r", b"f:a", include_timestamp=True) == [(b"v20", 20), (b"v10", 10)]
    assert table.cells(b"r", b"f:a", timestamp=20) == [b"v10"]
    assert table.cells(b"r", b"f:a", versions=1) == [b"v20"]


def test_max_versions_per_family(server: HBaseThriftServer, table: happybase.Table) -> None:
    for ts in range(1, 6):
        table.put(b"r", {b"f:a": b"f%d" % ts, b"m:a": b"m%d" % ts}, timestamp=ts)
    assert table.cells(b"r", b"f:a") == [b"f5", b"f4", b"f3"]
    assert table.cells(b"r", b"m:a") == [b"m5"]
    assert server.cells(table.name, b"r") == {
        b"f:a": [(5, b"f5"), (4, b"f4"), (3, b"f3")],
        b"m:a": [(5, b"m5")],
    }
    # A write at an existing timestamp replaces that version; an older one falls off the end.
    table.put(b"r", {b"f:a": b"f4-again"}, timestamp=4)
    table.put(b"r", {b"f:a": b"too-old"}, timestamp=1)
    assert table.cells(b"r", b"f:a") == [b"f5", b"f4-again", b"f3"]


# -- mutations -----------------------------------------------------------------------------------


def test_batch_applies_all_puts_before_all_deletes(table: happybase.Table) -> None:
    table.put(b"r", {b"f:a": b"old", b"f:b": b"keep"})
    with table.batch() as batch:
        batch.delete(b"r", columns=[b"f:a"])
        batch.put(b"r", {b"f:a": b"new"})
        batch.put(b"s", {b"f:a": b"new"})
        batch.delete(b"s")
    assert table.row(b"r") == {b"f:b": b"keep"}
    assert table.row(b"s") == {}


def test_single_row_mutate_applies_deletes_before_puts(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    table.put(b"r", {b"f:a": b"old", b"f:b": b"old"})
    mutation = Hbase_thrift.Mutation
    connection.client.mutateRow(
        table.name,
        b"r",
        [
            mutation(column=b"f:a", value=b"new"),
            mutation(column=b"f", value=b"no qualifier: HBase logs a warning and drops it"),
            mutation(isDelete=True, column=b"f"),
        ],
        {},
    )
    assert table.row(b"r") == {b"f:a": b"new"}


def test_family_replace_idiom_keeps_only_the_new_cells(
    server: HBaseThriftServer, table: happybase.Table
) -> None:
    t = 1_700_000_000_000
    table.put(b"r", {b"f:a": b"1", b"f:b": b"2", b"m:x": b"other family"}, timestamp=t - 10)
    with table.batch(timestamp=t - 1) as batch:
        batch.delete(b"r", columns=[b"f"])
    with table.batch(timestamp=t) as batch:
        batch.put(b"r", {b"f:c": b"3"})
    assert table.row(b"r") == {b"f:c": b"3", b"m:x": b"other family"}
    assert server.cells(table.name, b"r") == {
        b"f:c": [(t, b"3")],
        b"m:x": [(t - 10, b"other family")],
    }
    # Done in one batch at the same timestamp, the family delete also removes the new cell.
    with table.batch(timestamp=t + 1) as batch:
        batch.delete(b"r", columns=[b"f"])
        batch.put(b"r", {b"f:d": b"4"})
    assert table.row(b"r") == {b"m:x": b"other family"}


def test_delete_with_timestamp_removes_only_older_versions(table: happybase.Table) -> None:
    for ts in (100, 200, 300):
        table.put(b"r", {b"f:a": b"v%d" % ts, b"f:b": b"v%d" % ts}, timestamp=ts)
    table.delete(b"r", columns=[b"f:a"], timestamp=200)
    assert table.cells(b"r", b"f:a") == [b"v300"]
    assert table.cells(b"r", b"f:b") == [b"v300", b"v200", b"v100"]
    table.delete(b"r", timestamp=250)  # every family of the row
    assert table.cells(b"r", b"f:b") == [b"v300"]


def test_delete_markers_mask_later_puts_until_major_compaction(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    table.put(b"r", {b"f:a": b"v100"}, timestamp=100)
    table.delete(b"r", columns=[b"f:a"], timestamp=200)
    table.put(b"r", {b"f:a": b"v150"}, timestamp=150)
    table.put(b"r", {b"f:a": b"v200"}, timestamp=200)
    assert table.row(b"r") == {}
    table.put(b"r", {b"f:a": b"v201"}, timestamp=201)
    assert table.cells(b"r", b"f:a") == [b"v201"]
    connection.compact_table(table.name, major=True)
    table.put(b"r", {b"f:a": b"v150"}, timestamp=150)
    assert table.cells(b"r", b"f:a") == [b"v201", b"v150"]


def test_a_put_without_qualifier_is_rejected_and_nothing_is_applied(
    table: happybase.Table,
) -> None:
    with pytest.raises(TApplicationException) as raised, table.batch() as batch:
        batch.put(b"r", {b"f:a": b"fine"})
        batch.put(b"r", {b"f": b"no qualifier"})
    assert "Invalid famAndQf" in message(raised)
    assert raised.value.type == TApplicationException.INTERNAL_ERROR
    assert table.row(b"r") == {}


def test_unknown_families_raise_io_error(table: happybase.Table) -> None:
    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.put(b"r", {b"f:a": b"v", b"nope:a": b"v"})
    assert "NoSuchColumnFamilyException" in message(raised)
    assert table.row(b"r") == {}
    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.row(b"r", columns=[b"nope"])
    assert "NoSuchColumnFamilyException" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        list(table.scan(columns=[b"nope:a"]))
    assert "NoSuchColumnFamilyException" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.delete(b"r", columns=[b"nope:a"])
    assert "NoSuchColumnFamilyException" in message(raised)


def test_delete_all_row(connection: happybase.Connection, table: happybase.Table) -> None:
    table.put(b"r", {b"f:a": b"1", b"m:b": b"2"})
    table.put(b"s", {b"f:a": b"1"})
    connection.client.deleteAllRow(table.name, b"r", {})
    assert table.row(b"r") == {}
    assert keys(table.scan()) == [b"s"]


def test_undeclared_errors_become_application_errors_and_keep_the_connection(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    with pytest.raises(TApplicationException) as raised:
        table.put(b"", {b"f:a": b"v"})
    assert "Row length is 0" in message(raised)
    assert raised.value.type == TApplicationException.INTERNAL_ERROR
    with pytest.raises(TApplicationException) as raised:
        connection.client.getRowOrBefore(table.name, b"r", b"f")
    assert raised.value.type == TApplicationException.UNKNOWN_METHOD
    table.put(b"r", {b"f:a": b"v"})
    assert table.row(b"r") == {b"f:a": b"v"}


# -- counters ------------------------------------------------------------------------------------


def test_counters_are_8_byte_big_endian(table: happybase.Table) -> None:
    assert table.counter_get(b"r", b"f:n") == 0
    assert table.counter_inc(b"r", b"f:n", 10) == 10
    assert table.counter_dec(b"r", b"f:n", 3) == 7
    assert table.row(b"r") == {b"f:n": BE64.pack(7)}
    table.counter_set(b"r", b"f:n", -5)
    assert table.counter_inc(b"r", b"f:n") == -4
    assert table.counter_inc(b"r", b"f") == 1  # a bare family is the empty qualifier
    assert table.row(b"r", columns=[b"f:"]) == {b"f:": BE64.pack(1)}
    table.put(b"r", {b"f:text": b"abc"})
    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.counter_inc(b"r", b"f:text")
    assert "Field is not a long" in message(raised)


def test_counters_from_a_connection_pool_in_four_threads(server: HBaseThriftServer) -> None:
    pool = happybase.ConnectionPool(4, host="127.0.0.1", port=server.port)
    with pool.connection() as connection:
        name = _new_table(connection, {"f": {}})

    def work() -> None:
        for _ in range(200):
            with pool.connection() as connection:
                connection.table(name).counter_inc(b"r", b"f:n")

    with ThreadPoolExecutor(4) as executor:
        for future in [executor.submit(work) for _ in range(4)]:
            future.result()  # re-raises what failed in the thread
    with pool.connection() as connection:
        assert connection.table(name).counter_get(b"r", b"f:n") == 800
        connection.delete_table(name, disable=True)


# -- filters -------------------------------------------------------------------------------------


@pytest.fixture
def statuses(table: happybase.Table) -> happybase.Table:
    """Rows ``a`` (st=1), ``b`` (st=2) and ``c`` (no st), each with an ``f:x``."""
    table.put(b"a", {b"f:st": b"1", b"f:x": b"a"})
    table.put(b"b", {b"f:st": b"2", b"f:x": b"b"})
    table.put(b"c", {b"f:x": b"c"})
    return table


def test_single_column_value_filter_keeps_rows_missing_the_column_by_default(
    statuses: happybase.Table,
) -> None:
    base = b"SingleColumnValueFilter('f','st',=,'binary:1'"
    assert keys(statuses.scan(filter=base + b")")) == [b"a", b"c"]
    assert keys(statuses.scan(filter=base + b",false,true)")) == [b"a", b"c"]
    assert keys(statuses.scan(filter=base + b",true,true)")) == [b"a"]
    assert keys(statuses.scan(filter=base + b",TRUE,True)")) == [b"a"]


def test_single_column_value_filter_only_sees_scanned_columns(statuses: happybase.Table) -> None:
    strict = b"SingleColumnValueFilter('f','st',=,'binary:1',true,true)"
    lenient = b"SingleColumnValueFilter('f','st',=,'binary:1')"
    # Not reading f:st, the filter finds it missing in every row.
    assert keys(statuses.scan(columns=[b"f:x"], filter=strict)) == []
    assert keys(statuses.scan(columns=[b"f:x"], filter=lenient)) == [b"a", b"b", b"c"]
    assert dict(statuses.scan(columns=[b"f:st", b"f:x"], filter=strict)) == {
        b"a": {b"f:st": b"1", b"f:x": b"a"}
    }


@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        (b"=", [b"b"]),
        (b"!=", [b"a", b"c"]),
        (b"<", [b"a"]),
        (b"<=", [b"a", b"b"]),
        (b">", [b"c"]),
        (b">=", [b"b", b"c"]),
    ],
)
def test_compare_operators(table: happybase.Table, operator: bytes, expected: list[bytes]) -> None:
    for key, value in [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]:
        table.put(key, {b"f:v": value})
    scvf = b"SingleColumnValueFilter('f','v'," + operator + b",'binary:2',true,true)"
    assert keys(table.scan(filter=scvf)) == expected
    assert keys(table.scan(filter=b"RowFilter(" + operator + b",'binary:b')")) == expected


def test_binary_comparison_of_8_byte_big_endian_times(
    server: HBaseThriftServer, table: happybase.Table
) -> None:
    # 0x27 is the quote byte: 39 and 0x2727 need the doubled-quote escape in the filter string.
    times = {b"r%d" % i: t for i, t in enumerate([0, 39, 255, 256, 0x2727, 2**32, 2**40])}
    with table.batch() as batch:
        for key, t in times.items():
            batch.put(key, {b"f:ts": BE64.pack(t)})
    table.put(b"never-fetched", {b"f:x": b"v"})
    for bound in [39, 256, 0x2727, 2**32]:
        scvf = b"SingleColumnValueFilter('f','ts',<=," + quote(b"binary:" + BE64.pack(bound))
        server.reset_stats()
        due = keys(table.scan(filter=scvf + b",true,true)"))
        assert due == sorted(key for key, t in times.items() if t <= bound)
        assert server.rows_shipped == len(due)  # the filter ran on the server
        assert keys(table.scan(filter=scvf + b",false,true)")) == sorted([*due, b"never-fetched"])


def test_binary_values_with_quotes_and_binaryprefix(table: happybase.Table) -> None:
    table.put(b"a", {b"f:v": b"it's"})
    table.put(b"b", {b"f:v": b"it''s"})
    table.put(b"c", {b"f:v": b"\x00'\xff"})
    scvf = b"SingleColumnValueFilter('f','v',=,%s,true,true)"
    assert keys(table.scan(filter=scvf % quote(b"binary:it's"))) == [b"a"]
    assert keys(table.scan(filter=scvf % quote(b"binary:it''s"))) == [b"b"]
    assert keys(table.scan(filter=scvf % quote(b"binary:\x00'\xff"))) == [b"c"]
    assert keys(table.scan(filter=scvf % quote(b"binaryprefix:it'"))) == [b"a", b"b"]
    assert keys(table.scan(filter=b"PrefixFilter(" + quote(b"\x00") + b")")) == []


def test_comparisons_are_unsigned_and_case_sensitive(table: happybase.Table) -> None:
    for key, value in [
        (b"1", b"B"),
        (b"2", b"b"),
        (b"3", b"\x7f"),
        (b"4", b"\x80"),
        (b"5", b"\xff"),
    ]:
        table.put(key, {b"f:v": value})
    above_a = b"SingleColumnValueFilter('f','v',>,'binary:a',true,true)"
    assert keys(table.scan(filter=above_a)) == [b"2", b"3", b"4", b"5"]
    above_7f = b"SingleColumnValueFilter('f','v',>," + quote(b"binary:\x7f") + b",true,true)"
    assert keys(table.scan(filter=above_7f)) == [b"4", b"5"]


def test_filters_see_only_the_time_range(table: happybase.Table) -> None:
    table.put(b"r", {b"f:st": b"old"}, timestamp=10)
    table.put(b"r", {b"f:st": b"new"}, timestamp=20)
    is_old = b"SingleColumnValueFilter('f','st',=,'binary:old',true,true)"
    assert keys(table.scan(filter=is_old)) == []
    assert dict(table.scan(filter=is_old, timestamp=20)) == {b"r": {b"f:st": b"old"}}
    assert keys(table.scan(filter=is_old, timestamp=10)) == []


def test_latest_version_only(table: happybase.Table) -> None:
    table.put(b"r", {b"f:st": b"fetched"}, timestamp=1)
    table.put(b"r", {b"f:st": b"parsed"}, timestamp=2)
    latest = b"SingleColumnValueFilter('f','st',=,'binary:fetched',true,true)"
    any_version = b"SingleColumnValueFilter('f','st',=,'binary:fetched',true,false)"
    assert keys(table.scan(filter=latest)) == []
    # An older version passes the test, but the row still shows only its newest value.
    assert dict(table.scan(filter=any_version)) == {b"r": {b"f:st": b"parsed"}}


def test_row_key_and_cell_filters(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a1", b"a2", b"b1", b"b2", b"c1"]:
            batch.put(key, {b"f:z": b"last", b"f:a": b"first", b"m:q": b"other"})
    assert keys(table.scan(filter=b"PrefixFilter('b')")) == [b"b1", b"b2"]
    assert dict(table.scan(row_prefix=b"a", filter=b"KeyOnlyFilter()")) == {
        b"a1": {b"f:a": b"", b"f:z": b"", b"m:q": b""},
        b"a2": {b"f:a": b"", b"f:z": b"", b"m:q": b""},
    }
    assert dict(table.scan(row_prefix=b"a", filter=b"FirstKeyOnlyFilter()")) == {
        b"a1": {b"f:a": b"first"},
        b"a2": {b"f:a": b"first"},
    }
    assert dict(
        table.scan(filter=b"PrefixFilter('c') AND FirstKeyOnlyFilter() AND KeyOnlyFilter()")
    ) == {b"c1": {b"f:a": b""}}


def test_filter_lists_merge_cell_verdicts_like_hbase(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a1", b"b1"]:
            batch.put(key, {b"f:a": b"1", b"f:b": b"2", b"f:st": b"ok"})
    # OR: a row failing the prefix still gets the cells FirstKeyOnlyFilter includes.
    assert dict(table.scan(filter=b"PrefixFilter('a') OR FirstKeyOnlyFilter()")) == {
        b"a1": {b"f:a": b"1", b"f:b": b"2", b"f:st": b"ok"},
        b"b1": {b"f:a": b"1"},
    }
    # AND: the value filter tests the real value; KeyOnlyFilter only empties what is returned.
    both = b"KeyOnlyFilter() AND SingleColumnValueFilter('f','st',=,'binary:ok',true,true)"
    assert dict(table.scan(filter=both, reverse=True)) == {
        b"b1": {b"f:a": b"", b"f:b": b"", b"f:st": b""},
        b"a1": {b"f:a": b"", b"f:b": b"", b"f:st": b""},
    }
    assert keys(table.scan(filter=both, reverse=True)) == [b"b1", b"a1"]


def test_and_binds_tighter_than_or(table: happybase.Table) -> None:
    with table.batch() as batch:
        for key in [b"a1", b"a2", b"b1", b"b2", b"c1"]:
            batch.put(key, {b"f:q": key})
    a, b, b2 = b"PrefixFilter('a')", b"PrefixFilter('b')", b"RowFilter(=,'binary:b2')"
    assert keys(table.scan(filter=a + b" OR " + b + b" AND " + b2)) == [b"a1", b"a2", b"b2"]
    assert keys(table.scan(filter=b"(" + a + b" OR " + b + b") AND " + b2)) == [b"b2"]
    assert keys(table.scan(filter=b"(" + a + b")OR(" + b + b")")) == [b"a1", b"a2", b"b1", b"b2"]
    assert keys(table.scan(filter=b"PrefixFilter ('c')")) == [b"c1"]


@pytest.mark.parametrize(
    "filter_string",
    [
        b"\tPrefixFilter('a') ",
        b"( \tPrefixFilter('a')\t)",
        b"PrefixFilter ( 'a' )",
        b"PrefixFilter('a')AND(RowFilter(=,'binary:a1'))",
        b"(PrefixFilter('a'))\t AND RowFilter(=, 'binary:a1')",
        b"SingleColumnValueFilter( 'f' , 'q' , = , 'binary:a1' , true , true )",
        b"PrefixFilter('a\tb\n') OR PrefixFilter('a1')",  # anything goes inside quotes
    ],
)
def test_filter_strings_take_spaces_and_tabs_where_hbase_skips_them(
    table: happybase.Table, filter_string: bytes
) -> None:
    # ParseFilter.parseFilterString skips ' ' and '\t' between filters, operators and
    # parentheses; getFilterArguments skips ' ' around arguments and commas.
    with table.batch() as batch:
        for key in [b"a1", b"b1"]:
            batch.put(key, {b"f:q": key})
    assert keys(table.scan(filter=filter_string)) == [b"a1"]


@pytest.mark.parametrize(
    ("filter_string", "expected"),
    [
        # A newline or carriage return is never skipped: it starts a filter name.
        (b"\nPrefixFilter('a')", "Filter Name \nPrefixFilter not supported"),
        (b"PrefixFilter('a')\r\n", "unexpected"),
        (b"PrefixFilter('a')\nAND PrefixFilter('a')", "unexpected"),
        # A name runs to the first '(' or space, so a tab or newline before '(' is in it.
        (b"PrefixFilter\t('a')", "Filter Name PrefixFilter\t not supported"),
        (b"PrefixFilter\n('a')", "Filter Name PrefixFilter\n not supported"),
        # AND and OR are operators only between spaces or parentheses.
        (b"PrefixFilter('a')\tAND PrefixFilter('a')", "unexpected"),
        (b"PrefixFilter('a') OR\tPrefixFilter('a')", "unexpected"),
        # Inside the argument list only spaces separate.
        (b"PrefixFilter(\t'a')", "quoted argument"),
        (b"RowFilter(=,\n'binary:a1')", "quoted argument"),
        (b"SingleColumnValueFilter('f','q',=,'binary:a1',\ttrue,true)", "Boolean"),
        (b"RowFilter(\t=,'binary:a1')", "compare operator"),
    ],
)
def test_filter_strings_reject_whitespace_where_hbase_does(
    table: happybase.Table, filter_string: bytes, expected: str
) -> None:
    table.put(b"a1", {b"f:q": b"a1"})
    with pytest.raises(TApplicationException) as raised:
        list(table.scan(filter=filter_string))
    assert expected in message(raised)
    assert raised.value.type == TApplicationException.INTERNAL_ERROR


@pytest.mark.parametrize(
    ("filter_string", "expected"),
    [
        (b"ValueFilter(=,'binary:x')", "ValueFilter is not supported"),
        (b"ColumnPrefixFilter('a')", "ColumnPrefixFilter is not supported"),
        (b"NoSuchFilter()", "Filter Name NoSuchFilter not supported"),
        (b"SingleColumnValueFilter('f','q',=,'regexstring:.*')", "regexstring"),
        (b"SingleColumnValueFilter('f','q',=,'substring:x')", "substring"),
        (b"SingleColumnValueFilter('f','q',~,'binary:x')", "compare operator"),
        (b"SingleColumnValueFilter('f','q',=,'binary:x',true)", "expects 4 or 6"),
        (b"SingleColumnValueFilter('f','q',=,'binary:x',yes,true)", "Boolean"),
        (b"SingleColumnValueFilter(f,'q',=,'binary:x')", "quoted"),
        (b"SKIP PrefixFilter('a')", "SKIP"),
        (b"WHILE PrefixFilter('a')", "WHILE"),
        (b"PrefixFilter('a'", "end of filter string"),
        (b"PrefixFilter('a)", "unterminated"),
        (b"PrefixFilter('a') OR (PrefixFilter('b')", "end of filter string"),
        (b"PrefixFilter('a') AND", "unexpected 'AND'"),  # not followed by a space or (
        (b"AND PrefixFilter('a')", "expected ("),  # not after a space or ): a filter name
        (b"PrefixFilter('a') AND AND PrefixFilter('b')", "misplaced operator"),
        (b"PrefixFilter('a') PrefixFilter('b')", "unexpected"),
        (b"PrefixFilter('a') and PrefixFilter('b')", "unexpected"),
        (b"", "empty filter string"),
    ],
)
def test_unsupported_or_malformed_filters_fail_loudly(
    table: happybase.Table, filter_string: bytes, expected: str
) -> None:
    table.put(b"r", {b"f:q": b"x"})
    with pytest.raises(TApplicationException) as raised:
        list(table.scan(filter=filter_string))
    assert expected in message(raised)
    assert raised.value.type == TApplicationException.INTERNAL_ERROR
    assert table.row(b"r") == {b"f:q": b"x"}  # the connection is still usable


# -- the rest of the Thrift API that happybase does not use ------------------------------------


def test_check_and_put_append_and_increment(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    client, name = connection.client, table.name
    put = Hbase_thrift.Mutation(column=b"f:lock", value=b"mine")
    assert client.checkAndPut(name, b"r", b"f:lock", None, put, {}) is True
    assert client.checkAndPut(name, b"r", b"f:lock", None, put, {}) is False
    other = Hbase_thrift.Mutation(column=b"f:lock", value=b"theirs")
    assert client.checkAndPut(name, b"r", b"f:lock", b"nope", other, {}) is False
    assert client.checkAndPut(name, b"r", b"f:lock", b"mine", other, {}) is True
    assert table.row(b"r") == {b"f:lock": b"theirs"}

    [cell] = client.append(Hbase_thrift.TAppend(name, b"r", [b"f:log"], [b"a"]))
    assert cell.value == b"a"
    [cell] = client.append(Hbase_thrift.TAppend(name, b"r", [b"f:log"], [b"b"]))
    assert cell.value == b"ab"

    client.incrementRows([Hbase_thrift.TIncrement(name, b"r", b"f:n", 2)] * 3)
    assert table.counter_get(b"r", b"f:n") == 6


@pytest.mark.parametrize("expected", [None, b""])
def test_check_and_put_with_no_expected_value_matches_an_absent_or_empty_cell(
    connection: happybase.Connection, table: happybase.Table, expected: bytes | None
) -> None:
    # HRegion.checkAndMutate: valueIsNull = value == null || value.length == 0; it matches when
    # the Get finds no cell, or a cell whose value is empty. The Thrift1 handler sends
    # ifNotExists() for a null value and ifEquals(value) otherwise, and both reach that test.
    client, name = connection.client, table.name

    def check_and_put(row: bytes) -> bool:
        put = Hbase_thrift.Mutation(column=b"f:lock", value=b"mine")
        return bool(client.checkAndPut(name, row, b"f:lock", expected, put, {}))

    table.put(b"empty", {b"f:lock": b""})
    table.put(b"taken", {b"f:lock": b"theirs"})
    table.put(b"emptied", {b"f:lock": b"old"})
    table.put(b"emptied", {b"f:lock": b""})  # only the newest version counts
    table.put(b"other", {b"f:other": b"x"})  # the row exists, the column does not
    table.put(b"deleted", {b"f:lock": b"gone"})
    table.delete(b"deleted", [b"f:lock"])

    for row in [b"absent", b"empty", b"emptied", b"other", b"deleted"]:
        assert check_and_put(row) is True, row
        assert table.row(row, [b"f:lock"]) == {b"f:lock": b"mine"}, row
        assert check_and_put(row) is False, row  # now it holds a value
    assert check_and_put(b"taken") is False
    assert table.row(b"taken") == {b"f:lock": b"theirs"}


def test_check_and_put_with_a_value_matches_only_that_value(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    client, name = connection.client, table.name
    put = Hbase_thrift.Mutation(column=b"f:lock", value=b"next")
    table.put(b"empty", {b"f:lock": b""})
    assert client.checkAndPut(name, b"absent", b"f:lock", b"x", put, {}) is False
    assert client.checkAndPut(name, b"empty", b"f:lock", b"x", put, {}) is False
    table.put(b"r", {b"f:lock": b"x"})
    assert client.checkAndPut(name, b"r", b"f:lock", b"xx", put, {}) is False
    assert client.checkAndPut(name, b"r", b"f:lock", b"x", put, {}) is True
    assert table.row(b"r") == {b"f:lock": b"next"}


def test_check_and_put_writes_after_the_cell_it_checked(
    server: HBaseThriftServer, connection: happybase.Connection, table: happybase.Table
) -> None:
    # HRegion stamps the put max(now, checked cell's timestamp) (HBASE-14054), so a cell written
    # with a timestamp ahead of the server's clock does not hide what replaced it.
    ahead = int(time.time() * 1000) + 3_600_000
    table.put(b"r", {b"f:lock": b"old"}, timestamp=ahead)
    put = Hbase_thrift.Mutation(column=b"f:lock", value=b"new")
    assert connection.client.checkAndPut(table.name, b"r", b"f:lock", b"old", put, {}) is True
    assert table.row(b"r") == {b"f:lock": b"new"}
    [(ts, value), *_] = server.cells(table.name, b"r")[b"f:lock"]
    assert (ts, value) == (ahead, b"new")


def _call_size(protocol: str, method: str, args: object) -> int:
    """The bytes of a call to *method* as a client writes it, without transport framing."""
    buffer = TMemoryBuffer()
    writer = (TBinaryProtocol if protocol == "binary" else TCompactProtocol)(buffer)
    writer.write_message_begin(method, TMessageType.CALL, 1)
    writer.write_struct(args)
    writer.write_message_end()
    return len(buffer.getvalue())


@pytest.mark.parametrize(("transport", "protocol"), [("buffered", "binary"), ("framed", "compact")])
def test_stats_count_calls_and_their_bytes_by_method(transport: str, protocol: str) -> None:
    with HBaseThriftServer(transport=transport, protocol=protocol) as server:
        connection = happybase.Connection(
            "127.0.0.1", server.port, transport=transport, protocol=protocol
        )
        try:
            connection.create_table("t", {"f": {}})
            table = connection.table("t")
            server.reset_stats()
            rows = {b"r%03d" % i: {b"f:v": b"x" * (100 * i)} for i in range(1, 31)}
            with table.batch(batch_size=10) as batch:
                for key, data in rows.items():
                    batch.put(key, data)
            assert dict(table.rows(list(rows))) == rows
            assert len(list(table.scan(batch_size=7))) == 30

            stats = server.stats()
            sizes = []
            for first in (1, 11, 21):  # the batches as happybase sends them
                mutations = [
                    Hbase_thrift.BatchMutation(
                        row=key, mutations=[Hbase_thrift.Mutation(column=b"f:v", value=value)]
                    )
                    for key in list(rows)[first - 1 : first + 9]
                    for value in [rows[key][b"f:v"]]
                ]
                args = Hbase_thrift.Hbase.mutateRows_args(
                    tableName=b"t", rowBatches=mutations, attributes={}
                )
                sizes.append(_call_size(protocol, "mutateRows", args))
            framing = 4 if transport == "framed" else 0
            assert stats["mutateRows"].calls == 3
            assert stats["mutateRows"].request_bytes == sum(sizes) + 3 * framing
            assert stats["mutateRows"].max_request_bytes == sizes[-1] + framing
            assert stats["mutateRows"].response_bytes < 3 * 30  # three empty answers
            assert set(stats) == {
                "mutateRows",
                "getRowsWithColumns",
                "scannerOpenWithScan",
                "scannerGetList",
                "scannerClose",
            }
            assert stats["getRowsWithColumns"].calls == 1
            assert stats["scannerGetList"].calls == 6  # 7+7+7+7+2, then an empty page
            values = sum(len(data[b"f:v"]) for data in rows.values())
            assert stats["getRowsWithColumns"].response_bytes > values
            assert stats["scannerGetList"].response_bytes > values
            assert stats["scannerGetList"].max_request_bytes < 50

            server.reset_stats()
            assert server.stats() == {}
        finally:
            connection.close()


def test_reset_drops_tables_and_statistics() -> None:
    with HBaseThriftServer() as server:
        connection = happybase.Connection("127.0.0.1", server.port)
        try:
            connection.create_table("t", {"f": {}})
            connection.table("t").put(b"r", {b"f:a": b"v"})
            [(ts, value)] = server.cells("t", "r")[b"f:a"]
            assert value == b"v"
            assert ts > 1_600_000_000_000
            assert server.cells("t", "missing") == {}
            server.reset()
            assert server.call_counts == {}
            assert connection.tables() == []
            assert server.call_log == ["getTableNames"]
        finally:
            connection.close()


# -- scanners ------------------------------------------------------------------------------------


def test_scanner_ids(connection: happybase.Connection, table: happybase.Table) -> None:
    client = connection.client
    table.put(b"r", {b"f:q": b"v"})
    scanner = client.scannerOpenWithScan(table.name, Hbase_thrift.TScan(startRow=b""), {})
    assert isinstance(scanner, int)
    assert [r.row for r in client.scannerGetList(scanner, 10)] == [b"r"]
    assert client.scannerGetList(scanner, 10) == []
    assert client.scannerGet(scanner) == []
    client.scannerClose(scanner)
    with pytest.raises(Hbase_thrift.IllegalArgument) as raised:
        client.scannerGetList(scanner, 1)
    assert "scanner ID is invalid" in message(raised)
    with pytest.raises(Hbase_thrift.IllegalArgument) as raised:
        client.scannerClose(scanner)
    assert "scanner ID is invalid" in message(raised)


def test_scanners_of_a_deleted_table_fail(
    connection: happybase.Connection, table: happybase.Table
) -> None:
    table.put(b"r", {b"f:q": b"v"})
    scanner = connection.client.scannerOpen(table.name, b"", None, {})
    connection.delete_table(table.name, disable=True)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.client.scannerGetList(scanner, 1)
    assert "TableNotFoundException" in message(raised)


# -- tables --------------------------------------------------------------------------------------


def test_table_lifecycle(connection: happybase.Connection) -> None:
    name = f"t_{uuid.uuid4().hex[:12]}".encode()
    connection.create_table(name, {"f": {"max_versions": 5}, "g": {}})
    assert name in connection.tables()
    with pytest.raises(Hbase_thrift.AlreadyExists):
        connection.create_table(name, {"f": {}})
    table = connection.table(name)
    families = table.families()
    assert sorted(families) == [b"f", b"g"]
    assert families[b"f"]["max_versions"] == 5
    assert families[b"g"]["max_versions"] == 3

    assert connection.is_table_enabled(name)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.delete_table(name)
    assert "TableNotDisabledException" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.enable_table(name)
    assert "TableNotDisabledException" in message(raised)
    connection.disable_table(name)
    assert not connection.is_table_enabled(name)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.put(b"r", {b"f:a": b"v"})
    assert "TableNotEnabledException" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.disable_table(name)
    assert "TableNotEnabledException" in message(raised)
    connection.enable_table(name)
    table.put(b"r", {b"f:a": b"v"})
    connection.delete_table(name, disable=True)
    assert name not in connection.tables()

    with pytest.raises(Hbase_thrift.IOError) as raised:
        table.row(b"r")
    assert "TableNotFoundException" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.delete_table(name)
    assert "does not exist" in message(raised)
    with pytest.raises(Hbase_thrift.IOError) as raised:
        connection.is_table_enabled(name)
    assert "TableNotFoundException" in message(raised)


def test_create_table_rejects_what_it_cannot_honour(connection: happybase.Connection) -> None:
    with pytest.raises(Hbase_thrift.IllegalArgument) as raised:
        connection.create_table("ttl", {"f": {"time_to_live": 60}})
    assert "time to live" in message(raised)
    with pytest.raises(Hbase_thrift.IllegalArgument) as raised:
        connection.create_table("zero", {"f": {"max_versions": 0}})
    assert "Maximum versions" in message(raised)
    with pytest.raises(TApplicationException) as raised:
        connection.create_table("bad name", {"f": {}})
    assert "Illegal table name" in message(raised)
    assert b"ttl" not in connection.tables()


def test_regions_after_split_table(server: HBaseThriftServer, table: happybase.Table) -> None:
    [region] = table.regions()
    assert (region["start_key"], region["end_key"]) == (b"", b"")
    server.split_table(table.name, [b"m", b"g"])
    regions = table.regions()
    assert [(r["start_key"], r["end_key"]) for r in regions] == [
        (b"", b"g"),
        (b"g", b"m"),
        (b"m", b""),
    ]
    assert len({r["name"] for r in regions}) == 3
    assert all(r["name"].startswith(table.name + b",") for r in regions)
    assert table.connection.table("no-such-table").regions() == []


def test_server_helpers_reject_unknown_tables(server: HBaseThriftServer) -> None:
    with pytest.raises(KeyError):
        server.cells(b"no-such-table", b"r")
    with pytest.raises(KeyError):
        server.split_table(b"no-such-table", [b"m"])


def test_latest_timestamp_constant_matches_hbase() -> None:
    assert LATEST_TIMESTAMP == 0x7FFFFFFFFFFFFFFF
