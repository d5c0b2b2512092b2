"""An in-memory HBase Thrift1 server that real happybase clients talk to.

No HBase can run where nutchy is developed and tested, so nutchy's HBase backend is exercised
through real :mod:`happybase`, over real Thrift sockets, against this server. It speaks the Thrift1
IDL that happybase ships (``happybase/Hbase.thrift``) with the buffered or framed transport and the
binary or compact protocol, and keeps its tables in memory.

The point of the server is HBase's *semantics*, not its wire format: a fake that is kinder than
HBase hides exactly the bugs it should catch. So rows sort as unsigned bytes, ``mutateRows``
applies every put before any delete, deletes leave markers that mask later puts with older
timestamps, ``SingleColumnValueFilter`` keeps rows that lack the tested column unless told
otherwise, and anything outside the implemented subset fails loudly instead of being ignored.

>>> import happybase
>>> with HBaseThriftServer() as server:
...     connection = happybase.Connection("127.0.0.1", server.port)
...     connection.create_table("pages", {"f": {"max_versions": 1}})
...     table = connection.table("pages")
...     table.put(b"com.example:http/", {b"f:st": b"2"})
...     print(table.row(b"com.example:http/"))
...     connection.close()
{b'f:st': b'2'}

It also has the limits of HBase's Thrift server that a client meets in production: a connection
idle for 60 seconds (``hbase.thrift.server.socket.read.timeout``) is closed, and the framed
transport closes the connection on a frame over 2 MiB
(``hbase.regionserver.thrift.framed.max_frame_size_in_mb``). Both are constructor arguments.

Tests can look behind the wire with :meth:`HBaseThriftServer.cells` (the stored versions of a
row), :attr:`HBaseThriftServer.call_counts` and :attr:`HBaseThriftServer.rows_shipped` (to prove
that a filter ran on the server), :meth:`HBaseThriftServer.stats` (calls and their bytes on the
wire, by method), :attr:`HBaseThriftServer.connection_counts` (connections the server closed),
and :meth:`HBaseThriftServer.split_table` (to get several regions). Benchmarks run it in its own
process::

    python -m nutchy.testing.hbase_server --port 9090 --transport buffered --protocol binary

Where this server deliberately differs from HBase (docs/testing.md lists every difference):

- The filter language is a subset: ``SingleColumnValueFilter``, ``PrefixFilter``, ``RowFilter``,
  ``KeyOnlyFilter`` and ``FirstKeyOnlyFilter``, with the ``binary:`` and ``binaryprefix:``
  comparators, combined with ``AND``, ``OR`` and parentheses. Any other filter, comparator or
  operator (``SKIP``, ``WHILE``) is an error sent to the client, as a syntax error is.
- A delete physically removes the versions it covers and leaves a marker that masks later puts
  with an equal or older *explicit* timestamp, as in HBase, until ``majorCompact``. A put stamped
  by the server (``LATEST_TIMESTAMP``) is masked only by a marker that is strictly newer, so a
  delete followed by a put in the same millisecond keeps the put; on HBase that race loses it.
- An increment or append is stamped ``max(now, newest version)`` rather than HBase's
  ``max(now, newest + 1)``, so a put right after an increment in the same millisecond is not
  hidden behind a version from the future.
- Versions beyond a family's ``maxVersions`` are dropped on write, not at compaction.
- A batch that names an unknown column family is rejected before any of it is applied; HBase may
  have applied the other rows.
- ``createTable`` refuses families with a time to live (``IllegalArgument``) and table names
  with a namespace (``IOError``), and ``getRowOrBefore``/``getRegionInfo`` (which read
  ``hbase:meta``) answer ``TApplicationException(UNKNOWN_METHOD)``.
- Regions exist only in ``getTableRegions``; scanners never expire; attributes, ``writeToWAL``,
  caching and block-cache settings are accepted and ignored.
- Every call runs under one lock: a multi-row ``mutateRows`` is seen whole or not at all, and a
  scanner page is computed in one go, however sparse the rows its filter keeps.
- The idle timeout applies to every transport; HBase sets it on its thread-pool server only.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import gc
import hashlib
import itertools
import logging
import re
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import happybase.connection
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import (
    TBufferedTransportFactory,
    TFramedTransportFactory,
    TTransportException,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from types import TracebackType
    from typing import Self

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_FRAME_SIZE",
    "LATEST_TIMESTAMP",
    "HBaseThriftServer",
    "Hbase_thrift",
    "RpcStats",
    "main",
]

logger = logging.getLogger(__name__)

#: The Thrift module that happybase generated from its bundled ``Hbase.thrift`` when it was
#: imported. The server uses the same module rather than loading a second copy, so its structs
#: and exceptions are the very classes happybase clients raise (``Hbase_thrift.IOError``, ...).
Hbase_thrift = sys.modules[happybase.connection.Hbase.__module__]

#: HBase's ``HConstants.LATEST_TIMESTAMP``: "stamp this write with the server's clock".
LATEST_TIMESTAMP = 2**63 - 1

_MAX_ROW_LENGTH = 2**15 - 1  # HBase's Short.MAX_VALUE limit on row keys
_FOREVER = 2**31 - 1  # HColumnDescriptor.DEFAULT_TTL, reported for families without a TTL
_HREGION_VERSION = 1
_MAX_INTERNED_COLUMNS = 1 << 16
_CALL_LOG_SIZE = 100_000
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")

#: HBase's ``hbase.thrift.server.socket.read.timeout`` (60,000 ms): how long the thread-pool
#: Thrift server waits for a client's next bytes before it closes the connection.
DEFAULT_IDLE_TIMEOUT = 60.0
#: HBase's ``hbase.regionserver.thrift.framed.max_frame_size_in_mb`` (2), in bytes: the largest
#: frame its framed transport reads; a larger one makes it close the connection.
DEFAULT_MAX_FRAME_SIZE = 2 * 1024 * 1024

_TRANSPORTS = {"buffered": TBufferedTransportFactory, "framed": TFramedTransportFactory}
_PROTOCOLS = {"binary": TBinaryProtocolFactory, "compact": TCompactProtocolFactory}

_TABLE_NAME = re.compile(rb"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_COMPRESSIONS = {"none", "gz", "lzo", "snappy", "lz4", "bzip2", "zstd"}
_BLOOM_TYPES = {"NONE", "ROW", "ROWCOL", "ROWPREFIX_FIXED_LENGTH", "ROWPREFIX_DELIMITED"}


class _InternalError(Exception):
    """A failure HBase's Thrift server reports as ``TApplicationException(INTERNAL_ERROR)``.

    That is what a Java runtime exception escaping the handler becomes, for example the
    ``IllegalArgumentException`` ParseFilter throws for a bad filter string, or the one thrown
    for a put without a qualifier in ``mutateRows``.
    """


def _io_error(java_exception: str, detail: str) -> Exception:
    """An ``IOError`` whose message starts like the Java exception HBase would put there."""
    error: Exception = Hbase_thrift.IOError(
        message=f"org.apache.hadoop.hbase.{java_exception}: {detail}"
    )
    return error


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(value: bytes) -> str:
    return value.decode("utf-8", "backslashreplace")


def _bytes_increment(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with *prefix*, or ``b''`` (no limit)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b""
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _appending(suffix: bytes) -> Callable[[bytes | None], bytes]:
    return lambda old: (old or b"") + suffix


def _timestamp(version: tuple[int, bytes]) -> int:
    return version[0]


def _column_sort_key(column: bytes) -> tuple[bytes, bytes]:
    # HBase orders cells by family, then qualifier. Comparing b"fam:qual" as a whole differs when
    # one family name is a prefix of another ("f" and "f1": ":" sorts after "1").
    family, _, qualifier = column.partition(b":")
    return family, qualifier


def _check_row(row: bytes) -> None:
    if not row:
        raise _InternalError("java.lang.IllegalArgumentException: Row length is 0")
    if len(row) > _MAX_ROW_LENGTH:
        raise _InternalError(
            f"java.lang.IllegalArgumentException: Row length {len(row)} is > {_MAX_ROW_LENGTH}"
        )


# --------------------------------------------------------------------------------------------
# The filter language (HBase's ParseFilter), restricted to the filters nutchy relies on.
# --------------------------------------------------------------------------------------------


class _RC(NamedTuple):
    """A filter's verdict on one cell, in the spirit of HBase's ``Filter.ReturnCode``.

    *include* says whether the cell is returned; *seek* says what the scanner skips next:
    0 nothing (go on with the next cell), 1 the rest of this column, 2 the rest of the row.
    INCLUDE, INCLUDE_AND_NEXT_COL, SKIP, NEXT_COL and NEXT_ROW are the five combinations used.
    """

    include: bool
    seek: int


_INCLUDE = _RC(True, 0)
_NEXT_ROW = _RC(False, 2)

# Every filter name ParseFilter registers; the ones without a factory below are rejected as
# unsupported by this server rather than as unknown to HBase.
_HBASE_FILTER_NAMES = frozenset(
    {
        b"KeyOnlyFilter",
        b"FirstKeyOnlyFilter",
        b"PrefixFilter",
        b"ColumnPrefixFilter",
        b"MultipleColumnPrefixFilter",
        b"ColumnCountGetFilter",
        b"PageFilter",
        b"ColumnPaginationFilter",
        b"InclusiveStopFilter",
        b"TimestampsFilter",
        b"RowFilter",
        b"FamilyFilter",
        b"QualifierFilter",
        b"ValueFilter",
        b"ColumnRangeFilter",
        b"SingleColumnValueFilter",
        b"SingleColumnValueExcludeFilter",
        b"DependentColumnFilter",
        b"ColumnValueFilter",
        b"FuzzyRowFilter",
        b"MultiRowRangeFilter",
    }
)


class _Filter:
    """The per-row protocol of an HBase filter, as the region scanner drives it.

    For each row: :meth:`reset`, then :meth:`filter_row_key` (True drops the row), then
    :meth:`filter_cell` for each cell in (family, qualifier, newest-first) order until a verdict
    seeks past the row, :meth:`transform` for each included cell, and finally
    :meth:`filter_row` (True drops the row after all).
    """

    def reset(self) -> None:
        """Forget the state kept for the previous row."""

    def filter_row_key(self, row: bytes) -> bool:
        return False

    def filter_cell(self, column: bytes, value: bytes) -> _RC:
        return _INCLUDE

    def transform(self, value: bytes) -> bytes:
        return value

    def filter_row(self) -> bool:
        return False


class _Comparator:
    """``binary:`` and ``binaryprefix:`` comparators: unsigned lexicographic byte order."""

    def __init__(self, value: bytes, *, prefix: bool) -> None:
        self.value = value
        self.prefix = prefix

    def compare_to(self, data: bytes) -> int:
        """Compare the comparator's value with *data*: negative, zero or positive, as in Java."""
        if self.prefix:
            data = data[: len(self.value)]
        return (self.value > data) - (self.value < data)


_OPERATORS: dict[bytes, Callable[[int], bool]] = {
    # Each takes comparator.compare_to(data) and says whether "data OP value" holds.
    b"=": lambda c: c == 0,
    b"!=": lambda c: c != 0,
    b"<": lambda c: c > 0,
    b"<=": lambda c: c >= 0,
    b">": lambda c: c < 0,
    b">=": lambda c: c <= 0,
}


class _Test:
    """A compare operator with its comparator: ``_Test(op, comparator).passes(data)``."""

    def __init__(self, operator: bytes, comparator: _Comparator) -> None:
        self._holds = _OPERATORS[operator]
        self._comparator = comparator

    def passes(self, data: bytes) -> bool:
        return self._holds(self._comparator.compare_to(data))


class _KeyOnlyFilter(_Filter):
    def __init__(self, len_as_value: bool = False) -> None:
        self.len_as_value = len_as_value

    def transform(self, value: bytes) -> bytes:
        return _I32.pack(len(value)) if self.len_as_value else b""


class _FirstKeyOnlyFilter(_Filter):
    def __init__(self) -> None:
        self._seen = False

    def reset(self) -> None:
        self._seen = False

    def filter_cell(self, column: bytes, value: bytes) -> _RC:
        if self._seen:
            return _NEXT_ROW
        self._seen = True
        return _INCLUDE


class _RowKeyFilter(_Filter):
    """The shared shape of PrefixFilter and RowFilter: decide on the key, then skip or keep."""

    def __init__(self) -> None:
        self._out = False

    def reset(self) -> None:
        self._out = False

    def keeps(self, row: bytes) -> bool:
        raise NotImplementedError

    def filter_row_key(self, row: bytes) -> bool:
        self._out = not self.keeps(row)
        return self._out

    def filter_cell(self, column: bytes, value: bytes) -> _RC:
        return _NEXT_ROW if self._out else _INCLUDE

    def filter_row(self) -> bool:
        return self._out


class _PrefixFilter(_RowKeyFilter):
    def __init__(self, prefix: bytes) -> None:
        super().__init__()
        self.prefix = prefix

    def keeps(self, row: bytes) -> bool:
        return row.startswith(self.prefix)


class _RowFilter(_RowKeyFilter):
    def __init__(self, test: _Test) -> None:
        super().__init__()
        self.test = test

    def keeps(self, row: bytes) -> bool:
        return self.test.passes(row)


class _SingleColumnValueFilter(_Filter):
    """Keeps rows whose ``family:qualifier`` value passes the test.

    As in HBase, a row in which the filter never *sees* the column passes unless
    *filter_if_missing*; the filter sees only the cells the Get or Scan reads, so the column must
    be among the requested ones. With *latest_version_only* (the default) only the newest visible
    version is tested; otherwise any visible version that passes keeps the row.
    """

    def __init__(
        self,
        family: bytes,
        qualifier: bytes,
        test: _Test,
        filter_if_missing: bool = False,
        latest_version_only: bool = True,
    ) -> None:
        self.column = family + b":" + qualifier
        self.test = test
        self.filter_if_missing = filter_if_missing
        self.latest_version_only = latest_version_only
        self._found = False
        self._matched = False

    def reset(self) -> None:
        self._found = False
        self._matched = False

    def filter_cell(self, column: bytes, value: bytes) -> _RC:
        if self._matched:
            return _INCLUDE
        if self.latest_version_only and self._found:
            return _NEXT_ROW
        if column != self.column:
            return _INCLUDE
        self._found = True
        if not self.test.passes(value):
            return _NEXT_ROW if self.latest_version_only else _INCLUDE
        self._matched = True
        return _INCLUDE

    def filter_row(self) -> bool:
        return not self._matched if self._found else self.filter_if_missing


class _FilterList(_Filter):
    """``AND`` (MUST_PASS_ALL) or ``OR`` (MUST_PASS_ONE) of filters, merged as HBase 2 does.

    AND: a cell is included only if every filter includes it, and the farthest seek wins; once a
    filter rejects the cell the later ones do not see it (HBASE-20565). OR: a cell is included if
    any filter includes it, and the nearest seek wins; a filter that asked to skip the rest of the
    row (or column) is not consulted again for it. Transforms of the filters that included a
    cell are applied in order.
    """

    def __init__(self, must_pass_all: bool, filters: list[_Filter]) -> None:
        self.must_pass_all = must_pass_all
        self.filters = filters
        self._included = [False] * len(filters)
        self._skipping: list[tuple[int, bytes] | None] = [None] * len(filters)

    def reset(self) -> None:
        for f in self.filters:
            f.reset()
        self._skipping = [None] * len(self.filters)

    def filter_row_key(self, row: bytes) -> bool:
        # Every filter must see the key: some record their verdict for filter_cell.
        verdicts = [f.filter_row_key(row) for f in self.filters]
        return any(verdicts) if self.must_pass_all else all(verdicts)

    def filter_cell(self, column: bytes, value: bytes) -> _RC:
        if self.must_pass_all:
            return self._filter_cell_and(column, value)
        return self._filter_cell_or(column, value)

    def _filter_cell_and(self, column: bytes, value: bytes) -> _RC:
        include, seek = True, 0
        for i, f in enumerate(self.filters):
            rc = f.filter_cell(column, value)
            self._included[i] = rc.include
            include = include and rc.include
            seek = max(seek, rc.seek)
            if not include:
                for j in range(i + 1, len(self.filters)):
                    self._included[j] = False
                break
        return _RC(include, seek)

    def _filter_cell_or(self, column: bytes, value: bytes) -> _RC:
        include, seek = False, 2
        for i, f in enumerate(self.filters):
            self._included[i] = False
            skipping = self._skipping[i]
            if skipping is not None and (skipping[0] == 2 or skipping[1] == column):
                seek = min(seek, skipping[0])
                continue
            rc = f.filter_cell(column, value)
            self._skipping[i] = (rc.seek, column) if rc.seek else None
            self._included[i] = rc.include
            include = include or rc.include
            seek = min(seek, rc.seek)
        return _RC(include, seek)

    def transform(self, value: bytes) -> bytes:
        for f, included in zip(self.filters, self._included, strict=True):
            if included:
                value = f.transform(value)
        return value

    def filter_row(self) -> bool:
        verdicts = (f.filter_row() for f in self.filters)
        return any(verdicts) if self.must_pass_all else all(verdicts)


class _Token(NamedTuple):
    kind: str  # "(", ")", ",", "quoted", "word" (a name or an argument) or "operator"
    text: bytes
    offset: int


# ParseFilter's operators, with the bytes that may stand just before and just after each for it
# to count as one (checkForAnd, checkForOr, checkForSkip, checkForWhile). Anywhere else, "AND" is
# the start of a filter name.
_KEYWORDS = (
    (b"AND", b" )", b" ("),
    (b"OR", b" )", b" ("),
    (b"SKIP", b" ()", b" ("),
    (b"WHILE", b" ()", b" ("),
)


def _operator_at(source: bytes, i: int) -> bytes | None:
    for word, before, after in _KEYWORDS:
        if not source.startswith(word, i):
            continue
        following = i + len(word)
        if following >= len(source) or source[following] not in after:
            continue
        if i == 0:
            if word in (b"SKIP", b"WHILE"):  # checkForAnd/Or read index -1 and fail
                return word
        elif source[i - 1] in before:
            return word
    return None


def _quoted_token(source: bytes, i: int) -> tuple[_Token, int]:
    """The ``'...'`` argument starting at *i* (``''`` inside is a quote), and the offset after
    it."""
    parts, j = [], i + 1
    while True:
        close = source.find(b"'", j)
        if close < 0:
            raise _InternalError(f"unterminated quoted argument at offset {i}")
        parts.append(source[j:close])
        if source[close + 1 : close + 2] != b"'":
            return _Token("quoted", b"".join(parts), i), close + 1
        parts.append(b"'")
        j = close + 2


def _tokenize(source: bytes) -> list[_Token]:
    """Split a filter string into tokens the way HBase's ParseFilter reads it.

    Between filters, operators and parentheses, ParseFilter skips spaces and tabs, and nothing
    else: a newline or carriage return there starts a filter name ("Filter Name \\nPrefixFilter
    not supported"). A filter's name runs to the first ``(`` or space, so a tab before the ``(``
    is part of the name. Inside the argument list only spaces separate; an unquoted argument
    runs to the next space, ``,`` or ``)``, so a tab or newline becomes part of it (and makes it
    invalid). ``AND``/``OR`` are operators only after a space or ``)`` and before a space or
    ``(``.
    """
    tokens: list[_Token] = []
    i, end = 0, len(source)
    while i < end:
        byte = source[i]
        if byte in b" \t":
            i += 1
        elif byte in b"()":
            tokens.append(_Token(chr(byte), source[i : i + 1], i))
            i += 1
        elif (operator := _operator_at(source, i)) is not None:
            tokens.append(_Token("operator", operator, i))
            i += len(operator)
        else:
            i = _tokenize_filter(source, i, tokens)
    return tokens


def _tokenize_filter(source: bytes, i: int, tokens: list[_Token]) -> int:
    """Tokenize the filter ``Name(arg, ...)`` starting at *i*; returns the offset after it."""
    end = len(source)
    j = i
    while j < end and source[j] not in b"( )',":
        j += 1
    if j == i:  # a quote or comma where a filter should start
        raise _InternalError(f"Incorrect Filter Name at offset {i} of filter string {source!r}")
    tokens.append(_Token("word", source[i:j], i))
    while j < end and source[j] == ord(" "):
        j += 1
    if j == end or source[j] != ord("("):
        return j
    tokens.append(_Token("(", b"(", j))
    j += 1
    while j < end:
        byte = source[j]
        if byte == ord(" "):
            j += 1
        elif byte == ord(")"):
            tokens.append(_Token(")", b")", j))
            return j + 1
        elif byte == ord(","):
            tokens.append(_Token(",", b",", j))
            j += 1
        elif byte == ord("'"):
            token, j = _quoted_token(source, j)
            tokens.append(token)
        else:
            k = j
            while k < end and source[k] not in b" ,)":
                k += 1
            tokens.append(_Token("word", source[j:k], j))
            j = k
    return j


class _FilterParser:
    """Recursive descent over ``expr := and ("OR" and)*; and := term ("AND" term)*;
    term := "(" expr ")" | Name "(" [arg ("," arg)*] ")"``."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.tokens = _tokenize(source)
        self.position = 0

    def parse(self) -> _Filter:
        if not self.tokens:
            raise _InternalError("empty filter string")
        result = self._expression()
        if self.position < len(self.tokens):
            self._fail(self.tokens[self.position], "unexpected")
        return result

    def _fail(self, token: _Token | None, problem: str) -> NoReturn:
        if token is None:
            raise _InternalError(f"{problem} end of filter string {self.source!r}")
        raise _InternalError(
            f"{problem} {_text(token.text)!r} at offset {token.offset} of filter string "
            f"{self.source!r}"
        )

    def _peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _next(self, *kinds: str) -> _Token:
        token = self._peek()
        if token is None or token.kind not in kinds:
            self._fail(token, "expected " + " or ".join(kinds) + ", found")
        self.position += 1
        return token

    def _keyword(self, word: bytes) -> bool:
        token = self._peek()
        if token is not None and token.kind == "operator" and token.text == word:
            self.position += 1
            return True
        return False

    def _expression(self) -> _Filter:
        terms = [self._conjunction()]
        while self._keyword(b"OR"):
            terms.append(self._conjunction())
        return terms[0] if len(terms) == 1 else _FilterList(False, terms)

    def _conjunction(self) -> _Filter:
        terms = [self._term()]
        while self._keyword(b"AND"):
            terms.append(self._term())
        return terms[0] if len(terms) == 1 else _FilterList(True, terms)

    def _term(self) -> _Filter:
        token = self._next("(", "word", "operator")
        if token.kind == "(":
            inner = self._expression()
            self._next(")")
            return inner
        name = token.text
        if token.kind == "operator":
            if name in (b"SKIP", b"WHILE"):
                raise _InternalError(
                    f"the {_text(name)} operator is not supported by HBaseThriftServer"
                )
            self._fail(token, "misplaced operator")
        self._next("(")
        arguments: list[_Token] = []
        following = self._peek()
        if following is not None and following.kind == ")":
            self.position += 1
        else:
            while True:
                arguments.append(self._next("quoted", "word"))
                if self._next(",", ")").kind == ")":
                    break
        return _build_filter(name, arguments)


def _quoted(token: _Token) -> bytes:
    if token.kind != "quoted":
        raise _InternalError(f"expected a quoted argument, found {_text(token.text)!r}")
    return token.text


def _boolean(token: _Token) -> bool:
    word = token.text.lower() if token.kind == "word" else b""
    if word not in (b"true", b"false"):
        raise _InternalError(f"Incorrect Boolean Expression {_text(token.text)!r}")
    return word == b"true"


def _test(operator: _Token, comparator: _Token) -> _Test:
    if operator.kind != "word" or operator.text not in _OPERATORS:
        raise _InternalError(f"Invalid compare operator {_text(operator.text)!r}")
    kind, colon, value = _quoted(comparator).partition(b":")
    if not colon:
        raise _InternalError(f"Incorrect comparator {_text(comparator.text)!r}")
    if kind in (b"binary", b"binaryprefix"):
        return _Test(operator.text, _Comparator(value, prefix=kind == b"binaryprefix"))
    if kind in (b"regexstring", b"substring"):
        raise _InternalError(f"the {_text(kind)} comparator is not supported by HBaseThriftServer")
    raise _InternalError(f"Incorrect comparatorType {_text(kind)!r}")


def _arity(name: bytes, arguments: list[_Token], *allowed: int) -> None:
    if len(arguments) not in allowed:
        counts = " or ".join(map(str, allowed))
        raise _InternalError(f"{_text(name)} expects {counts} arguments, got {len(arguments)}")


def _build_filter(name: bytes, args: list[_Token]) -> _Filter:
    if name == b"SingleColumnValueFilter":
        _arity(name, args, 4, 6)
        options = (_boolean(args[4]), _boolean(args[5])) if len(args) == 6 else (False, True)
        return _SingleColumnValueFilter(
            _quoted(args[0]), _quoted(args[1]), _test(args[2], args[3]), *options
        )
    if name == b"PrefixFilter":
        _arity(name, args, 1)
        return _PrefixFilter(_quoted(args[0]))
    if name == b"RowFilter":
        _arity(name, args, 2)
        return _RowFilter(_test(args[0], args[1]))
    if name == b"KeyOnlyFilter":
        _arity(name, args, 0, 1)
        return _KeyOnlyFilter(_boolean(args[0]) if args else False)
    if name == b"FirstKeyOnlyFilter":
        _arity(name, args, 0)
        return _FirstKeyOnlyFilter()
    if name in _HBASE_FILTER_NAMES:
        raise _InternalError(f"{_text(name)} is not supported by HBaseThriftServer")
    raise _InternalError(f"Filter Name {_text(name)} not supported")


def _parse_filter(source: bytes) -> _Filter:
    return _FilterParser(source).parse()


# --------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------

# The versions of a cell, newest first. Tuples rather than lists: once the cyclic garbage
# collector has seen that a tuple holds only bytes and ints it stops tracking it, so a table of
# millions of cells does not make every collection slower.
_Versions = tuple[tuple[int, bytes], ...]
_Row = dict[bytes, _Versions]  # b"family:qualifier" -> versions
_Put = tuple[bytes, bytes, bytes]  # (row, b"family:qualifier", value)
_Delete = tuple[bytes, bytes, "bytes | None"]  # (row, family, qualifier or None for the family)


class _Table:
    """One table: rows of ``{b"fam:qual": ((ts, value), ...newest first)}`` and delete markers.

    Row keys are kept in a sorted list for scans, sorted lazily: a new key is appended to a
    pending list and the two are merged (timsort on a sorted run plus a short tail) on the next
    scan, so a put costs no O(n) insertion. A deleted row leaves its key behind until that merge.
    """

    def __init__(self, name: bytes, descriptors: dict[bytes, Any], created: int) -> None:
        self.name = name
        self.descriptors = descriptors  # family (without ":") -> ColumnDescriptor
        self.max_versions = {family: d.maxVersions for family, d in descriptors.items()}
        # Cells sort by (family, qualifier). Sorting the b"family:qualifier" names as bytes gives
        # the same order, faster, unless one family extends another with a byte below b":"
        # ("f" and "f1").
        self.column_sort_key: Callable[[bytes], Any] | None = None
        if any(
            other != family and other.startswith(family) and other[len(family)] < ord(":")
            for family in descriptors
            for other in descriptors
        ):
            self.column_sort_key = _column_sort_key
        self.enabled = True
        self.created = created
        self.split_keys: list[bytes] = []
        self.rows: dict[bytes, _Row] = {}
        # row -> {b"family" or b"family:qualifier": newest delete marker}; see _masked().
        self.markers: dict[bytes, dict[bytes, int]] = {}
        self._sorted: list[bytes] = []
        self._pending: list[bytes] = []
        self._rows_deleted = False
        self._columns: dict[bytes, tuple[bytes, bytes]] = {}

    def check_family(self, family: bytes) -> None:
        if family not in self.max_versions:
            raise _io_error(
                "regionserver.NoSuchColumnFamilyException",
                f"Column family {_text(family)} does not exist in table {_text(self.name)}",
            )

    def sorted_keys(self) -> list[bytes]:
        if self._pending or self._rows_deleted:
            keys = self._sorted
            keys.extend(self._pending)
            keys.sort()
            if self._rows_deleted:
                # A key deleted and re-created before this merge is listed twice.
                rows = self.rows
                keys = [key for key, _ in itertools.groupby(keys) if key in rows]
            self._sorted = keys
            self._pending = []
            self._rows_deleted = False
        return self._sorted

    def resolve(self, column: bytes) -> tuple[bytes, bytes]:
        """``(column, family)`` for a ``b"family:qualifier"`` column, or IOError if the family
        does not exist.

        Known columns are cached, and the cached copy of the name is the one stored in every
        row: the same few names arrive as new bytes objects with each row, and sharing one copy
        saves memory at 100k-row scale. Dynamic qualifiers (outlink URLs) stop being cached once
        the cache is full, so it stays bounded.
        """
        known = self._columns.get(column)
        if known is None:
            family = column.partition(b":")[0]
            self.check_family(family)
            known = (column, family)
            if len(self._columns) < _MAX_INTERNED_COLUMNS:
                self._columns[column] = known
        return known

    def _masked(self, row: bytes, family: bytes, column: bytes, ts: int, *, stamped: bool) -> bool:
        """Whether a delete marker hides a put of *column* at *ts*.

        HBase hides puts at or before a marker's timestamp, even puts written after the delete,
        until a major compaction. For puts the server stamped (*stamped*) only a strictly newer
        marker counts, so that a delete and a put in the same millisecond keep the put.
        """
        markers = self.markers.get(row)
        if markers is None:
            return False
        newest = max(markers.get(family, -1), markers.get(column, -1))
        return newest > ts if stamped else newest >= ts

    def check_puts(self, puts: Iterable[_Put]) -> None:
        """Raise IOError if a put names a family the table does not have."""
        known_columns = self._columns
        for _, name, _ in puts:
            if name not in known_columns:
                self.resolve(name)

    def put_many(self, puts: Iterable[_Put], ts: int, *, stamped: bool) -> None:
        """Write every ``(row, column, value)`` at *ts*, in order. Check the families first
        (:meth:`check_puts`): a batch is either rejected before any write or written whole."""
        rows, pending, max_versions = self.rows, self._pending, self.max_versions
        known_columns, markers = self._columns, self.markers
        previous_row: bytes | None = None
        cells: _Row = {}
        for row, name, value in puts:
            known = known_columns.get(name)
            column, family = known if known is not None else self.resolve(name)
            if markers and self._masked(row, family, column, ts, stamped=stamped):
                continue
            if row is not previous_row:  # a batch lists one row's cells together
                previous_row = row
                existing = rows.get(row)
                if existing is None:
                    existing = rows[row] = {}
                    pending.append(row)
                cells = existing
            versions = cells.get(column)
            if versions is None:
                cells[column] = ((ts, value),)
            elif ts > versions[0][0]:
                cells[column] = ((ts, value), *versions)[: max_versions[family]]
            else:  # an older or equal timestamp; at an equal one the last write wins
                merged = [version for version in versions if version[0] != ts]
                merged.append((ts, value))
                merged.sort(key=_timestamp, reverse=True)
                cells[column] = tuple(merged[: max_versions[family]])

    def delete_many(self, deletes: Iterable[_Delete], ts: int) -> None:
        for row, family, qualifier in deletes:
            self.delete(row, family, qualifier, ts)

    def delete(self, row: bytes, family: bytes, qualifier: bytes | None, ts: int) -> None:
        """Delete the versions at or before *ts* of one column, or of a family if no
        *qualifier*, and leave a marker that masks later puts at or before *ts*."""
        target = family if qualifier is None else family + b":" + qualifier
        markers = self.markers.setdefault(row, {})
        markers[target] = max(ts, markers.get(target, -1))
        cells = self.rows.get(row)
        if cells is None:
            return
        if qualifier is None:
            prefix = family + b":"
            columns = [column for column in cells if column.startswith(prefix)]
        else:
            columns = [target] if target in cells else []
        self._prune(row, cells, columns, ts)

    def delete_row(self, row: bytes, ts: int) -> None:
        markers = self.markers.setdefault(row, {})
        for family in self.max_versions:
            markers[family] = max(ts, markers.get(family, -1))
        cells = self.rows.get(row)
        if cells is not None:
            self._prune(row, cells, list(cells), ts)

    def _prune(self, row: bytes, cells: _Row, columns: list[bytes], ts: int) -> None:
        for column in columns:
            kept = tuple(version for version in cells[column] if version[0] > ts)
            if kept:
                cells[column] = kept
            else:
                del cells[column]
        if not cells:
            del self.rows[row]
            self._rows_deleted = True

    def newest(self, row: bytes, column: bytes) -> tuple[int, bytes] | None:
        cells = self.rows.get(row)
        versions = cells.get(column) if cells is not None else None
        return versions[0] if versions else None

    def major_compact(self) -> None:
        self.markers.clear()

    def regions(self, host: str, port: int) -> list[Any]:
        bounds = [b"", *self.split_keys, b""]
        regions = []
        for start, end in itertools.pairwise(bounds):
            name = b"%s,%s,%d." % (self.name, start, self.created)
            encoded = hashlib.md5(name, usedforsecurity=False).hexdigest().encode()
            regions.append(
                Hbase_thrift.TRegionInfo(
                    startKey=start,
                    endKey=end,
                    id=self.created,
                    name=name + encoded + b".",
                    version=_HREGION_VERSION,
                    serverName=host.encode(),
                    port=port,
                )
            )
        return regions


class _Columns:
    """The columns a Get or Scan reads, with HBase's rules for mixing families and columns.

    ``b"cf"`` asks for the whole family and ``b"cf:"`` for the empty qualifier. As with
    ``Scan.addFamily``/``addColumn``, a column listed after its family narrows the family to the
    listed qualifiers, and a family listed after one of its columns widens it again.
    """

    def __init__(self, table: _Table, columns: Sequence[bytes] | None) -> None:
        self.sort_key = table.column_sort_key
        self.families: dict[bytes, set[bytes] | None] = {}
        for column in columns or ():
            family, colon, qualifier = column.partition(b":")
            table.check_family(family)
            if not colon:
                self.families[family] = None
                continue
            qualifiers = self.families.get(family)
            if qualifiers is None:
                qualifiers = self.families[family] = set()
            qualifiers.add(qualifier)
        self.explicit: list[bytes] | None = None
        if self.families and all(q is not None for q in self.families.values()):
            self.explicit = [
                family + b":" + qualifier
                for family, qualifiers in self.families.items()
                for qualifier in sorted(qualifiers or ())
            ]

    @property
    def everything(self) -> bool:
        return not self.families

    def select(self, cells: _Row) -> list[bytes]:
        if not self.families:
            return list(cells)
        if self.explicit is not None:
            return [column for column in self.explicit if column in cells]
        return [column for column in cells if self._wants(column)]

    def _wants(self, column: bytes) -> bool:
        family, _, qualifier = column.partition(b":")
        if family not in self.families:
            return False
        qualifiers = self.families[family]
        return qualifiers is None or qualifier in qualifiers


_Cell = tuple[bytes, int, bytes]  # (column, timestamp, value)


def _read_row(
    key: bytes,
    cells: _Row,
    columns: _Columns,
    before: int | None,
    row_filter: _Filter | None,
    versions: int = 1,
    ordered: bool = False,
) -> list[_Cell]:
    """The cells of one row that a Get or Scan returns; empty if the row is filtered out.

    *before* is the exclusive upper bound on timestamps (``setTimeRange(0, before)``), *versions*
    the number of versions returned per column. As in HBase 2's UserScanQueryMatcher, the filter
    sees the stored versions in the time range newest first, and the version count applies to
    the cells it includes: the column ends when the filter includes one more than *versions*.
    That is how ``SingleColumnValueFilter(..., latestVersionOnly=false)`` gets to test an older
    version that is not returned.
    """
    selected = columns.select(cells)
    result: list[_Cell] = []
    if row_filter is None:
        if ordered:
            selected.sort(key=columns.sort_key)
        if before is None and versions == 1:
            return [(column, *cells[column][0]) for column in selected]
        for column in selected:
            visible = [v for v in cells[column] if before is None or v[0] < before]
            result.extend((column, ts, value) for ts, value in visible[:versions])
        return result

    row_filter.reset()
    if row_filter.filter_row_key(key):
        return []
    selected.sort(key=columns.sort_key)
    for column in selected:
        included = 0
        seek = 0
        for ts, value in cells[column]:
            if before is not None and ts >= before:
                continue
            include, seek = row_filter.filter_cell(column, value)
            if include:
                if included == versions:
                    break
                result.append((column, ts, row_filter.transform(value)))
                included += 1
            if seek:
                break
        if seek == 2:
            break
    if row_filter.filter_row():
        return []
    return result


def _newest_row_result(key: bytes, cells: _Row, columns: _Columns) -> Any:
    """The result of a plain read (no filter, time range or ordering), or None for no cells;
    :func:`_read_row` and :func:`_row_result` give the same, more slowly."""
    TCell = Hbase_thrift.TCell
    if columns.everything:
        found = {column: TCell(v[0][1], v[0][0]) for column, v in cells.items()}
    else:
        found = {
            column: TCell(cells[column][0][1], cells[column][0][0])
            for column in columns.select(cells)
        }
    return Hbase_thrift.TRowResult(row=key, columns=found) if found else None


def _row_result(key: bytes, cells: Iterable[_Cell], sort_columns: bool) -> Any:
    TCell = Hbase_thrift.TCell
    if sort_columns:
        TColumn = Hbase_thrift.TColumn
        return Hbase_thrift.TRowResult(
            row=key,
            sortedColumns=[
                TColumn(columnName=column, cell=TCell(value=value, timestamp=ts))
                for column, ts, value in cells
            ],
        )
    return Hbase_thrift.TRowResult(
        row=key, columns={column: TCell(value, ts) for column, ts, value in cells}
    )


class _Scanner:
    """An open scanner. It remembers the last row key it passed, not a position, so writes made
    between two ``scannerGetList`` calls cannot make it skip or repeat rows."""

    def __init__(
        self,
        table: _Table,
        start: bytes,
        stop: bytes,
        reverse: bool,
        columns: _Columns,
        before: int | None,
        row_filter: _Filter | None,
        sort_columns: bool,
        batch: int | None,
    ) -> None:
        self.table = table
        self.start = start
        self.stop = stop
        self.reverse = reverse
        self.columns = columns
        self.before = before
        self.row_filter = row_filter
        self.sort_columns = sort_columns
        self.batch = batch
        self.plain = row_filter is None and before is None and not sort_columns and batch is None
        self.last_key: bytes | None = None
        self.exhausted = False
        self.partial: collections.deque[Any] = collections.deque()

    def next_results(self, count: int) -> list[Any]:
        results: list[Any] = []
        while self.partial and len(results) < count:
            results.append(self.partial.popleft())
        keys = self.table.sorted_keys()
        rows = self.table.rows
        step = -1 if self.reverse else 1
        index = self._first_index(keys)
        while len(results) < count and not self.exhausted:
            if not 0 <= index < len(keys):
                self.exhausted = True
                break
            key = keys[index]
            index += step
            if self.stop and (key <= self.stop if self.reverse else key >= self.stop):
                self.exhausted = True
                break
            self.last_key = key
            cells = rows.get(key)
            if cells is None:
                continue
            if self.plain:
                result = _newest_row_result(key, cells, self.columns)
                if result is not None:
                    results.append(result)
                continue
            found = _read_row(
                key,
                cells,
                self.columns,
                self.before,
                self.row_filter,
                ordered=self.sort_columns or self.batch is not None,
            )
            if not found:
                continue
            if self.batch is None:
                results.append(_row_result(key, found, self.sort_columns))
                continue
            # Scan.setBatch: a row comes back as several results of at most `batch` cells.
            for i in range(0, len(found), self.batch):
                chunk = _row_result(key, found[i : i + self.batch], self.sort_columns)
                if len(results) < count:
                    results.append(chunk)
                else:
                    self.partial.append(chunk)
        return results

    def _first_index(self, keys: list[bytes]) -> int:
        if self.reverse:
            if self.last_key is not None:
                return bisect.bisect_left(keys, self.last_key) - 1
            return bisect.bisect_right(keys, self.start) - 1 if self.start else len(keys) - 1
        if self.last_key is not None:
            return bisect.bisect_right(keys, self.last_key)
        return bisect.bisect_left(keys, self.start)


# --------------------------------------------------------------------------------------------
# The Thrift handler
# --------------------------------------------------------------------------------------------


class _HBaseHandler:
    """The Thrift1 ``Hbase`` service over in-memory tables.

    Method names and argument order follow ``Hbase.thrift``; thriftpy2 passes arguments
    positionally. Every call runs under one lock (see :class:`_Dispatcher`).
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.server_host = "localhost"
        self.server_port = 0
        self.current = threading.local()  # .method: the call this connection thread is serving
        self.reset()

    def reset(self) -> None:
        self.tables: dict[bytes, _Table] = {}
        self.scanners: dict[int, _Scanner] = {}
        self.next_scanner_id = 0
        self.reset_stats()

    def reset_stats(self) -> None:
        self.call_counts: collections.Counter[str] = collections.Counter()
        # method -> [request bytes, response bytes, largest request]
        self.call_bytes: dict[str, list[int]] = {}
        self.call_log: collections.deque[str] = collections.deque(maxlen=_CALL_LOG_SIZE)
        self.rows_shipped = 0

    # -- helpers ----------------------------------------------------------------------------

    def _table(self, name: bytes) -> _Table:
        table = self.tables.get(name)
        if table is None:
            raise _io_error("TableNotFoundException", _text(name))
        return table

    def _online(self, name: bytes) -> _Table:
        table = self._table(name)
        if not table.enabled:
            raise _io_error("TableNotEnabledException", f"{_text(name)} is disabled.")
        return table

    @staticmethod
    def _before(timestamp: int) -> int | None:
        if timestamp < 0:
            raise _InternalError("java.lang.IllegalArgumentException: Timestamp cannot be negative")
        return None if timestamp == LATEST_TIMESTAMP else timestamp

    def _shipped(self, results: list[Any]) -> list[Any]:
        self.rows_shipped += len(results)
        return results

    @staticmethod
    def _validate_name(name: bytes) -> None:
        if b":" in name:
            raise _io_error(
                "NamespaceNotFoundException",
                f"{_text(name.partition(b':')[0])} (HBaseThriftServer has no namespaces)",
            )
        if not _TABLE_NAME.fullmatch(name):
            raise _InternalError(
                f"java.lang.IllegalArgumentException: Illegal table name {_text(name)!r}"
            )

    # -- table administration -----------------------------------------------------------------

    def enableTable(self, name: bytes) -> None:
        table = self._table(name)
        if table.enabled:
            raise _io_error("TableNotDisabledException", _text(name))
        table.enabled = True

    def disableTable(self, name: bytes) -> None:
        table = self._table(name)
        if not table.enabled:
            raise _io_error("TableNotEnabledException", _text(name))
        table.enabled = False

    def isTableEnabled(self, name: bytes) -> bool:
        return self._table(name).enabled

    def compact(self, name: bytes) -> None:
        self._compaction_target(name)

    def majorCompact(self, name: bytes) -> None:
        for table in self._compaction_target(name):
            table.major_compact()

    def _compaction_target(self, name: bytes) -> list[_Table]:
        if name in self.tables:
            return [self.tables[name]]
        for table in self.tables.values():
            if any(r.name == name for r in table.regions(self.server_host, self.server_port)):
                return [table]  # markers are kept per table; a region compacts its table here
        raise _io_error("TableNotFoundException", _text(name))

    def getTableNames(self) -> list[bytes]:
        return sorted(self.tables)

    def getColumnDescriptors(self, name: bytes) -> dict[bytes, Any]:
        table = self._table(name)
        return {family + b":": d for family, d in sorted(table.descriptors.items())}

    def getTableRegions(self, name: bytes) -> list[Any]:
        table = self.tables.get(name)
        if table is None:
            return []  # as HBase does for a table that does not exist
        return table.regions(self.server_host, self.server_port)

    def createTable(self, name: bytes, families: list[Any] | None) -> None:
        self._validate_name(name)
        if name in self.tables:
            raise Hbase_thrift.AlreadyExists(message="table name already in use")
        if not families:
            raise _io_error(
                "DoNotRetryIOException", "Table should have at least one column family."
            )
        descriptors = {}
        for descriptor in families:
            family = (descriptor.name or b"").partition(b":")[0]
            self._check_family_descriptor(family, descriptor)
            if family in descriptors:
                raise Hbase_thrift.IllegalArgument(
                    message=f"Family '{_text(family)}' already exists so cannot be added"
                )
            descriptors[family] = Hbase_thrift.ColumnDescriptor(
                name=family + b":",
                maxVersions=descriptor.maxVersions,
                compression=descriptor.compression.upper(),
                inMemory=descriptor.inMemory,
                bloomFilterType=descriptor.bloomFilterType,
                bloomFilterVectorSize=0,
                bloomFilterNbHashes=0,
                blockCacheEnabled=descriptor.blockCacheEnabled,
                timeToLive=_FOREVER,
            )
        self.tables[name] = _Table(name, descriptors, _now_ms())

    @staticmethod
    def _check_family_descriptor(family: bytes, descriptor: Any) -> None:
        def reject(message: str) -> None:
            raise Hbase_thrift.IllegalArgument(message=message)

        if not family:
            reject("column name is empty")
        if family.startswith(b".") or any(b < 0x20 or b == 0x7F for b in family):
            reject(f"Illegal character in column family name {_text(family)!r}")
        if descriptor.maxVersions is None or descriptor.maxVersions < 1:
            reject(f"Maximum versions must be positive, got {descriptor.maxVersions}")
        if str(descriptor.compression).lower() not in _COMPRESSIONS:
            reject(f"Unknown compression {descriptor.compression!r}")
        if descriptor.bloomFilterType not in _BLOOM_TYPES:
            reject(f"Unknown bloom filter type {descriptor.bloomFilterType!r}")
        if descriptor.timeToLive is not None and 0 < descriptor.timeToLive < _FOREVER:
            reject("families with a time to live are not supported by HBaseThriftServer")

    def deleteTable(self, name: bytes) -> None:
        table = self.tables.get(name)
        if table is None:
            raise Hbase_thrift.IOError(message="java.io.IOException: table does not exist")
        if table.enabled:
            raise _io_error("TableNotDisabledException", _text(name))
        del self.tables[name]

    # -- reads -------------------------------------------------------------------------------

    def get(self, name: bytes, row: bytes, column: bytes, attributes: Any) -> list[Any]:
        return self.getVerTs(name, row, column, LATEST_TIMESTAMP, 1, attributes)

    def getVer(
        self, name: bytes, row: bytes, column: bytes, versions: int, attributes: Any
    ) -> list[Any]:
        return self.getVerTs(name, row, column, LATEST_TIMESTAMP, versions, attributes)

    def getVerTs(
        self,
        name: bytes,
        row: bytes,
        column: bytes,
        timestamp: int,
        versions: int,
        attributes: Any,
    ) -> list[Any]:
        table = self._online(name)
        _check_row(row)
        wanted = _Columns(table, [column])
        before = self._before(timestamp)
        if versions < 1:
            raise Hbase_thrift.IOError(message="java.io.IOException: versions must be positive")
        cells = table.rows.get(row)
        if cells is None:
            return []
        found = _read_row(row, cells, wanted, before, None, versions, ordered=True)
        return [Hbase_thrift.TCell(value=value, timestamp=ts) for _, ts, value in found]

    def getRow(self, name: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self.getRowsWithColumnsTs(name, [row], None, LATEST_TIMESTAMP, attributes)

    def getRowWithColumns(
        self, name: bytes, row: bytes, columns: list[bytes] | None, attributes: Any
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(name, [row], columns, LATEST_TIMESTAMP, attributes)

    def getRowTs(self, name: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self.getRowsWithColumnsTs(name, [row], None, timestamp, attributes)

    def getRowWithColumnsTs(
        self,
        name: bytes,
        row: bytes,
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(name, [row], columns, timestamp, attributes)

    def getRows(self, name: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self.getRowsWithColumnsTs(name, rows, None, LATEST_TIMESTAMP, attributes)

    def getRowsWithColumns(
        self, name: bytes, rows: list[bytes], columns: list[bytes] | None, attributes: Any
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(name, rows, columns, LATEST_TIMESTAMP, attributes)

    def getRowsTs(
        self, name: bytes, rows: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self.getRowsWithColumnsTs(name, rows, None, timestamp, attributes)

    def getRowsWithColumnsTs(
        self,
        name: bytes,
        rows: list[bytes] | None,
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> list[Any]:
        table = self._online(name)
        wanted = _Columns(table, columns)
        before = self._before(timestamp)
        results = []
        for row in rows or ():
            _check_row(row)
            cells = table.rows.get(row)
            if cells is None:
                continue
            if before is None:
                result = _newest_row_result(row, cells, wanted)
            else:
                found = _read_row(row, cells, wanted, before, None)
                result = _row_result(row, found, False) if found else None
            if result is not None:  # HBase leaves empty results out
                results.append(result)
        return self._shipped(results)

    # -- writes ------------------------------------------------------------------------------

    def mutateRow(
        self, name: bytes, row: bytes, mutations: list[Any] | None, attributes: Any
    ) -> None:
        self.mutateRowTs(name, row, mutations, LATEST_TIMESTAMP, attributes)

    def mutateRowTs(
        self,
        name: bytes,
        row: bytes,
        mutations: list[Any] | None,
        timestamp: int,
        attributes: Any,
    ) -> None:
        # HBase builds one Delete and one Put for the row and applies the Delete first.
        _check_row(row)
        puts: list[_Put] = []
        deletes: list[_Delete] = []
        self._split(row, mutations or (), puts, deletes, strict=False)
        self._apply(name, puts, deletes, timestamp, deletes_first=True)

    def mutateRows(self, name: bytes, batches: list[Any] | None, attributes: Any) -> None:
        self.mutateRowsTs(name, batches, LATEST_TIMESTAMP, attributes)

    def mutateRowsTs(
        self,
        name: bytes,
        batches: list[Any] | None,
        timestamp: int,
        attributes: Any,
    ) -> None:
        # HBase collects every row's Put and Delete, then applies all the puts, then all the
        # deletes: a batch that deletes a cell and then writes it again ends up deleted.
        puts: list[_Put] = []
        deletes: list[_Delete] = []
        for batch in batches or ():
            _check_row(batch.row)
            self._split(batch.row, batch.mutations or (), puts, deletes, strict=True)
        self._apply(name, puts, deletes, timestamp, deletes_first=False)

    @staticmethod
    def _split(
        row: bytes,
        mutations: Iterable[Any],
        puts: list[_Put],
        deletes: list[_Delete],
        *,
        strict: bool,
    ) -> None:
        """Sort one row's Thrift mutations into *puts* and *deletes*.

        A put needs a qualifier (``b"f:"`` is the empty one). ``mutateRows`` rejects one without
        (*strict*); ``mutateRow`` only logs "No column qualifier specified" and drops it.
        """
        for m in mutations:
            column = m.column or b""
            if m.isDelete:
                family, colon, qualifier = column.partition(b":")
                deletes.append((row, family, qualifier if colon else None))
            elif b":" in column:
                puts.append((row, column, b"" if m.value is None else m.value))
            elif strict:
                raise _InternalError(
                    "java.lang.IllegalArgumentException: Invalid famAndQf provided."
                )

    def _apply(
        self,
        name: bytes,
        puts: list[_Put],
        deletes: list[_Delete],
        timestamp: int,
        *,
        deletes_first: bool,
    ) -> None:
        if timestamp < 0:
            raise _InternalError("java.lang.IllegalArgumentException: Timestamp cannot be negative")
        table = self._online(name)
        table.check_puts(puts)
        for _, family, _ in deletes:
            table.check_family(family)
        stamped = timestamp == LATEST_TIMESTAMP
        ts = _now_ms() if stamped else timestamp
        if deletes_first:
            table.delete_many(deletes, ts)
        table.put_many(puts, ts, stamped=stamped)
        if not deletes_first:
            table.delete_many(deletes, ts)

    def _read_modify_write(
        self, name: bytes, row: bytes, column: bytes, update: Callable[[bytes | None], bytes]
    ) -> tuple[bytes, int]:
        """Replace the newest value of *column* with ``update(old)``, stamped
        ``max(now, newest version)``; returns the new value and its timestamp."""
        _check_row(row)
        table = self._online(name)
        if b":" not in column:
            column += b":"  # a bare family is its empty qualifier
        table.resolve(column)
        current = table.newest(row, column)
        value = update(current[1] if current else None)
        ts = max(_now_ms(), current[0] if current else 0)
        table.put_many([(row, column, value)], ts, stamped=True)
        return value, ts

    def atomicIncrement(self, name: bytes, row: bytes, column: bytes, amount: int) -> int:
        def add(old: bytes | None) -> bytes:
            if old is not None and len(old) != 8:
                raise _io_error(
                    "DoNotRetryIOException", f"Field is not a long, it's {len(old)} bytes wide"
                )
            total = (_I64.unpack(old)[0] if old else 0) + amount
            return _I64.pack((total + 2**63) % 2**64 - 2**63)  # Java's long arithmetic wraps

        value, _ = self._read_modify_write(name, row, column, add)
        return int(_I64.unpack(value)[0])

    def increment(self, increment: Any) -> None:
        if not increment.table or not increment.row:
            raise _InternalError("Must supply a table and a row key; can't increment")
        if b":" not in (increment.column or b""):
            raise _InternalError("java.lang.ArrayIndexOutOfBoundsException: no qualifier")
        self.atomicIncrement(increment.table, increment.row, increment.column, increment.ammount)

    def incrementRows(self, increments: list[Any] | None) -> None:
        for increment in increments or ():
            self.increment(increment)

    def append(self, append: Any) -> list[Any]:
        if not append.table or not append.row:
            raise _InternalError("Must supply a table and a row key; can't append")
        columns, values = append.columns or [], append.values or []
        if len(columns) != len(values):
            raise _InternalError("java.lang.IndexOutOfBoundsException: columns and values differ")
        cells = []
        for column, suffix in zip(columns, values, strict=True):
            if b":" not in column:
                raise _InternalError("java.lang.ArrayIndexOutOfBoundsException: no qualifier")
            value, ts = self._read_modify_write(
                append.table, append.row, column, _appending(suffix)
            )
            cells.append(Hbase_thrift.TCell(value=value, timestamp=ts))
        return cells

    def checkAndPut(
        self,
        name: bytes,
        row: bytes,
        column: bytes,
        value: bytes | None,
        put: Any,
        attributes: Any,
    ) -> bool:
        _check_row(row)
        if b":" not in (put.column or b"") or b":" not in column:
            raise _InternalError("java.lang.ArrayIndexOutOfBoundsException: no qualifier")
        table = self._online(name)
        family, _, qualifier = column.partition(b":")
        table.check_family(family)
        current = table.newest(row, family + b":" + qualifier)
        # HBase's Thrift1 handler asks for ifEquals(value), or ifNotExists() for no value, and
        # HRegion compares with the newest version; a null or empty expected value
        # ("valueIsNull") matches a column that is absent or whose newest value is empty.
        if not value:
            matches = current is None or not current[1]
        else:
            matches = current is not None and current[1] == value
        if not matches:
            return False
        # HBase builds a Put from the mutation whatever its isDelete says, and stamps it
        # max(now, the checked cell's timestamp) so that it is not hidden behind that cell.
        puts: list[_Put] = [(row, put.column, put.value or b"")]
        table.check_puts(puts)
        table.put_many(puts, max(_now_ms(), current[0] if current else 0), stamped=True)
        return True

    def deleteAll(self, name: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self.deleteAllTs(name, row, column, LATEST_TIMESTAMP, attributes)

    def deleteAllTs(
        self, name: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any
    ) -> None:
        _check_row(row)
        family, colon, qualifier = column.partition(b":")
        self._apply(
            name, [], [(row, family, qualifier if colon else None)], timestamp, deletes_first=True
        )

    def deleteAllRow(self, name: bytes, row: bytes, attributes: Any) -> None:
        self.deleteAllRowTs(name, row, LATEST_TIMESTAMP, attributes)

    def deleteAllRowTs(self, name: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        _check_row(row)
        if timestamp < 0:
            raise _InternalError("java.lang.IllegalArgumentException: Timestamp cannot be negative")
        table = self._online(name)
        table.delete_row(row, _now_ms() if timestamp == LATEST_TIMESTAMP else timestamp)

    # -- scanners ----------------------------------------------------------------------------

    def _open_scanner(
        self,
        name: bytes,
        *,
        start: bytes | None = None,
        stop: bytes | None = None,
        columns: list[bytes] | None = None,
        timestamp: int | None = None,
        filter_string: bytes | None = None,
        reverse: bool = False,
        sort_columns: bool = False,
        batch: int | None = None,
    ) -> int:
        table = self._online(name)
        wanted = _Columns(table, columns)
        before = None if timestamp is None else self._before(timestamp)
        row_filter = None if filter_string is None else _parse_filter(filter_string)
        if batch is not None and batch < 1:
            raise _InternalError(f"java.lang.IllegalArgumentException: batch {batch} < 1")
        scanner_id = self.next_scanner_id
        self.next_scanner_id = (scanner_id + 1) % 2**31  # a Thrift i32
        self.scanners[scanner_id] = _Scanner(
            table,
            start or b"",
            stop or b"",
            reverse,
            wanted,
            before,
            row_filter,
            sort_columns,
            batch,
        )
        return scanner_id

    def scannerOpenWithScan(self, name: bytes, scan: Any, attributes: Any) -> int:
        return self._open_scanner(
            name,
            start=scan.startRow,
            stop=scan.stopRow,
            columns=scan.columns,
            timestamp=scan.timestamp,
            filter_string=scan.filterString,
            reverse=bool(scan.reversed),
            sort_columns=bool(scan.sortColumns),
            batch=scan.batchSize,
        )

    def scannerOpen(
        self, name: bytes, start: bytes, columns: list[bytes] | None, attributes: Any
    ) -> int:
        return self._open_scanner(name, start=start, columns=columns)

    def scannerOpenWithStop(
        self,
        name: bytes,
        start: bytes,
        stop: bytes,
        columns: list[bytes] | None,
        attributes: Any,
    ) -> int:
        return self._open_scanner(name, start=start, stop=stop, columns=columns)

    def scannerOpenWithPrefix(
        self, name: bytes, prefix: bytes, columns: list[bytes] | None, attributes: Any
    ) -> int:
        # HBase uses WhileMatchFilter(PrefixFilter(prefix)) from the prefix: the same rows.
        return self._open_scanner(
            name, start=prefix, stop=_bytes_increment(prefix or b""), columns=columns
        )

    def scannerOpenTs(
        self,
        name: bytes,
        start: bytes,
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> int:
        return self._open_scanner(name, start=start, columns=columns, timestamp=timestamp)

    def scannerOpenWithStopTs(
        self,
        name: bytes,
        start: bytes,
        stop: bytes,
        columns: list[bytes] | None,
        timestamp: int,
        attributes: Any,
    ) -> int:
        return self._open_scanner(
            name, start=start, stop=stop, columns=columns, timestamp=timestamp
        )

    def _scanner(self, scanner_id: int) -> _Scanner:
        scanner = self.scanners.get(scanner_id)
        if scanner is None:
            raise Hbase_thrift.IllegalArgument(message="scanner ID is invalid")
        if self.tables.get(scanner.table.name) is not scanner.table:
            raise _io_error("TableNotFoundException", _text(scanner.table.name))
        return scanner

    def scannerGet(self, scanner_id: int) -> list[Any]:
        return self.scannerGetList(scanner_id, 1)

    def scannerGetList(self, scanner_id: int, count: int) -> list[Any]:
        return self._shipped(self._scanner(scanner_id).next_results(count))

    def scannerClose(self, scanner_id: int) -> None:
        if self.scanners.pop(scanner_id, None) is None:
            raise Hbase_thrift.IllegalArgument(message="scanner ID is invalid")


def _declared_exceptions(method: str) -> tuple[type[BaseException], ...]:
    spec = getattr(Hbase_thrift.Hbase, method + "_result").thrift_spec
    return tuple(field[2] for field in spec.values() if field[1] != "success")


class _Dispatcher:
    """What thriftpy2's ``TProcessor`` calls: each Thrift method of the handler, wrapped.

    The wrapper counts the call, holds the storage lock, and turns any exception the method does
    not declare into ``TApplicationException(INTERNAL_ERROR)``, as HBase's Java server does.
    Without that, thriftpy2 re-raises the exception and drops the connection, and the client sees
    only "TSocket read 0 bytes". Methods the handler lacks answer ``UNKNOWN_METHOD``.
    """

    def __init__(self, handler: _HBaseHandler) -> None:
        self._handler = handler

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in Hbase_thrift.Hbase.thrift_services:
            raise AttributeError(method)
        handler = self._handler
        implementation = getattr(handler, method, None)
        declared = _declared_exceptions(method)

        def call(*args: Any) -> Any:
            with handler.lock:
                handler.call_counts[method] += 1
                handler.call_log.append(method)
                handler.current.method = method
                if implementation is None:
                    raise TApplicationException(
                        TApplicationException.UNKNOWN_METHOD,
                        f"{method} is not implemented by HBaseThriftServer",
                    )
                try:
                    return implementation(*args)
                except declared:
                    raise
                except _InternalError as e:
                    raise TApplicationException(
                        TApplicationException.INTERNAL_ERROR,
                        f"Internal error processing {method}: {e}",
                    ) from e
                except Exception as e:
                    logger.exception("HBaseThriftServer failed in %s", method)
                    raise TApplicationException(
                        TApplicationException.INTERNAL_ERROR,
                        f"Internal error processing {method}: {type(e).__name__}: {e}",
                    ) from e

        setattr(self, method, call)  # later lookups skip __getattr__
        return call


# --------------------------------------------------------------------------------------------
# The network server
# --------------------------------------------------------------------------------------------


class RpcStats(NamedTuple):
    """The calls of one Thrift method and their bytes on the wire (see
    :meth:`HBaseThriftServer.stats`)."""

    calls: int
    request_bytes: int
    response_bytes: int
    max_request_bytes: int


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class _FrameTooLarge(TTransportException):
    """A client sent a frame larger than the server's limit (or a negative frame size)."""


class _ClientSocket:
    """The server's end of one connection, as thriftpy2's transports read and write it.

    It takes the place of thriftpy2's ``TSocket`` to behave as HBase's thread-pool server does:

    - A read that waits longer than the socket's receive timeout (``SO_RCVTIMEO``, set from the
      server's *idle_timeout*) raises ``BlockingIOError`` and the connection is closed, as Java's
      ``SO_TIMEOUT`` (which HBase sets from ``hbase.thrift.server.socket.read.timeout``) makes a
      blocked read fail. Writes are not timed, as in Java.
    - With *max_frame_size*, the stream is followed frame by frame (a 4-byte big-endian size, then
      that many bytes), and a frame header announcing more than the limit raises
      :class:`_FrameTooLarge` before the body is read, as Thrift's ``TFramedTransport.readFrame``
      does; the connection is then closed with the rest of the frame unread.

    It also counts the bytes read and written, for :meth:`HBaseThriftServer.stats`.
    """

    def __init__(self, sock: socket.socket, max_frame_size: int | None) -> None:
        self.sock = sock
        self.bytes_read = 0
        self.bytes_written = 0
        self._max_frame_size = max_frame_size
        self._frame_left = 0  # body bytes of the current frame not yet read
        self._header = b""  # the part of the next frame's size read so far
        #: called with the size of each write, before it is sent
        self.before_write: Callable[[int], None] | None = None

    def is_open(self) -> bool:
        return True

    def read(self, size: int) -> bytes:
        data = self.sock.recv(size)
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")
        self.bytes_read += len(data)
        if self._max_frame_size is not None:
            self._follow_frames(data)
        return data

    def _follow_frames(self, data: bytes) -> None:
        if not self._frame_left and not self._header and len(data) >= 4:
            size = _I32.unpack_from(data)[0]
            if size == len(data) - 4 and 0 <= size <= self._max_frame_size:
                return  # the usual read: one whole frame
        position, end = 0, len(data)
        while position < end:
            if self._frame_left:
                step = min(self._frame_left, end - position)
                self._frame_left -= step
                position += step
                continue
            missing = 4 - len(self._header)
            self._header += data[position : position + missing]
            position += missing
            if len(self._header) < 4:
                return
            size = int.from_bytes(self._header, "big", signed=True)
            self._header = b""
            if size < 0:
                raise _FrameTooLarge(message=f"Read a negative frame size ({size})!")
            assert self._max_frame_size is not None
            if size > self._max_frame_size:
                raise _FrameTooLarge(
                    message=f"Frame size ({size}) larger than max length ({self._max_frame_size})!"
                )
            self._frame_left = size

    def write(self, data: bytes) -> None:
        if self.before_write is not None:
            self.before_write(len(data))
        self.sock.sendall(data)
        self.bytes_written += len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class HBaseThriftServer:
    """An HBase Thrift1 server over in-memory tables, for happybase clients in tests.

    *host* and *port* are where it listens; with *port* ``0`` the system picks a free port, and
    :attr:`port` holds it once :meth:`start` returns. *transport* (``"buffered"`` or
    ``"framed"``) and *protocol* (``"binary"`` or ``"compact"``) must match what the clients
    pass to :class:`happybase.Connection`; they are the four combinations ``hbase thrift start``
    offers (``-framed``, ``-compact``).

    *idle_timeout* is how many seconds a connection may wait between two reads before the
    server closes it (HBase's ``hbase.thrift.server.socket.read.timeout``, 60 s by default;
    ``None`` never closes). A client then finds a dead socket on its next call, as it would on
    HBase. *max_frame_size* is the largest frame, in bytes, the framed transport reads (HBase's
    ``hbase.regionserver.thrift.framed.max_frame_size_in_mb``, 2 MiB by default); a larger frame
    makes the server close the connection. The buffered transport has no such limit, as in HBase.

    :meth:`start` returns once the socket listens; connections are then served in daemon
    threads, one per connection, and :meth:`stop` closes the listening socket and every open
    connection. The server is also a context manager that starts and stops it.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        transport: str = "buffered",
        protocol: str = "binary",
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        if transport not in _TRANSPORTS:
            raise ValueError(f"transport must be one of {sorted(_TRANSPORTS)}, got {transport!r}")
        if protocol not in _PROTOCOLS:
            raise ValueError(f"protocol must be one of {sorted(_PROTOCOLS)}, got {protocol!r}")
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be positive or None, got {idle_timeout!r}")
        if max_frame_size < 1:
            raise ValueError(f"max_frame_size must be positive, got {max_frame_size!r}")
        self.host = host
        self.port = port
        self.transport = transport
        self.protocol = protocol
        self.idle_timeout = idle_timeout
        self.max_frame_size = max_frame_size
        self._handler = _HBaseHandler()
        self._processor = TProcessor(Hbase_thrift.Hbase, _Dispatcher(self._handler))
        self._transport_factory: Any = _TRANSPORTS[transport]()
        self._protocol_factory: Any = _PROTOCOLS[protocol]()
        self._listener: socket.socket | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._acceptor: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        self._stopping = False
        self._connection_counts: collections.Counter[str] = collections.Counter()

    def __repr__(self) -> str:
        state = "listening" if self._listener is not None else "stopped"
        return (
            f"<HBaseThriftServer {self.host}:{self.port} {self.transport}/{self.protocol} {state}>"
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Bind, listen and start accepting connections in a daemon thread."""
        if self._listener is not None:
            raise RuntimeError("HBaseThriftServer is already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.create_server((self.host, self.port), family=family, backlog=128)
        self.port = listener.getsockname()[1]
        self._handler.server_host = self.host
        self._handler.server_port = self.port
        self._listener = listener
        self._wakeup = socket.socketpair()
        self._stopping = False
        self._acceptor = threading.Thread(
            target=self._accept_loop,
            args=(listener, self._wakeup[0]),
            name=f"hbase-thrift-accept-{self.port}",
            daemon=True,
        )
        self._acceptor.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait (up to *timeout* seconds per
        thread) for the server threads to finish. Stopping a stopped server does nothing."""
        if self._listener is None:
            return
        with self._connections_lock:
            self._stopping = True
        assert self._wakeup is not None and self._acceptor is not None
        self._wakeup[1].send(b"\0")
        self._acceptor.join(timeout)
        self._listener.close()
        for sock in self._wakeup:
            sock.close()
        with self._connections_lock:
            threads = list(self._connections.values())
            for conn in self._connections:
                # Wakes the thread blocked reading from this connection; it closes the socket.
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout)
        self._listener = None
        self._wakeup = None
        self._acceptor = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept_loop(self, listener: socket.socket, wakeup: socket.socket) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(wakeup, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if wakeup in ready:
                    return
                try:
                    conn, _ = listener.accept()
                except OSError:  # e.g. the client gave up before we accepted
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.idle_timeout is not None:
                    # The kernel's receive timeout, as Java's SO_TIMEOUT: a blocking read that
                    # waits this long fails; writes are not timed. (A Python socket timeout
                    # would poll() before every read and write, a sixth of a small call's cost.)
                    micros = max(1, round(self.idle_timeout * 1_000_000))  # (0, 0) is "never"
                    timeval = struct.pack("ll", *divmod(micros, 1_000_000))
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
                with self._connections_lock:
                    if self._stopping:
                        conn.close()
                        return
                    thread = threading.Thread(
                        target=self._serve_connection,
                        args=(conn,),
                        name=f"hbase-thrift-{self.port}-{conn.fileno()}",
                        daemon=True,
                    )
                    self._connections[conn] = thread
                    self._connection_counts["opened"] += 1
                thread.start()

    def _serve_connection(self, conn: socket.socket) -> None:
        framed = self.transport == "framed"
        client = _ClientSocket(conn, self.max_frame_size if framed else None)
        transport = self._transport_factory.get_transport(client)
        protocol = self._protocol_factory.get_protocol(transport)
        closed_by = None
        handler, current = self._handler, self._handler.current
        # A client waits for each answer before it sends its next call, so what is read and
        # written in one process() is that call's request and response. They are counted as the
        # answer is written, before it is sent: a client that reads its answer and then asks for
        # the stats finds its call in them.
        call: list[int] = [0, 0]  # bytes read before the call, whether its request is counted

        def count(size: int) -> None:
            method = current.method
            if method is None:
                return
            with handler.lock:
                counts = handler.call_bytes.get(method)
                if counts is None:
                    counts = handler.call_bytes[method] = [0, 0, 0]
                if not call[1]:
                    call[1] = 1
                    request = client.bytes_read - call[0]
                    counts[0] += request
                    counts[2] = max(counts[2], request)
                counts[1] += size

        client.before_write = count
        try:
            while True:
                current.method = None
                call[0], call[1] = client.bytes_read, 0
                self._processor.process(protocol, protocol)
        except BlockingIOError:  # SO_RCVTIMEO expired: EAGAIN from a blocking read
            closed_by = "idle"
        except _FrameTooLarge as e:
            closed_by = "frame_too_large"
            logger.info("HBaseThriftServer closed a connection: %s", e.message)
        except (TTransportException, OSError):
            pass  # the client went away, or stop() shut the connection down
        except Exception:
            logger.warning("HBaseThriftServer dropped a connection", exc_info=True)
        finally:
            with self._connections_lock:
                self._connections.pop(conn, None)
                if closed_by is not None:
                    self._connection_counts[f"closed_{closed_by}"] += 1
            transport.close()

    # -- test helpers ------------------------------------------------------------------------

    @property
    def call_counts(self) -> collections.Counter[str]:
        """How many times each Thrift method was called (a copy), e.g. ``["scannerGetList"]``."""
        with self._handler.lock:
            return collections.Counter(self._handler.call_counts)

    @property
    def call_log(self) -> list[str]:
        """The Thrift methods called, oldest first (the last 100,000 calls)."""
        with self._handler.lock:
            return list(self._handler.call_log)

    @property
    def rows_shipped(self) -> int:
        """How many row results the get and scanner methods have sent to clients."""
        with self._handler.lock:
            return self._handler.rows_shipped

    def stats(self) -> dict[str, RpcStats]:
        """What each Thrift method called so far cost on the wire, by method name.

        ``request_bytes`` and ``response_bytes`` are the bytes read and written for its calls,
        as the transport carries them (a framed call counts its 4-byte frame header);
        ``max_request_bytes`` is its largest request. A call is counted once its answer is
        sent. :meth:`reset_stats` zeroes them.

        >>> with HBaseThriftServer() as server:
        ...     connection = happybase.Connection("127.0.0.1", server.port)
        ...     connection.create_table("t", {"f": {}})
        ...     connection.table("t").put(b"row", {b"f:q": b"value"})
        ...     stats = server.stats()["mutateRows"]
        ...     connection.close()
        >>> stats.calls, stats.request_bytes == stats.max_request_bytes > 0
        (1, True)
        """
        with self._handler.lock:
            counts, sizes = self._handler.call_counts, self._handler.call_bytes
            return {
                method: RpcStats(calls, *sizes.get(method, (0, 0, 0)))
                for method, calls in sorted(counts.items())
            }

    @property
    def connection_counts(self) -> collections.Counter[str]:
        """How many connections were ``"opened"``, and how many the server closed because they
        were idle too long (``"closed_idle"``) or sent a frame over the limit
        (``"closed_frame_too_large"``); a copy."""
        with self._connections_lock:
            return collections.Counter(self._connection_counts)

    def reset_stats(self) -> None:
        """Zero :attr:`call_counts`, :attr:`call_log`, :meth:`stats`, :attr:`rows_shipped` and
        :attr:`connection_counts`."""
        with self._handler.lock:
            self._handler.reset_stats()
        with self._connections_lock:
            self._connection_counts.clear()

    def reset(self) -> None:
        """Drop every table and open scanner, and zero the statistics."""
        with self._handler.lock:
            self._handler.reset()
        with self._connections_lock:
            self._connection_counts.clear()

    def split_table(self, name: bytes | str, split_keys: Sequence[bytes | str]) -> None:
        """Split table *name* at *split_keys*, so that ``getTableRegions`` reports
        ``len(split_keys) + 1`` regions (more if it was split before). Only the region list
        changes; rows stay where they are."""
        keys = [_as_bytes(key) for key in split_keys]
        if not all(keys):
            raise ValueError("split keys must not be empty")
        with self._handler.lock:
            table = self._handler.tables.get(_as_bytes(name))
            if table is None:
                raise KeyError(f"no table {name!r}")
            table.split_keys = sorted(set(table.split_keys) | set(keys))

    def cells(self, table: bytes | str, row: bytes | str) -> dict[bytes, list[tuple[int, bytes]]]:
        """The versions stored for each column of a row, newest first; ``{}`` for no row.

        *table* is the table's name on the server, with any happybase ``table_prefix``.
        """
        with self._handler.lock:
            stored = self._handler.tables.get(_as_bytes(table))
            if stored is None:
                raise KeyError(f"no table {table!r}")
            cells = stored.rows.get(_as_bytes(row), {})
            return {column: list(versions) for column, versions in sorted(cells.items())}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; prints ``listening on HOST:PORT`` once ready."""
    parser = argparse.ArgumentParser(
        prog="python -m nutchy.testing.hbase_server",
        description="An in-memory HBase Thrift1 server for happybase clients.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9090, help="0 picks a free port")
    parser.add_argument("--transport", choices=sorted(_TRANSPORTS), default="buffered")
    parser.add_argument("--protocol", choices=sorted(_PROTOCOLS), default="binary")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="close a connection idle this long, as HBase does after 60 s; 0 never closes",
    )
    parser.add_argument(
        "--max-frame-size",
        type=int,
        default=DEFAULT_MAX_FRAME_SIZE,
        metavar="BYTES",
        help="the largest frame the framed transport reads (HBase: 2 MiB)",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    # This process owns millions of long-lived cells and decodes Thrift structs by the hundred
    # thousand per call. Collecting the youngest generation less often keeps the cyclic GC from
    # rescanning the cells (a quarter of the CPU time of a 100k-row benchmark otherwise).
    gc.set_threshold(100_000, 50, 100)
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    server = HBaseThriftServer(
        args.host,
        args.port,
        args.transport,
        args.protocol,
        idle_timeout=args.idle_timeout or None,
        max_frame_size=args.max_frame_size,
    )
    try:
        server.start()
        print(f"listening on {server.host}:{server.port}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
