"""The field codec: golden bytes for every field type, and round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.status import ParseStatus, ProtocolStatus, ProtocolStatusCode
from nutchy.core.webpage import ALL_FIELDS, MAP_FIELDS, WebPage
from nutchy.exceptions import CellDecodeError, UnsafeWrite
from nutchy.store.schema import (
    BY_NAME,
    FAMILIES,
    FIELDS,
    RowUpdate,
    build_update,
    coalesce,
    columns_for,
    decode_cell,
    decode_page,
    encode_cell,
    page_update,
)

# The examples of reference §1.4, and one per field type.
GOLDEN = [
    ("status", 2, "00 00 00 02"),
    ("status", 0x22, "00 00 00 22"),
    ("fetch_time", 1500000000000, "00 00 01 5d 3e f7 98 00"),
    ("fetch_interval", 2592000, "00 27 8d 00"),
    ("score", 1.0, "3f 80 00 00"),
    ("score", 0.5, "3f 00 00 00"),
    ("score", -2.0, "c0 00 00 00"),
    ("retries_since_fetch", -1, "ff ff ff ff"),
    ("prev_fetch_time", -1, "ff ff ff ff ff ff ff ff"),
    ("base_url", "http://é.example/", "68 74 74 70 3a 2f 2f c3 a9 2e 65 78 61 6d 70 6c 65 2f"),
    ("content", b"\x00\xff", "00 ff"),
    ("protocol_status", ProtocolStatus(1), "02 00 00"),
    ("protocol_status", ProtocolStatus(21), "2a 00 00"),
    (
        "protocol_status",
        ProtocolStatus(12, ("http://example.com/new",)),
        "18 02 2c " + b"http://example.com/new".hex(" ") + " 00 00",
    ),
    (
        "protocol_status",
        ProtocolStatus(14, ("http://example.com/x",)),
        "1c 02 28 " + b"http://example.com/x".hex(" ") + " 00 00",
    ),
    ("parse_status", ParseStatus(1, 0, ()), "02 00 00"),
    ("parse_status", ParseStatus(2, 200, ("boom",)), "04 90 03 02 08 62 6f 6f 6d 00"),
    (
        "parse_status",
        ParseStatus(1, 100, ("http://example.com/", "0")),
        "02 c8 01 04 26 " + b"http://example.com/".hex(" ") + " 02 30 00",
    ),
    ("metadata", struct.pack(">f", 0.25), "3e 80 00 00"),
    ("markers", "1443000000-1234567890", b"1443000000-1234567890".hex(" ")),
]


@pytest.mark.parametrize(("name", "value", "hexbytes"), GOLDEN)
def test_golden_bytes(name, value, hexbytes):
    assert encode_cell(name, value).hex(" ") == hexbytes
    assert decode_cell(b"k", name, bytes.fromhex(hexbytes)) == value


def test_columns_are_nutchs():
    columns = {f.name: f.column for f in FIELDS}
    assert columns == {
        "base_url": b"f:bas",
        "status": b"f:st",
        "prev_fetch_time": b"f:pts",
        "fetch_time": b"f:ts",
        "fetch_interval": b"f:fi",
        "retries_since_fetch": b"f:rsf",
        "repr_url": b"f:rpr",
        "content": b"f:cnt",
        "content_type": b"f:typ",
        "protocol_status": b"f:prot",
        "modified_time": b"f:mod",
        "prev_modified_time": b"f:pmod",
        "batch_id": b"f:bid",
        "title": b"p:t",
        "text": b"p:c",
        "parse_status": b"p:st",
        "signature": b"p:sig",
        "prev_signature": b"p:psig",
        "score": b"s:s",
        "stm_priority": b"s:sp",
        "headers": b"h",
        "outlinks": b"ol",
        "inlinks": b"il",
        "metadata": b"mtdt",
        "markers": b"mk",
        "sitemaps": b"stm",
    }
    assert tuple(columns) == ALL_FIELDS
    assert {f.family for f in FIELDS} == set(FAMILIES)


def test_a_fetched_row_encodes_as_nutch_writes_it():
    page = WebPage(
        "com.example.www:http/",
        status=2,
        fetch_time=1500000000000,
        fetch_interval=2592000,
        score=1.0,
        protocol_status=ProtocolStatus(ProtocolStatusCode.SUCCESS),
        headers={"Content-Type": "text/html"},
        metadata={"_csh_": struct.pack(">f", 0.0)},
        markers={"_ftcmrk_": "b1", "dist": "0"},
    )
    update = page_update(
        page,
        [
            "status",
            "fetch_time",
            "fetch_interval",
            "score",
            "protocol_status",
            "repr_url",
            "headers",
            "metadata",
            "markers",
        ],
    )
    assert update.key == b"com.example.www:http/"
    assert update.puts == {
        b"f:st": bytes.fromhex("00000002"),
        b"f:ts": bytes.fromhex("0000015d3ef79800"),
        b"f:fi": bytes.fromhex("00278d00"),
        b"s:s": bytes.fromhex("3f800000"),
        b"f:prot": bytes.fromhex("020000"),
        b"h:Content-Type": b"text/html",
        b"mtdt:_csh_": b"\x00\x00\x00\x00",
        b"mk:_ftcmrk_": b"b1",
        b"mk:dist": b"0",
    }
    # a None nullable field deletes its column; maps replace their families
    assert update.deletes == {b"f:rpr"}
    assert update.replace == {b"h", b"mtdt", b"mk"}


def test_missing_columns_read_as_avro_defaults():
    page = decode_page(b"com.example:http/", {})
    assert (page.status, page.fetch_time, page.score, page.content, page.protocol_status) == (
        0,
        0,
        0.0,
        None,
        None,
    )
    assert page.headers == page.markers == page.metadata == {}


def test_map_entries_of_families_in_any_order_read_into_their_maps():
    cells = {
        b"ol:http://b/": b"B",
        b"mtdt:_csh_": b"\xff\x00",
        b"x:y": b"z",
        b"ol:http://a/": b"",
        b"f:st": b"\x00\x00\x00\x02",
        b"ol:http://c/": b"\xc3\xa9",
        b"mk:dist": b"1",
        b"mtdt:_nub_": b"b1",
    }
    page = decode_page(b"k", cells)
    assert list(page.outlinks.items()) == [
        ("http://b/", "B"),
        ("http://a/", ""),
        ("http://c/", "\u00e9"),
    ]
    assert page.metadata == {"_csh_": b"\xff\x00", "_nub_": b"b1"}
    assert (page.markers, page.status) == ({"dist": "1"}, 2)


def test_unknown_columns_are_ignored_on_read():
    page = decode_page(b"k", {b"f:st": b"\x00\x00\x00\x01", b"x:y": b"z", b"f:zz": b"1"})
    assert page.status == 1


@pytest.mark.parametrize(
    ("column", "data", "expected"),
    [
        (b"f:st", b"\x00\x02", "int (4 bytes, big-endian)"),
        (b"f:ts", b"\x00" * 9, "long (8 bytes, big-endian)"),
        (b"s:s", b"", "float (4 bytes, big-endian)"),
        (b"f:bas", b"\xff\xfe", "string (UTF-8)"),
        (b"f:prot", b"\x02", "ProtocolStatus (Avro binary)"),
        (b"f:prot", b"\x02\x00\x00\x00", "ProtocolStatus (Avro binary)"),
        (b"p:st", b"\x02\x00\x02\x7f", "ParseStatus (Avro binary)"),
        (b"p:st", b"\xff" * 12, "ParseStatus (Avro binary)"),
        (b"ol:http://x/", b"\xc3", "string (UTF-8)"),
    ],
)
def test_bad_cells_name_the_row_the_column_and_the_type(column, data, expected):
    with pytest.raises(CellDecodeError) as info:
        decode_page(b"com.bad:http/", {column: data})
    error = info.value
    assert (error.key, error.column, error.expected) == (b"com.bad:http/", column, expected)
    message = str(error)
    assert "com.bad:http/" in message and column.decode() in message and expected in message


@pytest.mark.parametrize(
    ("column", "expected"), [(b"ol:\xc3", "string (UTF-8)"), (b"mtdt:\xff", "bytes")]
)
def test_a_map_entry_whose_name_is_not_utf8_names_its_column(column, expected):
    cells = {b"ol:http://a/": b"A", b"mtdt:_csh_": b"", column: b"", b"mk:dist": b"1"}
    with pytest.raises(CellDecodeError) as info:
        decode_page(b"k", cells)
    assert (info.value.column, info.value.expected) == (column, expected)


def test_writing_a_map_that_was_not_read_is_refused():
    page = decode_page(b"k", {b"f:st": b"\x00\x00\x00\x02"}, fields=["status"])
    with pytest.raises(UnsafeWrite, match="metadata"):
        page_update(page, ["metadata"])
    page.markers["_ftcmrk_"] = "b"
    with pytest.raises(UnsafeWrite, match="markers"):
        page_update(page, ["status", "markers"])
    # single entries can always be changed
    update = build_update(page.key, entries={"markers": {"_ftcmrk_": "b", "_gnmrk_": None}})
    assert update.puts == {b"mk:_ftcmrk_": b"b"}
    assert update.deletes == {b"mk:_gnmrk_"}
    assert update.replace == set()


def test_build_update_rejects_nonsense():
    with pytest.raises(ValueError, match="cannot be None"):
        build_update("k", {"status": None})
    with pytest.raises(ValueError, match="is a map"):
        build_update("k", {"markers": {}})
    with pytest.raises(ValueError, match="unknown WebPage field 'nope'"):
        build_update("k", {"nope": 1})
    with pytest.raises(ValueError, match="not a map"):
        build_update("k", entries={"status": {"a": 1}})


def test_map_entries_put_in_one_pass_are_the_cells_of_the_entry_by_entry_loop():
    # Strings alone with nothing deleted take one comprehension; a deletion in the update, or
    # an entry deleted, takes the loop. Both give the same cells, in the same order.
    inlinks = {"http://b/é": "B", "http://a/": "", "http://c/": "see C"}
    fast = build_update("k", {"score": 1.5}, {"inlinks": inlinks, "markers": {"dist": "2"}})
    loop = build_update("k", {"base_url": None}, {"inlinks": inlinks, "markers": {"dist": "2"}})
    expected = [
        (b"il:http://b/\xc3\xa9", b"B"),
        (b"il:http://a/", b""),
        (b"il:http://c/", b"see C"),
        (b"mk:dist", b"2"),
    ]
    assert list(fast.puts.items()) == [(b"s:s", b"?\xc0\x00\x00"), *expected]
    assert list(loop.puts.items()) == expected
    assert (fast.deletes, loop.deletes) == (set(), {b"f:bas"})
    mixed = build_update("k", entries={"inlinks": {**inlinks, "http://d/": None}})
    assert list(mixed.puts.items()) == expected[:3]
    assert mixed.deletes == {b"il:http://d/"}
    # an entry deleted, then put by the family's replacement: put, and no longer deleted
    again = build_update(
        "k", entries={"markers": {"dist": None}}, replace={"markers": {"dist": "3"}}
    )
    assert (again.puts, again.deletes, again.replace) == ({b"mk:dist": b"3"}, set(), {b"mk"})


def test_coalesce_keeps_the_outcome_of_applying_in_order():
    merged = coalesce(
        [
            RowUpdate(b"a", {b"ol:x": b"1", b"f:st": b"1"}),
            RowUpdate(b"b", {b"f:st": b"2"}),
            RowUpdate(b"a", replace={b"ol"}, puts={b"ol:y": b"2"}),
            RowUpdate(b"a", deletes={b"f:st"}),
        ]
    )
    assert [u.key for u in merged] == [b"a", b"b"]
    assert merged[0] == RowUpdate(b"a", {b"ol:y": b"2"}, {b"f:st"}, {b"ol"})


def test_columns_for():
    assert columns_for(None) is None
    assert columns_for(["content", "inlinks"]) == [b"f:cnt", b"il"]


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)
floats32 = st.floats(width=32, allow_nan=False)


@st.composite
def pages(draw):
    optional = st.none() | text
    return WebPage(
        key=draw(st.just("com.example:http/")),
        base_url=draw(optional),
        status=draw(ints),
        prev_fetch_time=draw(longs),
        fetch_time=draw(longs),
        fetch_interval=draw(ints),
        retries_since_fetch=draw(ints),
        repr_url=draw(optional),
        content=draw(st.none() | st.binary(max_size=50)),
        content_type=draw(optional),
        protocol_status=draw(
            st.none() | st.builds(ProtocolStatus, ints, st.tuples(text) | st.just(()), longs)
        ),
        modified_time=draw(longs),
        prev_modified_time=draw(longs),
        batch_id=draw(optional),
        title=draw(optional),
        text=draw(optional),
        parse_status=draw(
            st.none() | st.builds(ParseStatus, ints, ints, st.lists(text).map(tuple))
        ),
        signature=draw(st.none() | st.binary(min_size=16, max_size=16)),
        prev_signature=draw(st.none() | st.binary(max_size=16)),
        score=draw(floats32),
        stm_priority=draw(floats32),
        headers=draw(st.dictionaries(text, text, max_size=4)),
        outlinks=draw(st.dictionaries(text, text, max_size=4)),
        inlinks=draw(st.dictionaries(text, text, max_size=4)),
        metadata=draw(st.dictionaries(text, st.binary(max_size=8), max_size=4)),
        markers=draw(st.dictionaries(text, text, max_size=4)),
        sitemaps=draw(st.dictionaries(text, text, max_size=2)),
    )


@given(pages())
def test_whole_pages_round_trip(page):
    update = page_update(page, ALL_FIELDS)
    cells = dict(update.puts)
    assert not cells.keys() & update.deletes
    assert decode_page(update.key, cells) == page


def test_every_map_field_is_a_family():
    assert all(BY_NAME[name].is_map for name in MAP_FIELDS)
