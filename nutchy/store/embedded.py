"""The embedded store: the web table in one SQLite file, no server needed.

Layout (one file, ``<crawl dir>/<table>.sqlite``, inspectable with the ``sqlite3`` shell):

- table ``<table>``: one record per row. ``key`` is the row key. The families ``f``, ``s``,
  ``mk`` and ``mtdt`` (small, read by generate, written by every job) are one column each,
  holding that family's cells as a marshalled ``dict[bytes, bytes]`` of ``b"fam:qual"`` → the
  exact bytes Nutch would store in HBase, or NULL when the family is empty. ``fetch_time`` and
  the ``gen_mark``, ``fetch_mark`` and ``upd_mark`` columns repeat ``f:ts`` (0 when missing) and
  the batch markers, so that indexes serve "due rows" and "rows of batch B" without reading
  anything else; ``has_links`` and ``has_content`` say whether the two records below exist;
- table ``<table>_links``: the families ``p``, ``il``, ``ol``, ``h`` and ``stm`` (parse output,
  links, headers: most of a row's cells) in the same form, one record per row that has any;
- table ``<table>_content``: the raw content (``f:cnt``) by key.

A read decodes only the families it asks for, and a write reads and rewrites only the records
whose families it changes: marking a batch rewrites the small main record and nothing else, and
the content, most of a crawl's bytes, is rewritten only when a page is fetched again.
- table ``nutchy_meta``: the layout version.

Several processes of one machine may read and write the file at once: SQLite in WAL mode lets
readers run beside the one writer, and every :meth:`EmbeddedStore.write` is one ``BEGIN
IMMEDIATE`` transaction that reads the rows it changes and writes them back, so concurrent writers
serialize and none loses another's cells. A process killed at any moment leaves the file with each
write either wholly applied or not at all. With ``synchronous=NORMAL`` (the default) a power loss
can lose the last writes but never corrupts the file; ``synchronous=OFF`` is faster and still safe
when only processes crash. WAL mode needs a local disk (not NFS).

Family records use :mod:`marshal` format version 4, which only builds plain values (it runs no
code), and whose encoding of dicts and bytes has not changed since Python 3.4; the layout version
in ``nutchy_meta`` says how a file was written.
"""

from __future__ import annotations

import logging
import marshal
import sqlite3
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store.base import Scan, key_range
from nutchy.store.schema import FAMILIES, Cells, RowUpdate, coalesce

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")

LAYOUT_VERSION = "2"
CONTENT_COLUMN = b"f:cnt"
_FAMILY_COLUMNS = [family.decode() for family in FAMILIES]
_FAMILY_INDEX = {family: i for i, family in enumerate(FAMILIES)}
#: Families in the row's main record: small, read by generate and written by every job.
_HOT = [i for i, family in enumerate(FAMILIES) if family in (b"f", b"s", b"mk", b"mtdt")]
#: Families in the row's second record: parse output, links and headers.
_COLD = [i for i in range(len(FAMILIES)) if i not in _HOT]
_COLD_SET = frozenset(_COLD)
#: Marker qualifiers that have their own indexed column.
_MARKER_COLUMNS = {b"_gnmrk_": "gen_mark", b"_ftcmrk_": "fetch_mark", b"_updmrk_": "upd_mark"}
_CHUNK = 500  # keys per "IN (...)" query: well under SQLite's parameter limit
_SYNC_MODES = ("OFF", "NORMAL", "FULL")


def _loads(blob: bytes, key: bytes) -> Cells:
    try:
        cells = marshal.loads(blob)
    except (ValueError, EOFError, TypeError) as exc:
        raise StoreError(f"row {key!r}: a family record does not decode: {exc}") from exc
    if type(cells) is not dict:
        raise StoreError(f"row {key!r}: a family record holds a {type(cells).__name__}, not cells")
    return cells


def _dumps(cells: Cells) -> bytes:
    return marshal.dumps(cells, 4)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class EmbeddedStore:
    """The web table in a SQLite file at *path*, in the table *table_name*.

    *busy_timeout* (seconds) is how long a write waits for another process's write to finish
    before failing with :exc:`StoreError`. *synchronous* is SQLite's ``synchronous`` pragma:
    ``NORMAL`` (the default: safe against crashes of processes and of the machine), ``FULL``
    (also durable to the last write on power loss) or ``OFF`` (fastest; safe when only processes
    crash).
    """

    def __init__(
        self,
        path: str | Path,
        table_name: str = "webpage",
        busy_timeout: float = 60.0,
        synchronous: str = "NORMAL",
    ):
        if synchronous.upper() not in _SYNC_MODES:
            raise ValueError(f"'synchronous' must be one of {_SYNC_MODES}, got {synchronous!r}")
        self.path = Path(path)
        self.table_name = table_name
        self._t = _quote(table_name)
        self._c = _quote(table_name + "_content")
        self._k = _quote(table_name + "_links")
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            # 64 KiB pages (set when the file is created): six 10 KB page bodies fit one page,
            # where 16 KiB pages fit one and waste a third of the file. Measured in
            # docs/benchmarks.md, they also write and scan faster.
            self._conn.execute("PRAGMA page_size = 65536")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA cache_size = -65536")
            self._conn.execute("PRAGMA wal_autocheckpoint = 4096")
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"cannot open the embedded store at {self.path}: {exc}") from exc

    def __repr__(self) -> str:
        return f"EmbeddedStore({str(self.path)!r}, table_name={self.table_name!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        with self._lock:
            row = self._query(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table_name,)
            ).fetchone()
        return row is not None

    def create(self) -> bool:
        with self._lock:
            if self.exists():
                return False
            t, c, k = self._t, self._c, self._k
            name = self.table_name
            statements = [
                "CREATE TABLE IF NOT EXISTS nutchy_meta (name TEXT PRIMARY KEY, value TEXT)",
                "INSERT OR IGNORE INTO nutchy_meta VALUES ('layout', ?)",
                (
                    f"CREATE TABLE {t} (key BLOB PRIMARY KEY, fetch_time INTEGER NOT NULL,"
                    " gen_mark BLOB, fetch_mark BLOB, upd_mark BLOB,"
                    " has_links INTEGER NOT NULL, has_content INTEGER NOT NULL, "
                    + ", ".join(f"{_quote(_FAMILY_COLUMNS[i])} BLOB" for i in _HOT)
                    + ")"
                ),
                (
                    f"CREATE TABLE {k} (key BLOB PRIMARY KEY, "
                    + ", ".join(f"{_quote(_FAMILY_COLUMNS[i])} BLOB" for i in _COLD)
                    + ")"
                ),
                f"CREATE TABLE {c} (key BLOB PRIMARY KEY, value BLOB NOT NULL)",
                f"CREATE INDEX {_quote(name + '_due')} ON {t} (fetch_time, key)",
            ]
            statements += [
                f"CREATE INDEX {_quote(name + '_' + col)} ON {t} ({col}, key)"
                f" WHERE {col} IS NOT NULL"
                for col in _MARKER_COLUMNS.values()
            ]
            self._transaction(
                lambda: [
                    self._conn.execute(s, (LAYOUT_VERSION,) if "?" in s else ()) for s in statements
                ]
            )
        logger.info("Created table %s in %s", self.table_name, self.path)
        return True

    def drop(self) -> None:
        name = self.table_name
        with self._lock:
            self._transaction(
                lambda: [
                    self._conn.execute(f"DROP TABLE IF EXISTS {_quote(n)}")
                    for n in (name, name + "_links", name + "_content")
                ]
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def splits(self) -> list[tuple[bytes, bytes | None]]:
        return [(b"", None)]

    # --- reads ---------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> Cells | None:
        return self.get_many([key], columns).get(key)

    def get_many(
        self, keys: Sequence[bytes], columns: Sequence[bytes] | None = None
    ) -> dict[bytes, Cells]:
        reader = _Reader(columns)
        select = reader.select(self._t, self._k, self._c)
        found: dict[bytes, Cells] = {}
        with self._lock:
            for i in range(0, len(keys), _CHUNK):
                chunk = list(keys[i : i + _CHUNK])
                sql = f"{select} WHERE w.key IN ({','.join('?' * len(chunk))})"
                found.update(reader.rows(self._query(sql, chunk).fetchall()))
        return found

    def scan(
        self, scan: Scan | None = None, page_size: int = 1000
    ) -> Iterator[tuple[bytes, Cells]]:
        """Stream the rows of *scan*, *page_size* rows per query.

        No transaction stays open between pages: another process can write while a scan is being
        consumed, and the scan then sees rows as they are when each page is read.
        """
        if scan is None:
            scan = Scan()
        start, stop = key_range(scan)
        where = ["w.key >= ?"]
        args: list[Any] = [start]
        if stop is not None:
            where.append("w.key < ?")
            args.append(stop)
        extra: list[bytes] = []
        python_marker: tuple[bytes, bytes] | None = None
        if scan.marker is not None:
            column = _MARKER_COLUMNS.get(scan.marker[0])
            if column is None:
                python_marker = scan.marker
                extra.append(b"mk:" + scan.marker[0])
            else:
                where.append(f"w.{column} = ?")
                args.append(scan.marker[1])
        by_time = scan.due_before is not None and scan.marker is None
        if scan.due_before is not None:
            where.append("w.fetch_time <= ?")
            args.append(scan.due_before)
        reader = _Reader(scan.columns, extra)
        order = "w.fetch_time, w.key" if by_time else "w.key"
        base = f"{reader.select(self._t, self._k, self._c)} WHERE {' AND '.join(where)}"
        remaining = scan.limit
        after: tuple[Any, ...] | None = None
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            if after is None:
                sql, page_args = base, args
            elif by_time:
                sql, page_args = base + " AND (w.fetch_time, w.key) > (?, ?)", [*args, *after]
            else:
                sql, page_args = base + " AND w.key > ?", [*args, *after]
            with self._lock:
                raw = self._query(f"{sql} ORDER BY {order} LIMIT ?", [*page_args, n]).fetchall()
            if not raw:
                return
            after = (raw[-1][1], raw[-1][0]) if by_time else (raw[-1][0],)
            for key, cells in reader.rows(raw, python_marker):
                yield key, cells
                if remaining is not None:
                    remaining -= 1
            if len(raw) < n:
                return

    # --- writes --------------------------------------------------------------------------------

    def write(self, updates: Sequence[RowUpdate]) -> None:
        """Apply *updates* in one transaction: all of them, or none if anything fails."""
        changes = [_Change(update) for update in coalesce(updates)]
        self._check_families(changes)
        if changes:
            with self._lock:
                self._transaction(lambda: self._apply(changes))

    def _check_families(self, changes: list[_Change]) -> None:
        for change in changes:
            unknown = change.families - _FAMILY_INDEX.keys()
            if unknown:
                raise StoreError(
                    f"{self}: row {change.key!r}: no column family {min(unknown)!r}"
                    f" (the table has {', '.join(_FAMILY_COLUMNS)})"
                )

    def modify(
        self,
        keys: Sequence[bytes],
        columns: Sequence[bytes] | None,
        change: Callable[[bytes, Cells | None], RowUpdate | None],
    ) -> int:
        """Read *keys*, call *change* for each and write what it returns, in one transaction.

        The transaction holds SQLite's write lock from the first read to the commit, so no other
        writer, in this process or another, changes these rows in between.
        """

        def work() -> int:
            found = self.get_many(keys, columns)
            updates = [u for key in keys if (u := change(key, found.get(key))) is not None]
            changes = [_Change(update) for update in coalesce(updates)]
            self._check_families(changes)
            if changes:
                self._apply(changes)
            return len(changes)

        with self._lock:
            return self._transaction(work)

    def delete_rows(self, keys: Sequence[bytes]) -> None:
        def delete() -> None:
            for table in (self._t, self._k, self._c):
                self._conn.executemany(f"DELETE FROM {table} WHERE key = ?", [(k,) for k in keys])

        with self._lock:
            self._transaction(delete)

    def _apply(self, updates: list[_Change]) -> None:
        conn = self._conn
        t, c, k = self._t, self._c, self._k
        hot = [_quote(_FAMILY_COLUMNS[i]) for i in _HOT]
        cold = [_quote(_FAMILY_COLUMNS[i]) for i in _COLD]
        upsert_hot = (
            f"INSERT INTO {t} (key, fetch_time, gen_mark, fetch_mark, upd_mark, has_links,"
            f" has_content, {', '.join(hot)}) VALUES ({', '.join('?' * (7 + len(hot)))})"
            " ON CONFLICT (key) DO UPDATE SET fetch_time = excluded.fetch_time,"
            " gen_mark = excluded.gen_mark, fetch_mark = excluded.fetch_mark,"
            " upd_mark = excluded.upd_mark, has_links = excluded.has_links,"
            " has_content = excluded.has_content, " + ", ".join(f"{f} = excluded.{f}" for f in hot)
        )
        upsert_cold = (
            f"INSERT INTO {k} (key, {', '.join(cold)}) VALUES ({', '.join('?' * (1 + len(cold)))})"
            " ON CONFLICT (key) DO UPDATE SET " + ", ".join(f"{f} = excluded.{f}" for f in cold)
        )
        read_hot = (
            f"SELECT key, fetch_time, gen_mark, fetch_mark, upd_mark, has_links, has_content,"
            f" {', '.join(hot)} FROM {t} WHERE key IN "
        )
        read_cold = f"SELECT key, {', '.join(cold)} FROM {k} WHERE key IN "
        for i in range(0, len(updates), _CHUNK):
            chunk = updates[i : i + _CHUNK]
            old = {
                record[0]: record
                for record in conn.execute(
                    read_hot + f"({','.join('?' * len(chunk))})", [u.key for u in chunk]
                )
            }
            # The second record is read only for rows whose write touches its families.
            wanted = [u.key for u in chunk if u.touches_cold and u.key in old and old[u.key][5]]
            links = {
                record[0]: record[1:]
                for record in conn.execute(read_cold + f"({','.join('?' * len(wanted))})", wanted)
            }
            hot_rows: list[tuple[Any, ...]] = []
            cold_rows: list[tuple[Any, ...]] = []
            contents: list[tuple[bytes, bytes]] = []
            drop_content: list[tuple[bytes]] = []
            drop_cold: list[tuple[bytes]] = []
            drop_rows: list[tuple[bytes]] = []
            for update in chunk:
                record = old.get(update.key)
                row = _Row.read(update.key, record, links.get(update.key), update.touches_cold)
                had_links = row.has_links
                row.apply(update)
                content = update.content
                if isinstance(content, bytes):
                    contents.append((update.key, content))
                    row.has_content = True
                elif content is False:
                    if row.has_content:
                        drop_content.append((update.key,))
                    row.has_content = False
                if update.touches_cold:
                    row.has_links = any(row.blobs[j] for j in _COLD)
                    if row.has_links:
                        cold_rows.append(row.cold_record())
                    elif had_links:
                        drop_cold.append((update.key,))
                if row.is_empty():
                    if record:
                        drop_rows.append((update.key,))
                    continue
                hot_rows.append(row.hot_record())
            conn.executemany(upsert_hot, hot_rows)
            if cold_rows:
                conn.executemany(upsert_cold, cold_rows)
            if contents:
                conn.executemany(
                    f"INSERT INTO {c} (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    contents,
                )
            for table, keys in ((c, drop_content), (k, drop_cold), (t, drop_rows)):
                if keys:
                    conn.executemany(f"DELETE FROM {table} WHERE key = ?", keys)

    # --- plumbing ------------------------------------------------------------------------------

    def _query(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, args)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise TableMissing(
                    f"table {self.table_name!r} does not exist in {self.path};"
                    " run 'nutchy storage init' or 'nutchy inject'"
                ) from exc
            raise StoreError(f"{self}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: {exc}") from exc

    def _transaction(self, work: Callable[[], T]) -> T:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: cannot start a write: {exc}") from exc
        try:
            result = work()
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc):
                raise TableMissing(
                    f"table {self.table_name!r} does not exist in {self.path};"
                    " run 'nutchy storage init' or 'nutchy inject'"
                ) from exc
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self}: write failed: {exc}") from exc
            raise
        conn.execute("COMMIT")
        return result


#: For each family, the first column of it and the first column after it, in byte order.
_FAMILY_BOUNDS = [(family, family + b":", family + b";") for family in FAMILIES]


def _group(puts: Cells) -> dict[bytes, Cells]:
    """*puts* split by family. Sorting the columns (in C) and cutting the sorted list at each
    family's bounds costs far less than looking at every column in Python."""
    columns = sorted(puts)
    get = puts.__getitem__
    groups: dict[bytes, Cells] = {}
    found = 0
    for family, low, high in _FAMILY_BOUNDS:
        lo = bisect_left(columns, low)
        hi = bisect_left(columns, high, lo)
        if lo < hi:
            part = columns[lo:hi]
            groups[family] = dict(zip(part, map(get, part), strict=True))
            found += hi - lo
    if found != len(columns):  # columns of families the table lacks: group them too
        known = {c for cells in groups.values() for c in cells}
        for column in columns:
            if column not in known:
                groups.setdefault(column[: column.find(b":")], {})[column] = puts[column]
    return groups


class _Change:
    """A row update with its cells grouped by family, the content apart."""

    __slots__ = ("content", "deletes", "families", "key", "puts", "replace", "touches_cold")

    def __init__(self, update: RowUpdate) -> None:
        self.key = update.key
        self.replace = update.replace
        #: bytes when the content is put, False when deleted, None when untouched
        self.content: bytes | bool | None = False if b"f" in update.replace else None
        puts = _group(update.puts)
        deletes: dict[bytes, list[bytes]] = {}
        for column in update.deletes:
            deletes.setdefault(column[: column.find(b":")], []).append(column)
        f = puts.get(b"f")
        if f is not None and CONTENT_COLUMN in f:
            self.content = f.pop(CONTENT_COLUMN)
        if CONTENT_COLUMN in deletes.get(b"f", ()):
            self.content = False
        self.puts = puts
        self.deletes = deletes
        self.families = set(puts) | set(deletes) | set(update.replace)
        self.touches_cold = any(_FAMILY_INDEX.get(family) in _COLD_SET for family in self.families)


class _Row:
    """One row while a write changes it. Family blobs are decoded only when the write touches
    their family; the second record's families are known only when the write touches one."""

    __slots__ = ("blobs", "fetch_time", "has_content", "has_links", "key", "marks")

    def __init__(
        self,
        key: bytes,
        fetch_time: int,
        marks: list[bytes | None],
        blobs: list[bytes | Cells | None],
        has_links: bool,
        has_content: bool,
    ) -> None:
        self.key = key
        self.fetch_time = fetch_time
        self.marks = marks
        self.blobs = blobs
        self.has_links = has_links
        self.has_content = has_content

    @classmethod
    def read(
        cls,
        key: bytes,
        hot: Sequence[Any] | None,
        cold: Sequence[Any] | None,
        touches_cold: bool,
    ) -> _Row:
        blobs: list[bytes | Cells | None] = [None] * len(FAMILIES)
        if hot is None:
            return cls(key, 0, [None, None, None], blobs, False, False)
        for j, blob in zip(_HOT, hot[7:], strict=True):
            blobs[j] = blob
        if cold is not None:
            for j, blob in zip(_COLD, cold, strict=True):
                blobs[j] = blob
        return cls(key, hot[1], list(hot[2:5]), blobs, bool(hot[5]), bool(hot[6]))

    def _family(self, index: int) -> Cells:
        blob = self.blobs[index]
        if blob is None:
            cells: Cells = {}
        elif isinstance(blob, bytes):
            cells = _loads(blob, self.key)
        else:
            return blob
        self.blobs[index] = cells
        return cells

    def apply(self, change: _Change) -> None:
        """Apply *change* to the families it touches (not to the content)."""
        for family in change.replace:
            self.blobs[_FAMILY_INDEX[family]] = {}
        for family, cells in change.puts.items():
            self._family(_FAMILY_INDEX[family]).update(cells)
        for family, columns in change.deletes.items():
            cells = self._family(_FAMILY_INDEX[family])
            for column in columns:
                cells.pop(column, None)
        f = self.blobs[0]
        if isinstance(f, dict):
            raw = f.get(b"f:ts")
            self.fetch_time = (
                int.from_bytes(raw, "big", signed=True) if raw and len(raw) == 8 else 0
            )
        mk = self.blobs[_FAMILY_INDEX[b"mk"]]
        if isinstance(mk, dict):
            self.marks = [mk.get(b"mk:" + name) for name in _MARKER_COLUMNS]

    def is_empty(self) -> bool:
        return not (self.has_content or self.has_links or any(self.blobs[j] for j in _HOT))

    def _encoded(self, indexes: list[int]) -> list[bytes | None]:
        return [
            (_dumps(b) if b else None) if isinstance(b, dict) else b
            for b in (self.blobs[j] for j in indexes)
        ]

    def hot_record(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.fetch_time,
            *self.marks,
            int(self.has_links),
            int(self.has_content),
            *self._encoded(_HOT),
        )

    def cold_record(self) -> tuple[Any, ...]:
        return (self.key, *self._encoded(_COLD))


class _Reader:
    """Turns selected records into cells, decoding only the families a read asks for.

    *extra* columns are read for a test in Python and dropped from the result unless asked.
    """

    def __init__(self, columns: Sequence[bytes] | None, extra: Sequence[bytes] = ()) -> None:
        self.exact: set[bytes] | None = None
        if columns is None:
            self.families = list(range(len(FAMILIES)))
            self.content = True
            self.drop: set[bytes] = set()
            return
        wanted = set(columns)
        whole = {c for c in wanted if b":" not in c}
        self.exact = {c for c in wanted if b":" in c and c.partition(b":")[0] not in whole}
        # A column of a family the table lacks reads as missing, as in HBase.
        needed = {c.partition(b":")[0] for c in wanted | set(extra)}
        self.families = sorted(_FAMILY_INDEX[f] for f in needed if f in _FAMILY_INDEX)
        self.content = CONTENT_COLUMN in wanted or b"f" in wanted
        self.drop = {c for c in extra if c not in wanted and c.partition(b":")[0] not in whole}
        self.whole = {c + b":" for c in whole}
        if not self.exact and not self.drop:
            self.exact = None  # whole families only: nothing to filter

    def select(self, table: str, links_table: str, content_table: str) -> str:
        cols = ["w.key", "w.fetch_time", "c.value" if self.content else "NULL"]
        cols += [
            f"{'k' if i in _COLD_SET else 'w'}.{_quote(_FAMILY_COLUMNS[i])}" for i in self.families
        ]
        join = ""
        if any(i in _COLD_SET for i in self.families):
            join += f" LEFT JOIN {links_table} AS k ON k.key = w.key"
        if self.content:
            join += f" LEFT JOIN {content_table} AS c ON c.key = w.key"
        return f"SELECT {', '.join(cols)} FROM {table} AS w{join}"

    def rows(
        self, records: Sequence[Any], marker: tuple[bytes, bytes] | None = None
    ) -> Iterator[tuple[bytes, Cells]]:
        exact, drop = self.exact, self.drop
        test = marker and (b"mk:" + marker[0], marker[1])
        for record in records:
            cells: Cells = {}
            for blob in record[3:]:
                if blob is not None:
                    cells.update(_loads(blob, record[0]))
            if record[2] is not None:
                cells[CONTENT_COLUMN] = record[2]
            if test and cells.get(test[0]) != test[1]:
                continue
            if exact is not None:
                whole = tuple(self.whole)
                cells = {
                    c: v
                    for c, v in cells.items()
                    if c not in drop and (c in exact or c.startswith(whole))
                }
            if cells:
                yield record[0], cells
