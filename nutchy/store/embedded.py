"""The embedded store: the web table in one SQLite file, no server needed.

Layout (one file, ``<crawl dir>/<table>.sqlite``, inspectable with the ``sqlite3`` shell):

- table ``<table>``: one record per row. ``key`` is the row key; ``cells`` holds every cell of the
  row except the raw content, as a pickled ``dict[bytes, bytes]`` of ``b"fam:qual"`` → the exact
  bytes Nutch would store in HBase; ``fetch_time`` and the ``gen_mark``, ``fetch_mark`` and
  ``upd_mark`` columns repeat ``f:ts`` and the batch markers so that indexes can serve "due rows"
  and "rows of batch B" without reading anything else;
- table ``<table>_content``: the raw content (``f:cnt``) by key. It is most of a crawl's bytes and
  changes only when a page is fetched, so keeping it apart spares generate and updatedb from
  rewriting it each time they touch a row;
- table ``nutchy_meta``: the layout version.

Several processes of one machine may read and write the file at once: SQLite in WAL mode lets
readers run beside the one writer, and every :meth:`EmbeddedStore.write` is one ``BEGIN
IMMEDIATE`` transaction that reads the rows it changes and writes them back, so concurrent writers
serialize and none loses another's cells. A process killed at any moment leaves the file with each
write either wholly applied or not at all. WAL mode needs a local disk (not NFS).

Cells are unpickled with an unpickler that refuses every class, so a crafted file cannot run code:
only dicts of bytes load.
"""

from __future__ import annotations

import io
import logging
import pickle
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store.base import Scan, key_range
from nutchy.store.schema import Cells, RowUpdate, coalesce

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

LAYOUT_VERSION = "1"
CONTENT_COLUMN = b"f:cnt"
#: Marker qualifiers that have their own indexed column.
_MARKER_COLUMNS = {b"_gnmrk_": "gen_mark", b"_ftcmrk_": "fetch_mark", b"_updmrk_": "upd_mark"}
_CHUNK = 500  # keys per "IN (...)" query: well under SQLite's parameter limit


class _CellsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a cells record")


def _loads(data: bytes) -> Cells:
    cells: Cells = _CellsUnpickler(io.BytesIO(data)).load()
    return cells


def _dumps(cells: Cells) -> bytes:
    return pickle.dumps(cells, protocol=5)


def _fetch_time(cells: Cells) -> int:
    raw = cells.get(b"f:ts")
    if raw is None or len(raw) != 8:
        return 0
    return int.from_bytes(raw, "big", signed=True)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class EmbeddedStore:
    """The web table in a SQLite file at *path*, in the table *table_name*.

    *busy_timeout* (seconds) is how long a write waits for another process's write to finish
    before failing with :exc:`StoreError`.
    """

    def __init__(self, path: str | Path, table_name: str = "webpage", busy_timeout: float = 60.0):
        self.path = Path(path)
        self.table_name = table_name
        self._t = _quote(table_name)
        self._c = _quote(table_name + "_content")
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA page_size = 16384")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA cache_size = -65536")
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
            t, c = self._t, self._c
            name = self.table_name
            statements = [
                "CREATE TABLE IF NOT EXISTS nutchy_meta (name TEXT PRIMARY KEY, value TEXT)",
                "INSERT OR IGNORE INTO nutchy_meta VALUES ('layout', ?)",
                (
                    f"CREATE TABLE {t} (key BLOB PRIMARY KEY, fetch_time INTEGER NOT NULL,"
                    " gen_mark BLOB, fetch_mark BLOB, upd_mark BLOB, cells BLOB NOT NULL)"
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
                    for n in (name, name + "_content")
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
        with_content = _wants_content(columns)
        select = self._select(with_content)
        found: dict[bytes, Cells] = {}
        with self._lock:
            for i in range(0, len(keys), _CHUNK):
                chunk = list(keys[i : i + _CHUNK])
                sql = f"{select} WHERE w.key IN ({','.join('?' * len(chunk))})"
                found.update(self._rows(self._query(sql, chunk), with_content, columns))
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
        with_content = _wants_content(scan.columns)
        where = ["w.key >= ?"]
        args: list[Any] = [start]
        if stop is not None:
            where.append("w.key < ?")
            args.append(stop)
        python_marker: tuple[bytes, bytes] | None = None
        if scan.marker is not None:
            column = _MARKER_COLUMNS.get(scan.marker[0])
            if column is None:
                python_marker = scan.marker
            else:
                where.append(f"w.{column} = ?")
                args.append(scan.marker[1])
        by_time = scan.due_before is not None and scan.marker is None
        if scan.due_before is not None:
            where.append("w.fetch_time <= ?")
            args.append(scan.due_before)
        order = "w.fetch_time, w.key" if by_time else "w.key"
        base = f"{self._select(with_content, by_time)} WHERE {' AND '.join(where)}"
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
            after = (raw[-1][3], raw[-1][0]) if by_time else (raw[-1][0],)
            for key, cells in self._rows(raw, with_content, scan.columns):
                if python_marker is not None and (
                    cells.get(b"mk:" + python_marker[0]) != python_marker[1]
                ):
                    continue
                yield key, cells
                if remaining is not None:
                    remaining -= 1
            if len(raw) < n:
                return

    def _select(self, with_content: bool, with_time: bool = False) -> str:
        cols = "w.key, w.cells, " + ("c.value" if with_content else "NULL")
        if with_time:
            cols += ", w.fetch_time"
        join = f" LEFT JOIN {self._c} AS c ON c.key = w.key" if with_content else ""
        return f"SELECT {cols} FROM {self._t} AS w{join}"

    @staticmethod
    def _rows(
        raw: Any, with_content: bool, columns: Sequence[bytes] | None
    ) -> Iterator[tuple[bytes, Cells]]:
        wanted = _column_test(columns)
        for record in raw:
            key, blob, content = record[0], record[1], record[2]
            cells = _loads(blob)
            if with_content and content is not None:
                cells[CONTENT_COLUMN] = content
            if wanted is not None:
                cells = {c: v for c, v in cells.items() if wanted(c)}
                if not cells:
                    continue
            yield key, cells

    # --- writes --------------------------------------------------------------------------------

    def write(self, updates: Sequence[RowUpdate]) -> None:
        """Apply *updates* in one transaction: all of them, or none if anything fails."""
        merged = coalesce(updates)
        if merged:
            with self._lock:
                self._transaction(lambda: self._apply(merged))

    def delete_rows(self, keys: Sequence[bytes]) -> None:
        def delete() -> None:
            for table in (self._t, self._c):
                self._conn.executemany(f"DELETE FROM {table} WHERE key = ?", [(k,) for k in keys])

        with self._lock:
            self._transaction(delete)

    def _apply(self, updates: list[RowUpdate]) -> None:
        conn = self._conn
        t, c = self._t, self._c
        upsert = (
            f"INSERT INTO {t} (key, fetch_time, gen_mark, fetch_mark, upd_mark, cells)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
            " fetch_time = excluded.fetch_time, gen_mark = excluded.gen_mark,"
            " fetch_mark = excluded.fetch_mark, upd_mark = excluded.upd_mark,"
            " cells = excluded.cells"
        )
        for i in range(0, len(updates), _CHUNK):
            chunk = updates[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            old = {
                key: (blob, has_content)
                for key, blob, has_content in conn.execute(
                    f"SELECT w.key, w.cells, EXISTS (SELECT 1 FROM {c} WHERE key = w.key)"
                    f" FROM {t} AS w WHERE w.key IN ({marks})",
                    [u.key for u in chunk],
                )
            }
            rows: list[tuple[Any, ...]] = []
            contents: list[tuple[bytes, bytes]] = []
            drop_content: list[tuple[bytes]] = []
            drop_rows: list[tuple[bytes]] = []
            for update in chunk:
                blob, had_content = old.get(update.key, (None, False))
                cells = _loads(blob) if blob is not None else {}
                content_state = _apply_update(cells, update)
                has_content = had_content if content_state is None else content_state is not False
                if isinstance(content_state, bytes):
                    contents.append((update.key, content_state))
                elif content_state is False and had_content:
                    drop_content.append((update.key,))
                if not cells and not has_content:
                    if blob is not None:
                        drop_rows.append((update.key,))
                    continue
                rows.append(
                    (
                        update.key,
                        _fetch_time(cells),
                        cells.get(b"mk:_gnmrk_"),
                        cells.get(b"mk:_ftcmrk_"),
                        cells.get(b"mk:_updmrk_"),
                        _dumps(cells),
                    )
                )
            conn.executemany(upsert, rows)
            if contents:
                conn.executemany(
                    f"INSERT INTO {c} (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    contents,
                )
            if drop_content:
                conn.executemany(f"DELETE FROM {c} WHERE key = ?", drop_content)
            if drop_rows:
                conn.executemany(f"DELETE FROM {t} WHERE key = ?", drop_rows)

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

    def _transaction(self, work: Any) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: cannot start a write: {exc}") from exc
        try:
            work()
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


def _apply_update(cells: Cells, update: RowUpdate) -> bytes | bool | None:
    """Apply *update* to *cells* in place; return the new content: bytes when it was put,
    ``False`` when it was deleted, ``None`` when untouched."""
    content: bytes | bool | None = None
    for family in update.replace:
        prefix = family + b":"
        for column in [col for col in cells if col.startswith(prefix)]:
            del cells[column]
        if family == b"f":
            content = False
    for column, value in update.puts.items():
        if column == CONTENT_COLUMN:
            content = value
        else:
            cells[column] = value
    for column in update.deletes:
        if column == CONTENT_COLUMN:
            content = False
        else:
            cells.pop(column, None)
    return content


def _wants_content(columns: Sequence[bytes] | None) -> bool:
    return columns is None or CONTENT_COLUMN in columns or b"f" in columns


def _column_test(columns: Sequence[bytes] | None) -> Any:
    """A predicate on ``b"fam:qual"`` for the requested columns, or ``None`` for all columns."""
    if columns is None:
        return None
    exact = {c for c in columns if b":" in c}
    families = tuple(c + b":" for c in columns if b":" not in c)
    return lambda col: col in exact or col.startswith(families)
