"""The web table's columns and their bytes, declared once for every backend.

This is Nutch 2.x's ``gora-hbase-mapping.xml`` and Gora's ``HBaseByteInterface`` in one table:
each :class:`WebPage` field has a family, a qualifier (none for a map, whose entries are one column
each) and a codec that turns the value into exactly the bytes Nutch writes:

- int, long, float: 4, 8 and 4 bytes big-endian (``>i``, ``>q``, ``>f``);
- string: UTF-8 with no length prefix; bytes: as they are;
- a nullable field set to ``None``: its column is deleted, nothing is written;
- the ``ProtocolStatus`` and ``ParseStatus`` records: Avro binary, fields in schema order;
- a map: one column per entry, the qualifier being the UTF-8 key.

>>> encode_cell("status", 2).hex(" ")
'00 00 00 02'
>>> encode_cell("fetch_time", 1500000000000).hex(" ")
'00 00 01 5d 3e f7 98 00'
>>> encode_cell("protocol_status", ProtocolStatus(ProtocolStatusCode.NOTMODIFIED)).hex(" ")
'2a 00 00'
>>> decode_cell(b"k", "score", bytes.fromhex("3f000000"))
0.5
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nutchy.core.status import ParseStatus, ProtocolStatus, ProtocolStatusCode
from nutchy.core.webpage import WebPage
from nutchy.exceptions import CellDecodeError, UnsafeWrite

Cells = dict[bytes, bytes]

# --- Avro binary, just what the two records need ---------------------------------------------


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _write_strings(items: tuple[str, ...]) -> bytes:
    if not items:
        return b"\x00"
    out = [_zigzag(len(items))]
    for item in items:
        raw = item.encode("utf-8")
        out += (_zigzag(len(raw)), raw)
    out.append(b"\x00")
    return b"".join(out)


def _read_strings(data: bytes, pos: int) -> tuple[tuple[str, ...], int]:
    items: list[str] = []
    while True:
        count, pos = _read_long(data, pos)
        if count == 0:
            return tuple(items), pos
        if count < 0:  # a block with its byte size: Avro allows it, Nutch never writes it
            count = -count
            _, pos = _read_long(data, pos)
        for _ in range(count):
            size, pos = _read_long(data, pos)
            if size < 0 or pos + size > len(data):
                raise ValueError("string runs past the end of the record")
            items.append(data[pos : pos + size].decode("utf-8"))
            pos += size


def _encode_protocol_status(value: ProtocolStatus) -> bytes:
    return _zigzag(value.code) + _write_strings(value.args) + _zigzag(value.last_modified)


def _decode_protocol_status(data: bytes) -> ProtocolStatus:
    code, pos = _read_long(data, 0)
    args, pos = _read_strings(data, pos)
    last_modified, pos = _read_long(data, pos)
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes left after the record")
    return ProtocolStatus(code, args, last_modified)


def _encode_parse_status(value: ParseStatus) -> bytes:
    return _zigzag(value.major) + _zigzag(value.minor) + _write_strings(value.args)


def _decode_parse_status(data: bytes) -> ParseStatus:
    major, pos = _read_long(data, 0)
    minor, pos = _read_long(data, pos)
    args, pos = _read_strings(data, pos)
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes left after the record")
    return ParseStatus(major, minor, args)


# --- codecs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Codec:
    """How one value type becomes cell bytes and back."""

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


def _fixed(fmt: str, name: str) -> Codec:
    packer = struct.Struct(fmt)

    def decode(data: bytes) -> Any:
        if len(data) != packer.size:
            raise ValueError(f"expected {packer.size} bytes, got {len(data)}")
        return packer.unpack(data)[0]

    return Codec(name, packer.pack, decode)


def _str_encode(value: str) -> bytes:
    return value.encode("utf-8")


def _str_decode(data: bytes) -> str:
    return data.decode("utf-8")


def _bytes_encode(value: bytes) -> bytes:
    return bytes(value)


def _bytes_decode(data: bytes) -> bytes:
    return data


INT = _fixed(">i", "int (4 bytes, big-endian)")
LONG = _fixed(">q", "long (8 bytes, big-endian)")
FLOAT = _fixed(">f", "float (4 bytes, big-endian)")
STRING = Codec("string (UTF-8)", _str_encode, _str_decode)
BYTES = Codec("bytes", _bytes_encode, _bytes_decode)
PROTOCOL_STATUS = Codec(
    "ProtocolStatus (Avro binary)", _encode_protocol_status, _decode_protocol_status
)
PARSE_STATUS = Codec("ParseStatus (Avro binary)", _encode_parse_status, _decode_parse_status)


@dataclass(frozen=True, slots=True)
class Field:
    """One WebPage field: where it lives and how its bytes read.

    For a map, *qualifier* is ``None`` and *codec* is the codec of the values.
    """

    name: str
    family: bytes
    qualifier: bytes | None
    codec: Codec
    nullable: bool = False

    @property
    def column(self) -> bytes:
        """``b"fam:qual"`` for a scalar, ``b"fam"`` (the whole family) for a map."""
        if self.qualifier is None:
            return self.family
        return self.family + b":" + self.qualifier

    @property
    def is_map(self) -> bool:
        return self.qualifier is None


#: The web table, as Nutch 2.x lays it out (``conf/gora-hbase-mapping.xml``, ``webpage.avsc``).
FIELDS: tuple[Field, ...] = (
    Field("base_url", b"f", b"bas", STRING, nullable=True),
    Field("status", b"f", b"st", INT),
    Field("prev_fetch_time", b"f", b"pts", LONG),
    Field("fetch_time", b"f", b"ts", LONG),
    Field("fetch_interval", b"f", b"fi", INT),
    Field("retries_since_fetch", b"f", b"rsf", INT),
    Field("repr_url", b"f", b"rpr", STRING, nullable=True),
    Field("content", b"f", b"cnt", BYTES, nullable=True),
    Field("content_type", b"f", b"typ", STRING, nullable=True),
    Field("protocol_status", b"f", b"prot", PROTOCOL_STATUS, nullable=True),
    Field("modified_time", b"f", b"mod", LONG),
    Field("prev_modified_time", b"f", b"pmod", LONG),
    Field("batch_id", b"f", b"bid", STRING, nullable=True),
    Field("title", b"p", b"t", STRING, nullable=True),
    Field("text", b"p", b"c", STRING, nullable=True),
    Field("parse_status", b"p", b"st", PARSE_STATUS, nullable=True),
    Field("signature", b"p", b"sig", BYTES, nullable=True),
    Field("prev_signature", b"p", b"psig", BYTES, nullable=True),
    Field("score", b"s", b"s", FLOAT),
    Field("stm_priority", b"s", b"sp", FLOAT),
    Field("headers", b"h", None, STRING),
    Field("outlinks", b"ol", None, STRING),
    Field("inlinks", b"il", None, STRING),
    Field("metadata", b"mtdt", None, BYTES),
    Field("markers", b"mk", None, STRING),
    Field("sitemaps", b"stm", None, STRING),
)
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
BY_COLUMN: dict[bytes, Field] = {f.column: f for f in FIELDS if not f.is_map}
BY_FAMILY: dict[bytes, Field] = {f.family: f for f in FIELDS if f.is_map}

#: The column families of the table. ``stm`` exists only from Nutch 2.4 on.
FAMILIES: tuple[bytes, ...] = (b"f", b"p", b"s", b"il", b"ol", b"h", b"mtdt", b"mk", b"stm")

#: Columns that backends index or filter on. Their bytes are fixed by the schema above.
FETCH_TIME_COLUMN = BY_NAME["fetch_time"].column


def marker_column(name: str) -> bytes:
    """The column of one marker: ``marker_column("_gnmrk_") == b"mk:_gnmrk_"``."""
    return b"mk:" + name.encode("utf-8")


def columns_for(fields: Iterable[str] | None) -> list[bytes] | None:
    """The columns (or whole families, for maps) a store must read to fill *fields*.

    >>> columns_for(["status", "markers"])
    [b'f:st', b'mk']
    """
    if fields is None:
        return None
    return [field_named(name).column for name in fields]


def field_named(name: str) -> Field:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown WebPage field {name!r}; known: {', '.join(BY_NAME)}") from None


# --- cells <-> values --------------------------------------------------------------------------


def encode_cell(name: str, value: Any) -> bytes:
    """The bytes of one scalar field, or of one entry's value for a map field."""
    return field_named(name).codec.encode(value)


def decode_cell(key: bytes, name: str, data: bytes) -> Any:
    """The value of one scalar field (or map entry) from its bytes, or :exc:`CellDecodeError`."""
    f = field_named(name)
    try:
        return f.codec.decode(data)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        column = f.column if not f.is_map else f.family + b":?"
        raise CellDecodeError(key, column, f.codec.name, str(exc)) from exc


def decode_page(
    key: bytes, cells: Mapping[bytes, bytes], fields: Iterable[str] | None = None
) -> WebPage:
    """A :class:`WebPage` from the cells of one row.

    *fields* are the fields that were asked of the store; the page records them in
    :attr:`WebPage.loaded`, so a map that was not read cannot be written back whole by mistake.
    Columns the schema does not know are ignored (they stay in the table untouched).
    """
    try:
        text_key = key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CellDecodeError(key, b"(row key)", "string (UTF-8)", str(exc)) from exc
    page = WebPage(text_key)
    if fields is not None:
        page.loaded = frozenset(fields)
    # Cells come family by family (a map's entries side by side): the map being filled is
    # looked up again only when the family changes, and strings are decoded inline, which
    # counts for the tens of entries of a page's links.
    family = b""
    entries: dict[str, Any] | None = None
    decode: Callable[[bytes], Any] | None = None
    column = b""
    try:
        for column, data in cells.items():
            f = BY_COLUMN.get(column)
            if f is not None:
                setattr(page, f.name, f.codec.decode(data))
                continue
            cut = column.find(b":")
            if cut < 0:
                cut = len(column)
            if column[:cut] != family:
                family = column[:cut]
                m = BY_FAMILY.get(family)
                entries = None if m is None else getattr(page, m.name)
                decode = None if m is None or m.codec is STRING else m.codec.decode
            if entries is None:
                continue
            entry = column[cut + 1 :].decode("utf-8")
            if decode is None:
                entries[entry] = data.decode("utf-8")
            elif decode is _bytes_decode:  # a row's metadata: the bytes as they are
                entries[entry] = data
            else:
                entries[entry] = decode(data)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        f = BY_COLUMN.get(column) or BY_FAMILY[column.partition(b":")[0]]
        raise CellDecodeError(key, column, f.codec.name, str(exc)) from exc
    return page


# --- writes ------------------------------------------------------------------------------------


@dataclass(slots=True)
class RowUpdate:
    """The change of one row, in cells.

    Applied in this order: every family in *replace* loses all its cells, then *puts* are written,
    then the columns in *deletes* are removed. A column may not be both put and deleted.
    """

    key: bytes
    puts: Cells = field(default_factory=dict)
    deletes: set[bytes] = field(default_factory=set)
    replace: set[bytes] = field(default_factory=set)

    def merge(self, later: RowUpdate) -> None:
        """Fold a *later* update of the same row into this one, keeping the outcome of applying
        both in order."""
        for family in later.replace:
            prefix = family + b":"
            self.puts = {c: v for c, v in self.puts.items() if not c.startswith(prefix)}
            self.deletes = {c for c in self.deletes if not c.startswith(prefix)}
            self.replace.add(family)
        for column, value in later.puts.items():
            self.deletes.discard(column)
            self.puts[column] = value
        for column in later.deletes:
            self.puts.pop(column, None)
            self.deletes.add(column)

    def is_empty(self) -> bool:
        return not (self.puts or self.deletes or self.replace)


def coalesce(updates: Iterable[RowUpdate]) -> list[RowUpdate]:
    """One update per row key, in first-seen order, each the merge of that key's updates.

    Raises :exc:`TypeError` for a value that is not bytes, before anything is written. The
    updates given are never modified.
    """
    merged: dict[bytes, RowUpdate] = {}
    copied: set[bytes] = set()
    for update in updates:
        if not set(map(type, update.puts.values())) <= {bytes}:
            bad = next(c for c, v in update.puts.items() if type(v) is not bytes)
            raise TypeError(
                f"row {update.key!r}: the value of column {bad!r} must be bytes,"
                f" got {type(update.puts[bad]).__name__}"
            )
        first = merged.get(update.key)
        if first is None:
            merged[update.key] = update  # copied only if a later update must merge into it
        else:
            if update.key not in copied:
                first = RowUpdate(
                    first.key, dict(first.puts), set(first.deletes), set(first.replace)
                )
                merged[update.key] = first
                copied.add(update.key)
            first.merge(update)
    return list(merged.values())


def build_update(
    key: str | bytes,
    fields: Mapping[str, Any] | None = None,
    entries: Mapping[str, Mapping[str, Any]] | None = None,
    replace: Mapping[str, Mapping[str, Any]] | None = None,
) -> RowUpdate:
    """Encode a change of one row.

    *fields* sets scalar fields (``None`` deletes a nullable field's column). *entries* sets single
    map entries and leaves the rest of the map alone (``None`` deletes that entry). *replace* gives
    a map's whole new content: entries not in it are removed from the table.

    >>> u = build_update("com.example:http/", {"batch_id": "b1"}, {"markers": {"_gnmrk_": "b1"}})
    >>> sorted(u.puts.items()), u.replace
    ([(b'f:bid', b'b1'), (b'mk:_gnmrk_', b'b1')], set())
    """
    row = key.encode("utf-8") if isinstance(key, str) else key
    update = RowUpdate(row)
    for name, value in (fields or {}).items():
        scalar = _SCALARS.get(name)
        if scalar is None:
            field_named(name)  # an unknown name is its own error
            raise ValueError(f"{name!r} is a map: pass it in entries= or replace=")
        column, encode, nullable = scalar
        if value is None:
            if not nullable:
                raise ValueError(f"{name!r} cannot be None")
            update.deletes.add(column)
        else:
            update.puts[column] = encode(value)
    for name, values in (entries or {}).items():
        _map_puts(update, name, values)
    for name, values in (replace or {}).items():
        f = _map_field(name)
        update.replace.add(f.family)
        _map_puts(update, name, values)
    return update


#: Each scalar field's column, encoder and whether it is nullable, for :func:`build_update`
#: (updatedb builds an update for every row it writes).
_SCALARS: dict[str, tuple[bytes, Callable[[Any], bytes], bool]] = {
    f.name: (f.column, f.codec.encode, f.nullable) for f in FIELDS if not f.is_map
}


def _map_field(name: str) -> Field:
    f = BY_NAME.get(name)
    if f is not None and f.qualifier is None:
        return f
    f = field_named(name)
    if not f.is_map:
        raise ValueError(f"{name!r} is not a map field")
    return f


def _map_puts(update: RowUpdate, name: str, values: Mapping[str, Any]) -> None:
    f = _map_field(name)
    prefix = f.family + b":"
    puts, deletes = update.puts, update.deletes
    if f.codec is STRING and not deletes and None not in values.values():
        # Only strings put, nothing to un-delete (an updatedb's tens of inlinks a row): one
        # comprehension, in the order of the loop below.
        puts.update({prefix + e.encode("utf-8"): v.encode("utf-8") for e, v in values.items()})
        return
    # Strings are encoded inline: an updatedb writes tens of inlinks a row.
    encode = None if f.codec is STRING else f.codec.encode
    for entry, value in values.items():
        column = prefix + entry.encode("utf-8")
        if value is None:
            puts.pop(column, None)
            if f.family not in update.replace:
                deletes.add(column)
        else:
            if deletes:
                deletes.discard(column)
            puts[column] = value.encode("utf-8") if encode is None else encode(value)


def page_update(page: WebPage, fields: Collection[str]) -> RowUpdate:
    """Encode *fields* of *page* as a change of its row.

    A scalar field is written (or, when ``None`` and nullable, its column deleted). A map field
    replaces its whole family, which is only allowed when the page was read with that field:
    otherwise :exc:`UnsafeWrite`, because entries the page never saw would be lost (NUTCH-2222).
    To change some entries of a map that was not read, use :func:`build_update` with *entries*.
    """
    scalars: dict[str, Any] = {}
    maps: dict[str, Mapping[str, Any]] = {}
    for name in fields:
        f = field_named(name)
        if f.is_map:
            if name not in page.loaded:
                raise UnsafeWrite(
                    f"row {page.key!r}: writing map {name!r} would replace family "
                    f"{f.family.decode()!r}, but the page was read without it; read the field "
                    f"first, or change single entries with build_update(entries=...)"
                )
            maps[name] = getattr(page, name)
        else:
            scalars[name] = getattr(page, name)
    return build_update(page.key, scalars, replace=maps)


def protocol_status(code: ProtocolStatusCode, *args: str) -> ProtocolStatus:
    """Shorthand for a ProtocolStatus with Nutch's ``lastModified`` of 0."""
    return ProtocolStatus(int(code), tuple(args))
