"""The store contract: every backend passes these, with the same results.

Each test runs on the embedded store and on the HBase store (see conftest.py). Tests that take
``reopen`` run twice: once on the open store, once after closing and reopening it between the
writes and the reads.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from nutchy.exceptions import StoreError
from nutchy.store.base import Scan
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate, build_update


def put(store, key: bytes, **cells: bytes) -> None:
    store.write([RowUpdate(key, {c.replace("__", ":").encode(): v for c, v in cells.items()})])


def cols(mapping: dict[str, bytes]) -> dict[bytes, bytes]:
    return {c.encode(): v for c, v in mapping.items()}


def keys(rows) -> list[bytes]:
    return [k for k, _ in rows]


@pytest.fixture(params=[False, True], ids=["open", "reopen"])
def reopen(request, store_factory, store):
    """A function returning the store to read from: the same one, or a freshly reopened one."""

    def again():
        if not request.param:
            return store
        store.close()
        return store_factory()

    return again


def test_create_is_idempotent(store_factory):
    store = store_factory()
    assert not store.exists()
    assert store.create() is True
    assert store.exists()
    assert store.create() is False
    assert store.table_name.endswith("webpage")


def test_a_checkpoint_changes_no_cell(store, reopen):
    put(store, b"a", f__st=b"1", il__x=b"anchor")
    store.checkpoint()
    put(store, b"b", f__st=b"2")
    store.checkpoint()
    store = reopen()
    assert dict(store.scan()) == {
        b"a": {b"f:st": b"1", b"il:x": b"anchor"},
        b"b": {b"f:st": b"2"},
    }


def test_cells_round_trip_byte_for_byte(store, reopen):
    every_byte = bytes(range(256)) * 40
    row = cols(
        {
            "f:st": b"\x00\x00\x00\x02",
            "f:cnt": every_byte,
            "f:ts": b"\x00\x00\x01\x5d\x3e\xf7\x98\x00",
            "s:s": b"\x3f\x80\x00\x00",
            "mtdt:_csh_": b"\x00\x00\x00\x00",
            "mtdt:": b"empty qualifier",
            "ol:http://example.com/a?b=c&d='e'": "anchor é".encode(),
            "mk:_gnmrk_": b"b1",
        }
    )
    store.write([RowUpdate(b"com.example:http/", row)])
    store = reopen()
    assert store.get(b"com.example:http/") == row
    assert store.get(b"com.example:http/missing") is None


def test_get_reads_only_the_columns_asked(store):
    put(store, b"k1", f__st=b"1", f__cnt=b"body", ol__x=b"a", ol__y=b"b", mk__m=b"v")
    put(store, b"k2", p__t=b"title")
    assert store.get(b"k1", [b"ol"]) == {b"ol:x": b"a", b"ol:y": b"b"}
    assert store.get(b"k1", [b"f:st", b"mk"]) == {b"f:st": b"1", b"mk:m": b"v"}
    assert store.get(b"k1", [b"f"]) == {b"f:st": b"1", b"f:cnt": b"body"}
    assert store.get(b"k1", [b"f:cnt"]) == {b"f:cnt": b"body"}
    # a row with none of the asked columns reads as missing, as in HBase
    assert store.get(b"k2", [b"f:st"]) is None
    got = store.get_many([b"k1", b"k2", b"k3"], [b"p", b"f:st"])
    assert got == {b"k1": {b"f:st": b"1"}, b"k2": {b"p:t": b"title"}}


@pytest.mark.parametrize(
    "columns",
    [
        [b"f:st"],
        [b"f:st", b"ol", b"mtdt", b"mk"],
        [b"f:st", b"f:ts", b"p:sig", b"s", b"h", b"mk:dist", b"mtdt"],
        [b"ol", b"il", b"mk:_gnmrk_"],
        [b"p:sig", b"p:psig", b"f:cnt"],
        [b"mk:dist", b"mk", b"f"],
    ],
)
def test_a_read_of_some_columns_is_the_whole_row_filtered_in_its_order(store, reopen, columns):
    """What a read of single columns and whole families returns is what a read of the whole
    row returns, less the columns not asked. On the embedded store, in the same order too: the
    order of a map's entries read is the order a job writes them back in, into one record."""
    cells = {
        b"f:st": b"\x00\x00\x00\x02",
        b"f:ts": b"\x00" * 8,
        b"f:cnt": b"<html>body</html>",
        b"f:bid": b"b1",
        b"p:c": b"text " * 1000,
        b"p:sig": b"s" * 16,
        b"p:psig": b"t" * 16,
        b"s:s": b"?\x80\x00\x00",
        b"h:Last-Modified": b"Thu, 01 Jan 2026 00:00:00 GMT",
        b"ol:http://b/z": b"zed",
        b"ol:http://b/a": b"a",
        b"ol:http://a/": b"",
        b"il:http://c/": b"see",
        b"mtdt:_csh_": b"?\x00\x00\x00",
        b"mk:dist": b"2",
        b"mk:_gnmrk_": b"b1",
        b"mk:__prsmrk__": b"b1",
    }
    store.write([RowUpdate(b"k", cells)])
    store = reopen()
    whole = store.get(b"k")

    def wanted(column: bytes) -> bool:
        return column in columns or column.partition(b":")[0] in columns

    ordered = isinstance(store, EmbeddedStore)

    def items(cells: dict[bytes, bytes]) -> object:
        return list(cells.items()) if ordered else cells

    expected = items({c: v for c, v in whole.items() if wanted(c)})
    assert items(store.get(b"k", columns)) == expected
    assert [items(c) for _, c in store.scan(Scan(columns=columns))] == [expected]
    # a marker tested in Python (no index of its own): its column is read, then left out
    marked = store.scan(Scan(marker=(b"__prsmrk__", b"b1"), columns=columns))
    assert [items(c) for _, c in marked] == [expected]


def test_scan_is_in_byte_order(store, reopen):
    names = [b"a", b"b", b"a\x00", b"\xc3\xa9", b"B", b"a:http/", b"a.b:http/", b"~"]
    for key in names:
        put(store, key, f__st=b"x")
    store = reopen()
    assert keys(store.scan()) == sorted(names)


@pytest.mark.parametrize("page_size", [1, 3, 1000])
def test_scan_ranges_prefix_limit_and_paging(store, page_size):
    all_keys = [f"com.example{h}:http/p{i}".encode() for h in range(3) for i in range(5)]
    store.write([RowUpdate(k, {b"f:st": b"1"}) for k in all_keys])

    def scan(**kw):
        return keys(store.scan(Scan(**kw), page_size=page_size))

    assert scan() == sorted(all_keys)
    assert scan(start=b"com.example1:") == sorted(all_keys)[5:]
    assert scan(start=b"com.example1:", stop=b"com.example2:") == sorted(all_keys)[5:10]
    assert scan(prefix=b"com.example2:") == sorted(all_keys)[10:]
    assert scan(prefix=b"com.example2:", start=b"com.example2:http/p3") == sorted(all_keys)[13:]
    assert scan(limit=4) == sorted(all_keys)[:4]
    assert scan(prefix=b"com.example1:", limit=2) == sorted(all_keys)[5:7]
    assert scan(prefix=b"nothing") == []
    assert scan(start=b"z") == []


def test_scan_columns(store):
    put(store, b"k1", f__st=b"1", ol__x=b"a")
    put(store, b"k2", ol__y=b"b")
    put(store, b"k3", p__t=b"t")
    assert list(store.scan(Scan(columns=[b"ol"]))) == [
        (b"k1", {b"ol:x": b"a"}),
        (b"k2", {b"ol:y": b"b"}),
    ]


def test_scan_marker_condition(store, reopen):
    put(store, b"a", mk___gnmrk_=b"b1", f__st=b"1")
    put(store, b"b", mk___gnmrk_=b"b2", f__st=b"1")
    put(store, b"c", f__st=b"1")
    put(store, b"d", mk___gnmrk_=b"b1")
    put(store, b"e", mk___gnmrk_=b"b1x")
    store.write([RowUpdate(b"f", {b"mk:__prsmrk__": b"b1", b"mk:_gnmrk_": b"b2"})])
    store = reopen()
    assert keys(store.scan(Scan(marker=(b"_gnmrk_", b"b1")))) == [b"a", b"d"]
    assert keys(store.scan(Scan(marker=(b"_gnmrk_", b"b2")), page_size=1)) == [b"b", b"f"]
    # the marker's column need not be among the columns read, and is not returned then
    assert list(store.scan(Scan(marker=(b"_gnmrk_", b"b1"), columns=[b"f:st"]))) == [
        (b"a", {b"f:st": b"1"})
    ]
    assert keys(store.scan(Scan(marker=(b"__prsmrk__", b"b1")))) == [b"f"]
    assert keys(store.scan(Scan(marker=(b"_gnmrk_", b"none")))) == []


def test_scan_due_condition(store, reopen):
    def ts(n: int) -> bytes:
        return n.to_bytes(8, "big")

    put(store, b"a", f__ts=ts(100), f__st=b"1")
    put(store, b"b", f__ts=ts(200), f__st=b"1")
    put(store, b"c", f__ts=ts(1 << 41), f__st=b"1")
    put(store, b"d", f__st=b"1")  # no fetch time: reads as 0, so it is due
    put(store, b"e", f__ts=ts(0x27), mk___gnmrk_=b"b1")  # a quote byte in the filter value
    store = reopen()
    assert sorted(keys(store.scan(Scan(due_before=150)))) == [b"a", b"d", b"e"]
    assert sorted(keys(store.scan(Scan(due_before=200), page_size=1))) == [b"a", b"b", b"d", b"e"]
    assert sorted(keys(store.scan(Scan(due_before=1 << 42)))) == [b"a", b"b", b"c", b"d", b"e"]
    assert sorted(keys(store.scan(Scan(due_before=0x27)))) == [b"d", b"e"]
    assert sorted(keys(store.scan(Scan(due_before=150, start=b"b")))) == [b"d", b"e"]
    assert keys(store.scan(Scan(due_before=150, marker=(b"_gnmrk_", b"b1")))) == [b"e"]
    assert list(store.scan(Scan(due_before=150, columns=[b"f:st"]))) in (
        [(b"a", {b"f:st": b"1"}), (b"d", {b"f:st": b"1"})],
        [(b"d", {b"f:st": b"1"}), (b"a", {b"f:st": b"1"})],
    )
    assert len(list(store.scan(Scan(due_before=10**13, limit=2)))) == 2


def test_replacing_a_family_drops_only_its_other_entries(store, reopen):
    put(store, b"k", ol__a=b"1", ol__b=b"2", il__x=b"keep", f__st=b"s")
    store.write([build_update(b"k", replace={"outlinks": {"b": "new", "c": "3"}})])
    store = reopen()
    assert store.get(b"k") == {b"ol:b": b"new", b"ol:c": b"3", b"il:x": b"keep", b"f:st": b"s"}
    store.write([build_update(b"k", replace={"outlinks": {}})])
    assert store.get(b"k") == {b"il:x": b"keep", b"f:st": b"s"}


def test_deletes_and_content(store, reopen):
    put(store, b"k", f__cnt=b"body", f__st=b"s", p__t=b"t")
    store.write([RowUpdate(b"k", deletes={b"f:cnt", b"p:t"})])
    assert store.get(b"k") == {b"f:st": b"s"}
    store.write([RowUpdate(b"k", {b"f:cnt": b"again"})])
    store.write([RowUpdate(b"k", replace={b"f"}, puts={b"f:typ": b"text/plain"})])
    store = reopen()
    assert store.get(b"k") == {b"f:typ": b"text/plain"}


def test_updates_of_one_row_in_one_write_apply_in_order(store, reopen):
    store.write(
        [
            RowUpdate(b"a", {b"f:st": b"1"}),
            RowUpdate(b"a", deletes={b"f:st"}),
            RowUpdate(b"b", deletes={b"f:st"}),
            RowUpdate(b"b", {b"f:st": b"2"}),
            build_update(b"c", replace={"outlinks": {"x": "1"}}),
            build_update(b"c", entries={"outlinks": {"y": "2"}}),
            RowUpdate(b"d", {b"ol:old": b"0", b"p:t": b"t"}),
            build_update(b"d", replace={"outlinks": {"new": "1"}}),
        ]
    )
    store = reopen()
    assert store.get(b"a") is None
    assert store.get(b"b") == {b"f:st": b"2"}
    assert store.get(b"c") == {b"ol:x": b"1", b"ol:y": b"2"}
    assert store.get(b"d") == {b"ol:new": b"1", b"p:t": b"t"}


def test_a_row_without_cells_is_gone(store, reopen):
    put(store, b"a", f__st=b"1", f__cnt=b"c")
    put(store, b"b", f__st=b"1")
    store.write([RowUpdate(b"a", deletes={b"f:st", b"f:cnt"})])
    store.delete_rows([b"b"])
    store = reopen()
    assert store.get(b"a") is None
    assert store.get(b"b") is None
    assert list(store.scan()) == []


def test_splits_cover_the_table(store):
    splits = store.splits()
    assert splits[0][0] == b""
    assert splits[-1][1] is None
    for (_, stop), (start, _) in itertools.pairwise(splits):
        assert stop == start


def test_threads_sharing_a_store_lose_no_entry(store):
    def add(n: int) -> None:
        for i in range(20):
            store.write([build_update(b"target", entries={"inlinks": {f"http://s{n}/{i}": "a"}})])

    threads = [threading.Thread(target=add, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.get(b"target", [b"il"])) == 80


def test_a_family_the_table_lacks_is_refused_and_nothing_is_written(store):
    with pytest.raises(StoreError):
        store.write([RowUpdate(b"a", {b"f:st": b"1"}), RowUpdate(b"b", {b"nope:x": b"1"})])
    assert store.get(b"b") is None
    # a column without a family separator is no column at all
    with pytest.raises((StoreError, ValueError)):
        store.write([RowUpdate(b"c", {b"f": b"1"})])
    assert store.get(b"c") is None


def _count(cells) -> int:
    return 0 if cells is None else int.from_bytes(cells[b"s:s"], "big")


def _add_one(key: bytes, cells) -> RowUpdate:
    return RowUpdate(key, {b"s:s": (_count(cells) + 1).to_bytes(8, "big")})


def test_modify_sees_the_row_and_writes_what_change_returns(store):
    put(store, b"a", s__s=(5).to_bytes(8, "big"), f__st=b"x")
    seen = {}

    def change(key, cells):
        seen[key] = cells
        return None if key == b"c" else _add_one(key, cells)

    assert store.modify([b"a", b"b", b"c"], [b"s:s"], change) == 2
    assert seen[b"a"] == {b"s:s": (5).to_bytes(8, "big")}  # only the columns asked for
    assert seen[b"b"] is None and seen[b"c"] is None
    assert _count(store.get(b"a")) == 6 and store.get(b"a")[b"f:st"] == b"x"
    assert _count(store.get(b"b")) == 1
    # a missing row whose change is None is not created, not even as an empty row
    assert store.get(b"c") is None
    assert keys(store.scan()) == [b"a", b"b"]


def test_concurrent_modify_loses_no_addition(store_factory, store):
    """Four writers, each with its own store (its own connections), add to the same rows: every
    addition counts. A read followed by a separate write would lose some."""
    rows = [b"r1", b"r2", b"r3"]

    def writer() -> None:
        mine = store_factory()
        for _ in range(15):
            mine.modify(rows, [b"s:s"], _add_one)

    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(writer) for _ in range(4)]:
            done.result()  # raises what the writer raised
    assert {k: _count(c) for k, c in store.get_many(rows).items()} == dict.fromkeys(rows, 60)


def test_a_failing_change_writes_nothing_and_leaves_rows_usable(store):
    put(store, b"a", s__s=(1).to_bytes(8, "big"))

    def change(key, cells):
        if key == b"b":
            raise RuntimeError("boom")
        return _add_one(key, cells)

    with pytest.raises(RuntimeError, match="boom"):
        store.modify([b"a", b"b"], [b"s:s"], change)
    assert store.modify([b"a"], [b"s:s"], _add_one) == 1  # the row is not left locked
    assert _count(store.get(b"a")) == 2
    assert store.get(b"b") is None


def test_insert_new_writes_only_the_missing_rows(store, reopen):
    crawled = cols(
        {
            "f:ts": (5).to_bytes(8, "big"),
            "f:st": b"\x00\x00\x00\x02",
            "f:cnt": b"<html>kept</html>",
            "ol:http://x/": b"anchor",
            "mk:_gnmrk_": b"b1",
            "f:bid": b"b1",
            "mtdt:k": b"v",
        }
    )
    store.write([RowUpdate(b"a", dict(crawled))])
    seed = cols({"f:ts": (1).to_bytes(8, "big"), "s:s": b"\x3f\x80\x00\x00", "mk:_injmrk_": b"y"})
    # the rows share one mapping of cells, as inject's do
    updates = [RowUpdate(key, seed) for key in (b"a", b"b", b"c")]
    assert store.insert_new(updates) == 2
    assert store.insert_new(updates) == 0
    store = reopen()
    assert store.get(b"a") == crawled
    assert store.get(b"b") == seed and store.get(b"c") == seed
    # the new rows are found by the conditions of a scan, as written rows are
    assert keys(store.scan(Scan(due_before=1))) == [b"b", b"c"]
    assert keys(store.scan(Scan(marker=(b"_gnmrk_", b"b1")))) == [b"a"]


def test_insert_new_of_any_update_and_of_one_row_twice(store, reopen):
    store.write([RowUpdate(b"old", cols({"f:ts": b"\x00" * 8, "s:s": b"old"}))])
    updates = [
        # batch cells, content and links: not a plain new record
        RowUpdate(b"new1", cols({"f:ts": b"\x00" * 8, "mk:_gnmrk_": b"b2", "f:cnt": b"body"})),
        RowUpdate(b"new2", cols({"f:ts": b"\x00" * 8, "ol:http://y/": b""}), deletes={b"s:s"}),
        RowUpdate(b"old", cols({"f:ts": b"\x00" * 8, "mk:_gnmrk_": b"b2", "s:s": b"new"})),
        # two updates of one row are merged first, as write() merges them
        RowUpdate(b"new3", cols({"f:ts": b"\x00" * 8})),
        RowUpdate(b"new3", cols({"s:s": b"3"})),
    ]
    assert store.insert_new(updates) == 3
    store = reopen()
    assert store.get(b"old") == cols({"f:ts": b"\x00" * 8, "s:s": b"old"})
    assert store.get(b"new1") == cols({"f:ts": b"\x00" * 8, "mk:_gnmrk_": b"b2", "f:cnt": b"body"})
    assert store.get(b"new2") == cols({"f:ts": b"\x00" * 8, "ol:http://y/": b""})
    assert store.get(b"new3") == cols({"f:ts": b"\x00" * 8, "s:s": b"3"})
    assert keys(store.scan(Scan(marker=(b"_gnmrk_", b"b2")))) == [b"new1"]


def test_insert_new_refuses_bad_cells_before_writing_anything(store):
    with pytest.raises(TypeError):
        store.insert_new([RowUpdate(b"a", {b"f:ts": b"1"}), RowUpdate(b"b", {b"f:ts": "1"})])
    with pytest.raises(StoreError):
        store.insert_new([RowUpdate(b"a", {b"f:ts": b"1"}), RowUpdate(b"b", {b"nope:x": b"1"})])
    assert keys(store.scan()) == []
