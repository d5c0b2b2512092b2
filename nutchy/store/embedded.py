"""The embedded store: the web table in one SQLite file, no server needed.

Layout 4 (one file, ``<crawl dir>/<table>.sqlite``, inspectable with the ``sqlite3`` shell):

- table ``<table>``: the row's main record, one per row that has any cell. ``key`` is the row
  key and ``id`` a number the row keeps for its life. The families ``f``, ``s``, ``mk`` and
  ``mtdt`` (small, read by generate, written by every job) are one column each, holding that
  family's cells as a marshalled ``dict[bytes, bytes]`` of ``b"fam:qual"`` → the exact bytes
  Nutch would store in HBase, or NULL when the family is empty. Other columns repeat cells of
  those records so that indexes can answer without reading them: ``fetch_time`` is ``f:ts`` as
  a number (0 when missing); ``ts``, ``fi``, ``sc`` and ``dist`` are the bytes of ``f:ts``,
  ``f:fi``, ``s:s`` and ``mk:dist`` (NULL when missing); ``fetch_mark`` and ``upd_mark`` are
  ``mk:_ftcmrk_`` and ``mk:_updmrk_``. The index ``<table>_due`` on ``(fetch_time, id, key, ts,
  fi, sc, dist)`` serves generate's due scan alone; ``has_links``, ``has_parse`` and
  ``has_content`` say whether the records below exist;
- table ``<table>_batch``: the cells generate writes, ``mk:_gnmrk_``, ``f:bid``, ``mtdt:_npt_``
  and ``mtdt:_ngt_``, in the columns ``gen_mark``, ``bid``, ``npt`` and ``ngt``, one record per
  row that has any. These cells live here and nowhere else (the family records never hold them);
  a read puts them back among their families' cells. Marking a batch writes these small records
  alone, in key order, and never the main record;
- table ``<table>_links``: the families ``il``, ``ol``, ``h`` and ``stm`` (links, headers) in the
  same form, one record per row that has any; every fetch and every updatedb rewrites it;
- table ``<table>_parse``: the family ``p`` (parse output, with the page's text) in the same
  form, apart from the links because a write rewrites a whole record: a fetch answered with 304
  or an updatedb adding inlinks does not rewrite the text (layout 3 kept ``p`` with the links);
- table ``<table>_content``: the raw content (``f:cnt``) by key;
- table ``nutchy_meta``: the layout version. A file of layout 3 is upgraded in place when first
  opened (:meth:`EmbeddedStore._upgrade_from_3`); a file of another layout is refused with a
  message.

A read decodes only the families it asks for, and a write reads and rewrites only the records
whose families it changes: the content, most of a crawl's bytes, is rewritten only when a page is
fetched again.

Several processes of one machine may read and write the file at once: SQLite in WAL mode lets
readers run beside the one writer, and every :meth:`EmbeddedStore.write` is one ``BEGIN
IMMEDIATE`` transaction that reads the rows it changes and writes them back, so concurrent writers
serialize and none loses another's cells. A process killed at any moment leaves the file with each
write either wholly applied or not at all. With ``synchronous=NORMAL`` (the default) a power loss
can lose the last writes but never corrupts the file; ``synchronous=OFF`` is faster and still safe
when only processes crash. WAL mode needs a local disk (not NFS).

The write-ahead log is copied into the file as a crawl goes: a passive checkpoint, in a thread,
at most every :data:`CHECKPOINT_INTERVAL` seconds after a write. SQLite's own checkpoint starts
the log over only when no reader still needs it, which the processes of a crawl, always reading,
never leave it: on its own the log grew past the file (260 MB beside 155 MB for 2,000 pages),
and the close that removes it took 0.25-0.55 s. Copied as it grows, the log starts over often
and stays at some 15 MB.

Family records use :mod:`marshal` format version 4, which only builds plain values (it runs no
code), and whose encoding of dicts and bytes has not changed since Python 3.4; the layout version
in ``nutchy_meta`` says how a file was written.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import logging
import marshal
import os
import sqlite3
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from nutchy.core.generate import GENERATE_TIME_KEY, PARTITION_KEY
from nutchy.core.status import Mark
from nutchy.exceptions import StoreCorrupt, StoreError, StoreUnavailable, TableMissing
from nutchy.store.base import Scan, key_range
from nutchy.store.schema import (
    FAMILIES,
    FETCH_TIME_COLUMN,
    Cells,
    RowUpdate,
    coalesce,
    marker_column,
)

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")

LAYOUT_VERSION = "4"
CONTENT_COLUMN = b"f:cnt"
_FAMILY_COLUMNS = [family.decode() for family in FAMILIES]
_FAMILY_INDEX = {family: i for i, family in enumerate(FAMILIES)}
#: Families in the row's main record: small, read by generate and written by every job.
_HOT = [i for i, family in enumerate(FAMILIES) if family in (b"f", b"s", b"mk", b"mtdt")]
#: The row's other records, each in a table of its own (``<table><suffix>``) with a flag in the
#: main record saying whether the row has one: its links and headers, written by every fetch and
#: updatedb; its parse output, where the page's text is, written by parse alone. A write
#: rewrites a whole record, so the text is kept apart from what every round rewrites.
#: Each as (table suffix, flag column, alias in a read's SELECT, families).
_SIDES = (
    ("_links", "has_links", "k", (b"il", b"ol", b"h", b"stm")),
    ("_parse", "has_parse", "q", (b"p",)),
)
#: The families of each side record, by index.
_SIDE_FAMILIES = [[_FAMILY_INDEX[family] for family in side[3]] for side in _SIDES]
#: The side record of each family that has one.
_SIDE_OF = {j: n for n, families in enumerate(_SIDE_FAMILIES) for j in families}
#: The side record of each family that has one, by the family's name.
_SIDE_BY_FAMILY = {FAMILIES[j]: n for j, n in _SIDE_OF.items()}
#: Marker qualifiers that have their own indexed column in the main record.
_MARKER_COLUMNS = {b"_ftcmrk_": "fetch_mark", b"_updmrk_": "upd_mark"}
_MARKER_CELLS = [b"mk:" + name for name in _MARKER_COLUMNS]
_MK = _FAMILY_INDEX[b"mk"]
#: Cells repeated in columns of the main record, so that the due index covers generate's reads.
_COPIES = (FETCH_TIME_COLUMN, b"f:fi", b"s:s", marker_column(Mark.DISTANCE))
_COPY_NAMES = ("ts", "fi", "sc", "dist")
_COPY_FAMILY = [_FAMILY_INDEX[c[: c.find(b":")]] for c in _COPIES]
#: Each copy's place, column and family index, for :meth:`_Row.apply`.
_COPY_PLACES = [(n, c, _COPY_FAMILY[n]) for n, c in enumerate(_COPIES)]
#: The cells of the batch record (written by generate), which live there and only there.
_BATCH = (
    marker_column(Mark.GENERATE),
    b"f:bid",
    b"mtdt:" + PARTITION_KEY.encode(),
    b"mtdt:" + GENERATE_TIME_KEY.encode(),
)
_BATCH_NAMES = ("gen_mark", "bid", "npt", "ngt")
_BATCH_INDEX = {column: i for i, column in enumerate(_BATCH)}
_BATCH_PLACES = {column: (i, column[: column.find(b":")]) for i, column in enumerate(_BATCH)}
_BATCH_KEYS = _BATCH_INDEX.keys()
_BATCH_FAMILIES = frozenset(c[: c.find(b":")] for c in _BATCH)
_NO_BATCH: tuple[None, ...] = (None,) * len(_BATCH)
#: Columns a due scan can read from the due index and the batch records alone.
_NARROW = frozenset(_COPIES + _BATCH)
_GEN_MARK = marker_column(Mark.GENERATE)
_CHUNK = 500  # keys per "IN (...)" query: well under SQLite's parameter limit
_SYNC_MODES = ("OFF", "NORMAL", "FULL")


# sqlite3 binds an int, float, str or bytearray parameter as it is, and sends any other value,
# bytes and None included, through its adapters: a lookup in its registry, then a lookup of
# ``__adapt__`` on its protocol type that fails (formatting an AttributeError's message, then
# dropping it) and one of ``__conform__`` on the value. About 1,200 machine instructions a
# parameter: 4.5% of an updatedb's, whose keys, cells and family records are bytes and whose
# missing cells are None. An adapter registered for each ends the search at the registry; both
# are calls in C that give the value back as it is (``bytes.__bytes__`` of a bytes object is
# that object; an empty dict's ``get`` gives None), so bytes and None are bound as before, by any
# user of sqlite3 in the process.
sqlite3.register_adapter(bytes, bytes.__bytes__)
_NOTHING: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NOTHING.get)


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


#: The columns of the main record after its key, in the order :func:`_new_record` gives them.
_MAIN_COLUMNS = (
    "fetch_time",
    *_COPY_NAMES,
    *_MARKER_COLUMNS.values(),
    *(flag for _, flag, _, _ in _SIDES),
    "has_content",
    *[_quote(_FAMILY_COLUMNS[i]) for i in _HOT],
)


#: Seconds after which a write starts a passive checkpoint (see the module docstring).
CHECKPOINT_INTERVAL = 0.2


def _still_held() -> None:
    """A file lock is held until it is let go: nothing to check."""


class EmbeddedStore:
    """The web table in a SQLite file at *path*, in the table *table_name*.

    *busy_timeout* (seconds) is how long a write waits for another process's write to finish
    before failing with :exc:`StoreError`. *synchronous* is SQLite's ``synchronous`` pragma:
    ``NORMAL`` (the default: safe against crashes of processes and of the machine), ``FULL``
    (also durable to the last write on power loss) or ``OFF`` (fastest; safe when only processes
    crash). *cache_mb* is the most memory (MiB) SQLite's page cache takes, for each connection
    (``NUTCH_STORE_EMBEDDED_CACHE_MB``). A write starts a :meth:`checkpoint` when the last one
    started *checkpoint_interval* seconds ago or more (None: only :meth:`checkpoint` does).
    """

    def __init__(
        self,
        path: str | Path,
        table_name: str = "webpage",
        busy_timeout: float = 60.0,
        synchronous: str = "NORMAL",
        cache_mb: float = 8,
        checkpoint_interval: float | None = CHECKPOINT_INTERVAL,
    ):
        if synchronous.upper() not in _SYNC_MODES:
            raise ValueError(f"'synchronous' must be one of {_SYNC_MODES}, got {synchronous!r}")
        if not cache_mb > 0:
            raise ValueError(f"'cache_mb' must be > 0, got {cache_mb!r}")
        self.path = Path(path)
        self.table_name = table_name
        self._t = _quote(table_name)
        self._c = _quote(table_name + "_content")
        #: the tables of the side records, as :data:`_SIDES`
        self._sides = [_quote(table_name + suffix) for suffix, _, _, _ in _SIDES]
        self._b = _quote(table_name + "_batch")
        self._layout_checked = False
        self._lock = threading.RLock()
        self._busy_timeout = busy_timeout
        self._checkpointer: threading.Thread | None = None
        self._checkpointing = threading.Lock()
        self._checkpoint_interval = checkpoint_interval
        #: when the last checkpoint started (time.monotonic()), or the store was made
        self._checkpointed = time.monotonic()
        self._synchronous = synchronous.upper()
        self.cache_mb = cache_mb
        # Connected on first use: a store opened where there is no file yet (a read-only verb
        # run before inject, or in the wrong folder) leaves no empty file behind; only
        # create() makes one.
        self._connection: sqlite3.Connection | None = None
        #: Whether this store counts in _OPEN (from its connection to its close).
        self._counted = False
        if self.path.exists():
            self._connect()

    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection; a store whose file does not exist has no table in it."""
        connection = self._connection
        if connection is None:
            with self._lock:
                if not self.path.exists():
                    raise self._missing()
                connection = self._connect()
        return connection

    def _connect(self) -> sqlite3.Connection:
        """Open the file (creating it and its folder when missing)."""
        with self._lock:
            if self._connection is not None:
                return self._connection
            with _OPEN_LOCK:
                # Only while no connection of this process has the file open: closing any other
                # descriptor of the file drops the POSIX locks SQLite holds on it, process-wide,
                # and another process could then write under a reader or a writer (SQLite's
                # "How To Corrupt", 2.2). A file open here was checked when it was opened.
                if not _OPEN[self._file_key]:
                    self._check_file()
                _OPEN[self._file_key] += 1
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path,
                    timeout=self._busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                # 64 KiB pages (set when the file is created): six 10 KB page bodies fit one
                # page, where 16 KiB pages fit one and waste a third of the file. Measured in
                # docs/benchmarks.md, they also write and scan faster.
                conn.execute("PRAGMA page_size = 65536")
                conn.execute("PRAGMA journal_mode = WAL")
                # Freed space is not overwritten with zeros (Debian's and Ubuntu's SQLite do so
                # by default): a row rewritten or deleted frees cells in 64 KiB pages, and an
                # updatedb spent 3% of its instructions zeroing them. A deleted row's bytes may
                # stay in the file's free space until it is reused.
                conn.execute("PRAGMA secure_delete = OFF")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                self._set_cache(conn)
                conn.execute("PRAGMA wal_autocheckpoint = 4096")
                # The schema (every page that holds it), then the first row of every table
                # (the pages from its root down): a few pages, whatever the file's size.
                self._check_size(conn)
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).fetchall():
                    conn.execute(f"SELECT * FROM {_quote(name)} LIMIT 1").fetchall()
            except (OSError, sqlite3.Error) as exc:
                self._forget_file()
                if isinstance(exc, sqlite3.Error) and _is_corrupt(exc):
                    raise self._corrupt(str(exc)) from exc
                raise StoreUnavailable(
                    f"cannot open the embedded store at {self.path}: {exc}"
                ) from exc
            self._connection = conn
            self._counted = True
            return conn

    def _set_cache(self, conn: sqlite3.Connection) -> None:
        """Bound *conn*'s page cache to :attr:`cache_mb`. Every process of a crawl (the crawl,
        its fetch and its parse) has connections of its own, each with its cache; a page not in
        it is read again from the file, which the system's page cache keeps in memory once for
        all processes. The cache grows as pages are read or written, up to the bound, and stays
        until the connection is closed: 64 MiB in each of three processes was 40 MB of the
        peak memory of a crawl of 2,000 pages (docs/benchmarks.md)."""
        conn.execute(f"PRAGMA cache_size = {-max(1, round(self.cache_mb * 1024))}")

    @property
    def _file_key(self) -> str:
        return os.path.realpath(self.path)

    def _forget_file(self) -> None:
        with _OPEN_LOCK:
            _OPEN[self._file_key] -= 1

    def _check_file(self) -> None:
        """Refuse, before SQLite opens it, a file that is empty though it is not new: SQLite
        would take it for a new, empty database, and a crawl would start over on it.

        A whole ``PRAGMA quick_check`` reads every page of the file: 8.6 s for 100,000 fetched
        pages (1.4 GB), too long for every process that opens the table. So an open checks
        what is cheap: this, then (:meth:`_check_size`) that the file is an SQLite database,
        its schema and the first row of each table (the pages from the table's root down: a few
        milliseconds whatever the file's size), and that it is as long as its header says.
        SQLite's own checks do the rest as pages are read (a damaged page fails the query that
        reads it, with :exc:`StoreCorrupt`); ``nutchy storage check`` runs the whole quick check
        (:meth:`check`).

        The file is never opened here but by SQLite: closing any other descriptor of it would
        drop the POSIX locks SQLite's connections of this process hold on it.
        """
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return  # created when connected
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the embedded store at {self.path}: {exc}") from exc
        # A store writes the file's header as it creates it: an empty file older than a moment
        # was made by something else, or cut to nothing.
        if (
            stat.st_size == 0
            and not self._has_wal()
            and time.time() - stat.st_mtime > _NEW_FILE_SECONDS
        ):
            raise self._corrupt("the file is empty (0 bytes), and a web table's file never is")

    def _has_wal(self) -> bool:
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            return wal.stat().st_size > 0
        except OSError:
            return False

    def _check_size(self, conn: sqlite3.Connection) -> None:
        """Refuse a file shorter than the pages its header counts (cut short), unless its
        write-ahead log holds the rest."""
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if pages * page_size > size and not self._has_wal():
            raise self._corrupt(
                f"the file is cut short: {size} bytes, where its header counts {pages} pages"
                f" of {page_size}"
            )

    def check(self) -> list[str]:
        """SQLite's ``PRAGMA quick_check`` of the whole file: what is wrong with it, at most 100
        lines, or nothing. It reads every page (8.6 s for 1.4 GB, 100,000 fetched pages)."""
        with self._lock:
            try:
                rows = self._conn.execute("PRAGMA quick_check(100)").fetchall()
            except sqlite3.Error as exc:
                if _is_corrupt(exc):
                    return [str(self._corrupt(str(exc)))]
                raise self._error(exc) from exc
        problems = [str(row[0]) for row in rows if row[0] != "ok"]
        if problems:
            problems.append(str(self._corrupt(f"{len(problems)} problems found")))
        return problems

    def _corrupt(self, why: str) -> StoreCorrupt:
        return StoreCorrupt(
            f"{self.path} is damaged: {why}. Restore it from a copy; or keep what can be read"
            f" with 'sqlite3 {self.path} .recover | sqlite3 recovered.sqlite' and move"
            " recovered.sqlite in its place; or move it away to start a new crawl"
        )

    def _missing(self) -> TableMissing:
        return TableMissing(
            f"table {self.table_name!r} does not exist in {self.path};"
            " run 'nutchy storage init' or 'nutchy inject'"
        )

    def __repr__(self) -> str:
        return f"EmbeddedStore({str(self.path)!r}, table_name={self.table_name!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        with self._lock:
            if self._connection is None and not self.path.exists():
                return False
            row = self._query(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table_name,)
            ).fetchone()
        return row is not None

    def create(self) -> bool:
        with self._lock:
            self._connect()
            self._check_layout()
            if self.exists():
                return False
            t, c, b = self._t, self._c, self._b
            name = self.table_name
            copies = ", ".join(f"{n} BLOB" for n in _COPY_NAMES)
            statements = [
                "CREATE TABLE IF NOT EXISTS nutchy_meta (name TEXT PRIMARY KEY, value TEXT)",
                "INSERT OR IGNORE INTO nutchy_meta VALUES ('layout', ?)",
                (
                    f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE,"
                    f" fetch_time INTEGER NOT NULL, {copies}, fetch_mark BLOB, upd_mark BLOB, "
                    + "".join(f"{flag} INTEGER NOT NULL, " for _, flag, _, _ in _SIDES)
                    + "has_content INTEGER NOT NULL, "
                    + ", ".join(f"{_quote(_FAMILY_COLUMNS[i])} BLOB" for i in _HOT)
                    + ")"
                ),
                (
                    f"CREATE TABLE {b} (key BLOB PRIMARY KEY, "
                    + ", ".join(f"{n} BLOB" for n in _BATCH_NAMES)
                    + ") WITHOUT ROWID"
                ),
                *(
                    f"CREATE TABLE {side} (key BLOB PRIMARY KEY, "
                    + ", ".join(f"{_quote(_FAMILY_COLUMNS[i])} BLOB" for i in families)
                    + ")"
                    for side, families in zip(self._sides, _SIDE_FAMILIES, strict=True)
                ),
                f"CREATE TABLE {c} (key BLOB PRIMARY KEY, value BLOB NOT NULL)",
                # Ordered by the row's id after the fetch time, not by its key: rows written
                # together (an inject) land side by side instead of all over the index.
                (
                    f"CREATE INDEX {_quote(name + '_due')} ON {t}"
                    f" (fetch_time, id, key, {', '.join(_COPY_NAMES)})"
                ),
                (
                    f"CREATE INDEX {_quote(name + '_gen_mark')} ON {b} (gen_mark, key)"
                    " WHERE gen_mark IS NOT NULL"
                ),
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
            if self._connection is None and not self.path.exists():
                return  # no file, no table
            self._transaction(
                lambda: [
                    self._conn.execute(f"DROP TABLE IF EXISTS {_quote(n)}")
                    for n in (
                        name,
                        *(name + suffix for suffix, _, _, _ in _SIDES),
                        name + "_content",
                        name + "_batch",
                    )
                ]
            )

    def _check_layout(self) -> None:
        """Refuse a file written in another layout, with a message saying what to do."""
        if self._layout_checked:
            return
        try:
            row = self._conn.execute(
                "SELECT value FROM nutchy_meta WHERE name = 'layout'"
            ).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise StoreError(f"{self}: {exc}") from exc
            row = None
        if row is not None and row[0] == "3":
            self._upgrade_from_3()
        elif row is not None and row[0] != LAYOUT_VERSION:
            raise StoreError(
                f"{self.path} holds a web table in the embedded store's layout {row[0]}, written"
                f" by an older nutchy; this nutchy reads layout {LAYOUT_VERSION} (and upgrades"
                " layout 3) only. Keep the old file with the nutchy that wrote it, or move it"
                " away and inject again into a new file"
            )
        self._layout_checked = True

    def _upgrade_from_3(self) -> None:
        """Move the ``p`` family of a layout 3 file out of the links records into parse records,
        in one transaction (a process killed meanwhile leaves the file in layout 3)."""
        t = self._t
        links, parse = self._sides
        name = self.table_name

        def upgrade() -> None:
            conn = self._conn
            layout = conn.execute("SELECT value FROM nutchy_meta WHERE name = 'layout'").fetchone()
            if layout[0] != "3":
                return  # another process did it meanwhile
            tables = {
                row[0]
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if name in tables:
                logger.info(
                    "Upgrading table %s in %s to layout %s", name, self.path, LAYOUT_VERSION
                )
                statements = [
                    f"ALTER TABLE {t} ADD COLUMN has_parse INTEGER NOT NULL DEFAULT 0",
                    f"CREATE TABLE {parse} (key BLOB PRIMARY KEY, p BLOB)",
                    f"INSERT INTO {parse} (key, p) SELECT key, p FROM {links} WHERE p IS NOT NULL",
                    f"UPDATE {t} SET has_parse = 1 WHERE key IN (SELECT key FROM {parse})",
                    f"ALTER TABLE {links} DROP COLUMN p",
                    f"DELETE FROM {links} WHERE "
                    + " AND ".join(f"{_FAMILY_COLUMNS[j]} IS NULL" for j in _SIDE_FAMILIES[0]),
                    (
                        f"UPDATE {t} SET has_links = 0"
                        f" WHERE has_links = 1 AND key NOT IN (SELECT key FROM {links})"
                    ),
                ]
                for statement in statements:
                    conn.execute(statement)
            conn.execute(
                "UPDATE nutchy_meta SET value = ? WHERE name = 'layout'", (LAYOUT_VERSION,)
            )

        self._transaction(upgrade)

    def close(self) -> None:
        # The checkpoint started last goes on until done: closing the last connection copies
        # what is left of the log, and a thread still copying would make that one wait.
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                if self._counted:
                    self._counted = False
                    self._forget_file()

    def checkpoint(self) -> None:
        """Start a passive checkpoint (the write-ahead log copied into the file, without waiting
        for readers or writers) on a connection of its own, in a thread; one at a time. The
        process goes on meanwhile: SQLite does the copy without Python's lock. After a fetch,
        this takes the copy of the fetch's writes out of the :meth:`close` that would otherwise
        do it (0.3 s for the 75 MB of log a fetch of 5,000 pages answered with 304 leaves).
        Failing, it logs why and leaves the log to the next checkpoint."""
        self._start_checkpoint()

    def _start_checkpoint(self) -> None:
        with self._checkpointing:
            if self._connection is None or (
                self._checkpointer is not None and self._checkpointer.is_alive()
            ):
                return  # nothing written through this store, or a checkpoint under way
            self._checkpointed = time.monotonic()
            thread = threading.Thread(
                target=self._checkpoint, name=f"checkpoint {self.path.name}", daemon=True
            )
            self._checkpointer = thread
            thread.start()

    def _checkpoint(self) -> None:
        try:
            # mode=rw: a file removed meanwhile is not created again, empty
            conn = sqlite3.connect(
                self.path.resolve().as_uri() + "?mode=rw",
                uri=True,
                timeout=self._busy_timeout,
                isolation_level=None,
            )
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            logger.warning("Could not checkpoint %s: %s", self.path, exc)

    def splits(self) -> list[tuple[bytes, bytes | None]]:
        return [(b"", None)]

    def sample_splits(self, n: int) -> list[tuple[bytes, bytes | None]]:
        """Cut the key space into at most *n* ranges holding about as many rows each, for jobs
        that scan the table in several processes (the file has no regions: :meth:`splits` is
        one range).

        The cuts are keys of rows found at evenly spaced row ids (``64 * n`` lookups in the
        primary key, whatever the table's size), so an empty or one-row table is one range.
        Rows written meanwhile only make the ranges less even: they always cover the key space.
        """
        if n < 1:
            raise ValueError(f"'n' must be >= 1, got {n!r}")
        with self._lock:
            self._check_layout()
            low, high = self._query(f"SELECT min(id), max(id) FROM {self._t}").fetchone()
            if n == 1 or low is None or low == high:
                return [(b"", None)]
            points = 64 * n
            sample = sorted(
                record[0]
                for i in range(points)
                for record in self._query(
                    f"SELECT key FROM {self._t} WHERE id >= ? ORDER BY id LIMIT 1",
                    (low + (high - low) * i // points,),
                )
            )
        cuts = sorted({sample[len(sample) * i // n] for i in range(1, n)})
        return list(zip([b"", *cuts], [*cuts, None], strict=True))

    # --- reads ---------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> Cells | None:
        return self.get_many([key], columns).get(key)

    def get_many(
        self, keys: Sequence[bytes], columns: Sequence[bytes] | None = None
    ) -> dict[bytes, Cells]:
        reader = _Reader(columns)
        select = reader.select(self._t, self._sides, self._c, self._b)
        found: dict[bytes, Cells] = {}
        with self._lock:
            self._check_layout()
            for i in range(0, len(keys), _CHUNK):
                chunk = list(keys[i : i + _CHUNK])
                sql = f"{select} WHERE w.key IN ({','.join('?' * len(chunk))})"
                # Row by row from the cursor: a chunk's records are not all held at once
                # (a page's text, read for its signature, is tens of KB). Closed however the
                # read ends, so that no statement stays open on the connection.
                cursor = self._query(sql, chunk)
                try:
                    found.update(reader.rows(cursor))
                finally:
                    cursor.close()
        return found

    def scan(
        self, scan: Scan | None = None, page_size: int = 1000
    ) -> Iterator[tuple[bytes, Cells]]:
        """Stream the rows of *scan*, *page_size* rows per query.

        No transaction stays open between pages: another process can write while a scan is being
        consumed, and the scan then sees rows as they are when each page is read.

        A due scan (*due_before*, no marker) that asks only for columns the due index and the
        batch records hold (``f:ts``, ``f:fi``, ``s:s``, ``mk:dist`` and the cells generate
        writes: what generate reads) is answered from them alone, without reading any family
        record; rows then come by fetch time.
        """
        if scan is None:
            scan = Scan()
        with self._lock:
            self._check_layout()
        start, stop = key_range(scan)
        if (
            scan.due_before is not None
            and scan.marker is None
            and scan.columns
            and set(scan.columns) <= _NARROW
        ):
            yield from self._scan_due(scan, start, stop, page_size)
            return
        by_batch = scan.marker is not None and b"mk:" + scan.marker[0] == _GEN_MARK
        key = "b.key" if by_batch else "w.key"
        where = [f"{key} >= ?"]
        args: list[Any] = [start]
        if stop is not None:
            where.append(f"{key} < ?")
            args.append(stop)
        extra: list[bytes] = []
        python_marker: tuple[bytes, bytes] | None = None
        if by_batch:
            assert scan.marker is not None
            where.append("b.gen_mark = ?")
            args.append(scan.marker[1])
        elif scan.marker is not None:
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
        order = "w.fetch_time, w.id" if by_time else key
        select = reader.select(self._t, self._sides, self._c, self._b, by_batch=by_batch)
        base = f"{select} WHERE {' AND '.join(where)}"
        remaining = scan.limit
        after: tuple[Any, ...] | None = None
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            if after is None:
                sql, page_args = base, args
            elif by_time:
                sql, page_args = base + " AND (w.fetch_time, w.id) > (?, ?)", [*args, *after]
            else:
                sql, page_args = base + f" AND {key} > ?", [*args, *after]
            with self._lock:
                raw = self._query(f"{sql} ORDER BY {order} LIMIT ?", [*page_args, n]).fetchall()
            if not raw:
                return
            after = (raw[-1][1], raw[-1][2]) if by_time else (raw[-1][0],)
            for row_key, cells in reader.rows(raw, python_marker):
                yield row_key, cells
                if remaining is not None:
                    remaining -= 1
            if len(raw) < n:
                return

    def _scan_due(
        self, scan: Scan, start: bytes, stop: bytes | None, page_size: int
    ) -> Iterator[tuple[bytes, Cells]]:
        """A due scan of :data:`_NARROW` columns, from the due index and the batch records."""
        wanted = set(scan.columns or ())
        names = [c for c in _COPIES if c in wanted]
        sources = [f"w.{_COPY_NAMES[_COPIES.index(c)]}" for c in names]
        batch = [c for c in _BATCH if c in wanted]
        names += batch
        sources += [f"b.{_BATCH_NAMES[_BATCH_INDEX[c]]}" for c in batch]
        join = f" LEFT JOIN {self._b} AS b ON b.key = w.key" if batch else ""
        where = "w.fetch_time <= ? AND w.key >= ?"
        args: list[Any] = [scan.due_before, start]
        if stop is not None:
            where += " AND w.key < ?"
            args.append(stop)
        base = (
            f"SELECT w.fetch_time, w.id, w.key, {', '.join(sources)}"
            f" FROM {self._t} AS w INDEXED BY {_quote(self.table_name + '_due')}{join}"
            f" WHERE {where}"
        )
        remaining = scan.limit
        after: list[Any] = []
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            sql = base + " AND (w.fetch_time, w.id) > (?, ?)" if after else base
            with self._lock:
                raw = self._query(
                    f"{sql} ORDER BY w.fetch_time, w.id LIMIT ?", [*args, *after, n]
                ).fetchall()
            if not raw:
                return
            after = [raw[-1][0], raw[-1][1]]
            for record in raw:
                cells = {c: v for c, v in zip(names, record[3:], strict=True) if v is not None}
                if cells:
                    yield record[2], cells
                    if remaining is not None:
                        remaining -= 1
            if len(raw) < n:
                return

    def scan_due_by_score(
        self, due_before: int, page_size: int = 1000
    ) -> Iterator[tuple[Any, ...]]:
        """The rows due at *due_before* (ms), highest ``s:s`` first, as tuples of raw cells:
        ``(s:s, key, mk:_gnmrk_, mk:dist, mtdt:_ngt_, f:ts, f:fi)``, ``None`` for a missing
        cell: what generate reads.

        Rows come by the bytes of ``s:s`` in descending order (rows without a score last), which
        is descending order of the scores themselves while they are finite and not negative
        (big-endian IEEE floats). Rows of equal bytes come in no given order. SQLite reads the
        due part of the due index and sorts it; the rows are then streamed *page_size* at a time
        from one read of the file, on a connection of the scan's own (so that the store stays
        free for writes while the rows are consumed, and the rows are one snapshot).
        """
        with self._lock:
            self._check_layout()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the embedded store at {self.path}: {exc}") from exc
        try:
            self._set_cache(conn)
            cursor = conn.execute(
                f"SELECT w.sc, w.key, b.gen_mark, w.dist, b.ngt, w.ts, w.fi"
                f" FROM {self._t} AS w INDEXED BY {_quote(self.table_name + '_due')}"
                f" LEFT JOIN {self._b} AS b ON b.key = w.key"
                " WHERE w.fetch_time <= ? ORDER BY w.sc DESC",
                (due_before,),
            )
            while rows := cursor.fetchmany(page_size):
                yield from rows
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        finally:
            conn.close()

    # --- writes --------------------------------------------------------------------------------

    def write(self, updates: Sequence[RowUpdate]) -> None:
        """Apply *updates* in one transaction: all of them, or none if anything fails."""
        changes = _changes(coalesce(updates))
        self._check_families(changes)
        if changes:
            with self._lock:
                self._check_layout()  # before the transaction: it may upgrade the file
                self._transaction(lambda: self._apply(changes))

    def insert_new(self, updates: Sequence[RowUpdate]) -> int:
        """Write the rows of *updates* that are not in the table, in one transaction, and leave
        the rows that are there as they are; return how many rows were written.

        New rows made of main-record cells alone (inject's) take one ``INSERT ... ON CONFLICT
        DO NOTHING`` each: no read, and rows sharing one ``puts`` mapping share one record.
        Any other update is applied as :meth:`write` applies it, to the rows found missing
        inside the transaction.
        """
        changes = _changes(coalesce(updates))
        self._check_families(changes)
        records = [_new_record(change) for change in changes if change.plain]
        others = [change for change in changes if not change.plain]
        if not (records or others):
            return 0
        main = ", ".join(_MAIN_COLUMNS)
        insert = (
            f"INSERT INTO {self._t} (key, {main}) VALUES ({', '.join('?' * (1 + len(_MAIN_COLUMNS)))})"
            " ON CONFLICT (key) DO NOTHING"
        )

        def work() -> int:
            written = self._conn.executemany(insert, records).rowcount if records else 0
            if others:
                found = self._present([change.key for change in others])
                missing = [change for change in others if change.key not in found]
                self._apply(missing)
                written += len(missing)
            return written

        with self._lock:
            self._check_layout()
            return self._transaction(work)

    def _present(self, keys: list[bytes]) -> set[bytes]:
        """Which of *keys* are rows of the table (read from the key index alone)."""
        found: set[bytes] = set()
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            sql = f"SELECT key FROM {self._t} WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(record[0] for record in self._conn.execute(sql, chunk))
        return found

    def _check_families(self, changes: list[_Change]) -> None:
        checked: set[int] = set()  # changes that share their cells share their families
        for change in changes:
            if id(change.families) in checked:
                continue
            checked.add(id(change.families))
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
        chunk_size: int | None = None,
    ) -> int:
        """Read *keys*, call *change* for each and write what it returns, in one transaction per
        *chunk_size* keys (1000 by default).

        Each transaction holds SQLite's write lock from its first read to its commit, so no
        other writer, in this process or another, changes these rows in between; no row is
        locked on its own.
        """
        chunk = chunk_size or 1000
        if chunk < 1:
            raise ValueError(f"'chunk_size' must be >= 1, got {chunk!r}")

        def work(part: Sequence[bytes]) -> int:
            found = self.get_many(part, columns)
            updates = [u for key in part if (u := change(key, found.get(key))) is not None]
            changes = [_Change(update) for update in coalesce(updates)]
            self._check_families(changes)
            if changes:
                self._apply(changes)
            return len(changes)

        written = 0
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]
            with self._lock:
                self._check_layout()
                written += self._transaction(functools.partial(work, part))
        return written

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[Callable[[], None]]:
        """Hold the lock *name* of this table: an exclusive ``flock`` of the file
        ``<store file>.<name>.lock`` beside the store's file, which the system releases when the
        holder exits, however it ends. Waits while another holder has it."""
        if not name.isidentifier():
            raise ValueError(f"a lock name is a word, got {name!r}")
        if not self.exists():
            # No table to lock, and no lock file left beside a file that is not there.
            raise self._missing()
        path = self.path.with_name(f"{self.path.name}.{name}.lock")
        with path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield _still_held
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def delete_rows(self, keys: Sequence[bytes]) -> None:
        def delete() -> None:
            for table in (self._t, *self._sides, self._c, self._b):
                self._conn.executemany(f"DELETE FROM {table} WHERE key = ?", [(k,) for k in keys])

        with self._lock:
            self._check_layout()
            self._transaction(delete)

    def _apply(self, updates: list[_Change]) -> None:
        self._check_layout()
        conn = self._conn
        t, c, b = self._t, self._c, self._b
        main = list(_MAIN_COLUMNS)
        upsert_hot = (
            f"INSERT INTO {t} (key, {', '.join(main)}) VALUES ({', '.join('?' * (1 + len(main)))})"
            " ON CONFLICT (key) DO UPDATE SET " + ", ".join(f"{f} = excluded.{f}" for f in main)
        )
        upsert_sides: list[str] = []
        read_sides: list[str] = []
        for side, families in zip(self._sides, _SIDE_FAMILIES, strict=True):
            names = [_quote(_FAMILY_COLUMNS[i]) for i in families]
            upsert_sides.append(
                f"INSERT INTO {side} (key, {', '.join(names)})"
                f" VALUES ({', '.join('?' * (1 + len(names)))}) ON CONFLICT (key) DO UPDATE SET "
                + ", ".join(f"{f} = excluded.{f}" for f in names)
            )
            read_sides.append(f"SELECT key, {', '.join(names)} FROM {side} WHERE key IN ")
        upsert_batch = (
            f"INSERT INTO {b} (key, {', '.join(_BATCH_NAMES)})"
            f" VALUES ({', '.join('?' * (1 + len(_BATCH)))}) ON CONFLICT (key) DO UPDATE SET "
            + ", ".join(f"{f} = excluded.{f}" for f in _BATCH_NAMES)
        )
        read_hot = f"SELECT key, {', '.join(main)} FROM {t} WHERE key IN "
        read_batch = f"SELECT key, {', '.join(_BATCH_NAMES)} FROM {b} WHERE key IN "

        def read(sql: str, keys: list[bytes]) -> list[Any]:
            if not keys:
                return []
            return conn.execute(sql + f"({','.join('?' * len(keys))})", keys).fetchall()

        for i in range(0, len(updates), _CHUNK):
            chunk = updates[i : i + _CHUNK]
            # A write of batch cells alone (generate's marks) needs to know only that the row
            # exists, which the key index tells without reading the main record.
            existing = self._present([u.key for u in chunk if u.only_batch])
            old = {
                record[0]: record
                for record in read(read_hot, [u.key for u in chunk if u.key not in existing])
            }
            # A side record is read only for rows whose write touches its families, and the
            # batch record only for rows whose write touches its cells.
            sides = [
                {
                    record[0]: record[1:]
                    for record in read(
                        sql,
                        [
                            u.key
                            for u in chunk
                            if u.touches[n] and u.key in old and old[u.key][_M_SIDES + n]
                        ],
                    )
                }
                for n, sql in enumerate(read_sides)
            ]
            batches = {
                record[0]: record[1:]
                for record in read(
                    read_batch, [u.key for u in chunk if u.touches_batch and u.key not in existing]
                )
            }
            # Batch cells put on existing rows are upserted without reading the batch record:
            # the columns not put keep their values.
            marks: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}
            hot_rows: list[tuple[Any, ...]] = []
            side_rows: list[list[tuple[Any, ...]]] = [[] for _ in _SIDES]
            batch_rows: list[tuple[Any, ...]] = []
            contents: list[tuple[bytes, bytes]] = []
            drop_content: list[tuple[bytes]] = []
            drop_sides: list[list[tuple[bytes]]] = [[] for _ in _SIDES]
            drop_batch: list[tuple[bytes]] = []
            drop_rows: list[tuple[bytes]] = []
            for update in chunk:
                key = update.key
                has_batch = False
                if key in existing:
                    places = tuple(update.batch_puts)
                    marks.setdefault(places, []).append((key, *update.batch_puts.values()))
                    continue
                if update.touches_batch:
                    had_batch = key in batches
                    cells = list(batches.get(key, _NO_BATCH))
                    update.apply_batch(cells)
                    has_batch = cells != list(_NO_BATCH)
                    if has_batch:
                        batch_rows.append((key, *cells))
                    elif had_batch:
                        drop_batch.append((key,))
                record = old.get(key)
                if record is None and update.plain:
                    hot_rows.append(_new_record(update))
                    continue
                row = _Row.read(key, record, [side.get(key) for side in sides])
                had = list(row.sides)
                row.apply(update)
                content = update.content
                if isinstance(content, bytes):
                    contents.append((key, content))
                    row.has_content = True
                elif content is False:
                    if row.has_content:
                        drop_content.append((key,))
                    row.has_content = False
                for n, families in enumerate(_SIDE_FAMILIES):
                    if update.touches[n]:
                        row.sides[n] = any(row.blobs[j] for j in families)
                        if row.sides[n]:
                            side_rows[n].append(row.side_record(n))
                        elif had[n]:
                            drop_sides[n].append((key,))
                if row.is_empty():
                    if update.touches_batch:
                        keep = has_batch
                    else:
                        keep = bool(read(f"SELECT 1 FROM {b} WHERE key IN ", [key]))
                    if not keep:
                        if record:
                            drop_rows.append((key,))
                        continue
                hot_rows.append(row.hot_record())
            if hot_rows:
                conn.executemany(upsert_hot, hot_rows)
            for sql, rows in zip(upsert_sides, side_rows, strict=True):
                if rows:
                    conn.executemany(sql, rows)
            if batch_rows:
                conn.executemany(upsert_batch, batch_rows)
            for places, rows in marks.items():
                names = [_BATCH_NAMES[j] for j in places]
                conn.executemany(
                    f"INSERT INTO {b} (key, {', '.join(names)})"
                    f" VALUES ({', '.join('?' * (1 + len(names)))}) ON CONFLICT (key) DO UPDATE SET "
                    + ", ".join(f"{n} = excluded.{n}" for n in names),
                    rows,
                )
            if contents:
                conn.executemany(
                    f"INSERT INTO {c} (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    contents,
                )
            for table, keys in (
                (c, drop_content),
                *zip(self._sides, drop_sides, strict=True),
                (b, drop_batch),
                (t, drop_rows),
            ):
                if keys:
                    conn.executemany(f"DELETE FROM {table} WHERE key = ?", keys)

    # --- plumbing ------------------------------------------------------------------------------

    def _error(self, exc: sqlite3.Error, doing: str = "") -> StoreError:
        """The error to raise for *exc*: :exc:`TableMissing` when the table is not there."""
        if isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc):
            return self._missing()
        if _is_corrupt(exc):
            return self._corrupt(str(exc))
        return StoreError(f"{self}: {doing}{exc}")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, args)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _transaction(self, work: Callable[[], T]) -> T:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: cannot start a write: {exc}") from exc
        try:
            result = work()
            conn.execute("COMMIT")
        except BaseException as exc:
            # SQLite may have rolled back already (a full disk, an I/O error): a ROLLBACK then
            # fails, and must not hide why the write failed.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc, "write failed: ") from exc
            raise
        interval = self._checkpoint_interval
        if interval is not None and time.monotonic() - self._checkpointed >= interval:
            self._start_checkpoint()
        return result


#: Connections of this process open on each file (by real path), for
#: :meth:`EmbeddedStore._connect`.
_OPEN: collections.Counter[str] = collections.Counter()
_OPEN_LOCK = threading.Lock()

#: How long (s) after its last change an empty file may still be a table being created.
_NEW_FILE_SECONDS = 10.0
#: SQLite's result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_CORRUPT_CODES = frozenset({11, 26})


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """Whether *exc* says the file is damaged (rather than busy, full, or unreachable)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _CORRUPT_CODES
    return "malformed" in str(exc) or "not a database" in str(exc)


def _group(puts: Cells) -> dict[bytes, Cells]:
    """*puts* split by family.

    A few cells are grouped one by one. For many, sorting the columns (in C) and cutting the
    sorted list where each family ends costs far less than looking at every column in Python.
    """
    groups: dict[bytes, Cells] = {}
    if len(puts) <= 16:
        for column, value in puts.items():
            family = column[: column.find(b":")]
            group = groups.get(family)
            if group is None:
                groups[family] = {column: value}
            else:
                group[column] = value
        return groups
    columns = sorted(puts)
    get = puts.__getitem__
    i, n = 0, len(columns)
    while i < n:
        first = columns[i]
        family = first[: first.find(b":")]
        # the family's columns are those from ``family:`` up to ``family;`` (';' follows ':')
        end = bisect_left(columns, family + b";", i + 1)
        part = columns[i:end]
        group = groups.get(family)
        if group is None:
            groups[family] = dict(zip(part, map(get, part), strict=True))
        else:
            group.update(zip(part, map(get, part), strict=True))
        i = end
    return groups


def _changes(updates: Sequence[RowUpdate]) -> list[_Change]:
    """The changes of *updates*. Updates that share one ``puts`` mapping and delete nothing
    (inject's new rows, copied from one template) share the work of sorting out their cells."""
    changes: list[_Change] = []
    shared: dict[int, _Change] = {}
    for update in updates:
        if update.deletes or update.replace:
            changes.append(_Change(update))
            continue
        model = shared.get(id(update.puts))
        if model is None:
            model = shared[id(update.puts)] = _Change(update)
            changes.append(model)
            continue
        if model.plain and model.record is None:
            model.record = _new_record(model)[1:]
        changes.append(model.for_key(update.key))
    return changes


class _Change:
    """A row update with its cells grouped by family, the content and the batch cells apart."""

    __slots__ = (
        "batch_deletes",
        "batch_puts",
        "content",
        "deletes",
        "families",
        "key",
        "only_batch",
        "plain",
        "puts",
        "record",
        "replace",
        "touches",
        "touches_batch",
    )

    #: The main record of a new row without its key, when known (see :func:`_changes`).
    record: tuple[Any, ...] | None

    def __init__(self, update: RowUpdate) -> None:
        self.key = update.key
        self.record = None
        self.replace = update.replace
        #: bytes when the content is put, False when deleted, None when untouched
        self.content: bytes | bool | None = False if b"f" in update.replace else None
        raw = update.puts
        #: batch cells put and deleted, by their place in the batch record
        self.batch_puts: dict[int, bytes] = {}
        self.batch_deletes: list[int] = []
        if not (update.deletes or update.replace) and raw.keys() <= _BATCH_KEYS:
            # batch cells alone (generate's marks): nothing else to sort out
            self.batch_puts = {_BATCH_INDEX[c]: v for c, v in raw.items()}
            self.puts: dict[bytes, Cells] = {}
            self.deletes: dict[bytes, list[bytes]] = {}
            self.families: set[bytes] = set()
            self.touches = _NO_SIDES
            self.touches_batch = self.only_batch = bool(raw)
            self.plain = False
            return
        puts = _group(raw)
        # the batch cells are taken out of their families' groups (a copy of *raw* without
        # them would cost a pass over every cell)
        for column, (i, family) in _BATCH_PLACES.items():
            group = puts.get(family)
            if group is not None and column in group:
                self.batch_puts[i] = group.pop(column)
                if not group:
                    del puts[family]
        deletes: dict[bytes, list[bytes]] = {}
        for column in update.deletes:
            place = _BATCH_INDEX.get(column)
            if place is None:
                deletes.setdefault(column[: column.find(b":")], []).append(column)
            else:
                self.batch_deletes.append(place)
        f = puts.get(b"f")
        if f is not None and CONTENT_COLUMN in f:
            self.content = f.pop(CONTENT_COLUMN)
            if not f:
                del puts[b"f"]
        if CONTENT_COLUMN in deletes.get(b"f", ()):
            self.content = False
        self.puts = puts
        self.deletes = deletes
        self.families = set(puts) | set(deletes) | set(update.replace)
        touched = {_SIDE_BY_FAMILY.get(family) for family in self.families}
        #: whether the change touches the families of each side record
        self.touches = tuple(n in touched for n in range(len(_SIDES)))
        self.touches_batch = bool(
            self.batch_puts or self.batch_deletes or not _BATCH_FAMILIES.isdisjoint(self.replace)
        )
        # Puts of batch cells alone skip the main record; a delete goes the long way, which
        # drops the row's main record if nothing is left of the row.
        self.only_batch = bool(self.batch_puts) and not (
            self.families or self.batch_deletes or self.content is not None
        )
        #: cells of the main record put, and nothing else changed
        self.plain = (
            bool(puts)
            and not (deletes or self.replace or any(self.touches) or self.touches_batch)
            and self.content is None
        )

    def for_key(self, key: bytes) -> _Change:
        """The same change on the row *key*; the two share their cells, which no write
        modifies."""
        clone = _Change.__new__(_Change)
        clone.key = key
        clone.record = self.record
        clone.replace = self.replace
        clone.content = self.content
        clone.batch_puts = self.batch_puts
        clone.batch_deletes = self.batch_deletes
        clone.puts = self.puts
        clone.deletes = self.deletes
        clone.families = self.families
        clone.touches = self.touches
        clone.touches_batch = self.touches_batch
        clone.only_batch = self.only_batch
        clone.plain = self.plain
        return clone

    def apply_batch(self, cells: list[bytes | None]) -> None:
        """Apply this change to the cells of the row's batch record."""
        for family in self.replace:
            if family in _BATCH_FAMILIES:
                for i, column in enumerate(_BATCH):
                    if column.startswith(family + b":"):
                        cells[i] = None
        for i, value in self.batch_puts.items():
            cells[i] = value
        for i in self.batch_deletes:
            cells[i] = None


def _new_record(change: _Change) -> tuple[Any, ...]:
    """The main record of a row that did not exist, from a :attr:`_Change.plain` change: the
    record :class:`_Row` would build, without its bookkeeping (inject writes many of them)."""
    if change.record is not None:
        return (change.key, *change.record)
    puts = change.puts
    copies = []
    for column in _COPIES:
        cells = puts.get(column[: column.find(b":")])
        copies.append(None if cells is None else cells.get(column))
    raw = copies[0]
    fetch_time = int.from_bytes(raw, "big", signed=True) if raw and len(raw) == 8 else 0
    mk = puts.get(b"mk")
    marks = [None if mk is None else mk.get(b"mk:" + name) for name in _MARKER_COLUMNS]
    blobs = [puts.get(FAMILIES[j]) for j in _HOT]
    return (
        change.key,
        fetch_time,
        *copies,
        *marks,
        *(0 for _ in _SIDES),
        0,
        *[_dumps(cells) if cells else None for cells in blobs],
    )


#: Where the columns of a main record start: key, fetch time, copies, markers, flags (one per
#: side record, then the content's), families.
_M_COPIES = 2
_M_MARKS = _M_COPIES + len(_COPIES)
_M_SIDES = _M_MARKS + len(_MARKER_COLUMNS)
_M_CONTENT = _M_SIDES + len(_SIDES)
_M_FAMILIES = _M_CONTENT + 1
_NO_SIDES = (False,) * len(_SIDES)


class _Row:
    """One row while a write changes it. Family blobs are decoded only when the write touches
    their family; a side record's families are known only when the write touches one. The
    batch record is handled apart (:meth:`_Change.apply_batch`)."""

    __slots__ = ("blobs", "copies", "fetch_time", "has_content", "key", "marks", "sides")

    def __init__(
        self,
        key: bytes,
        fetch_time: int,
        copies: list[bytes | None],
        marks: list[bytes | None],
        blobs: list[bytes | Cells | None],
        sides: list[bool],
        has_content: bool,
    ) -> None:
        self.key = key
        self.fetch_time = fetch_time
        self.copies = copies
        self.marks = marks
        self.blobs = blobs
        #: whether the row has each side record
        self.sides = sides
        self.has_content = has_content

    @classmethod
    def read(
        cls, key: bytes, hot: Sequence[Any] | None, sides: Sequence[Sequence[Any] | None]
    ) -> _Row:
        """The row of main record *hot* (``None`` for a new row) and side records *sides*
        (``None`` for one not read)."""
        blobs: list[bytes | Cells | None] = [None] * len(FAMILIES)
        if hot is None:
            return cls(
                key,
                0,
                [None] * len(_COPIES),
                [None] * len(_MARKER_COLUMNS),
                blobs,
                list(_NO_SIDES),
                False,
            )
        for j, blob in zip(_HOT, hot[_M_FAMILIES:], strict=True):
            blobs[j] = blob
        for families, side in zip(_SIDE_FAMILIES, sides, strict=True):
            if side is not None:
                for j, blob in zip(families, side, strict=True):
                    blobs[j] = blob
        return cls(
            key,
            hot[1],
            list(hot[_M_COPIES:_M_MARKS]),
            list(hot[_M_MARKS:_M_SIDES]),
            blobs,
            [bool(flag) for flag in hot[_M_SIDES:_M_CONTENT]],
            bool(hot[_M_CONTENT]),
        )

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
        """Apply *change* to the families it touches (not to the content or batch cells)."""
        for family in change.replace:
            self.blobs[_FAMILY_INDEX[family]] = {}
        for family, cells in change.puts.items():
            self._family(_FAMILY_INDEX[family]).update(cells)
        for family, columns in change.deletes.items():
            cells = self._family(_FAMILY_INDEX[family])
            for column in columns:
                cells.pop(column, None)
        blobs, copies = self.blobs, self.copies
        for n, column, index in _COPY_PLACES:
            blob = blobs[index]
            if type(blob) is dict:
                copies[n] = blob.get(column)
        if type(blobs[0]) is dict:
            raw = copies[0]
            self.fetch_time = (
                int.from_bytes(raw, "big", signed=True) if raw and len(raw) == 8 else 0
            )
        mk = blobs[_MK]
        if type(mk) is dict:
            self.marks = [mk.get(column) for column in _MARKER_CELLS]

    def is_empty(self) -> bool:
        """Whether the row has no cell outside its batch record."""
        return not (self.has_content or any(self.sides) or any(self.blobs[j] for j in _HOT))

    def _encoded(self, indexes: list[int]) -> list[bytes | None]:
        blobs = self.blobs
        return [
            (_dumps(b) if b else None) if isinstance(b, dict) else b
            for b in [blobs[j] for j in indexes]
        ]

    def hot_record(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.fetch_time,
            *self.copies,
            *self.marks,
            *map(int, self.sides),
            int(self.has_content),
            *self._encoded(_HOT),
        )

    def side_record(self, n: int) -> tuple[Any, ...]:
        return (self.key, *self._encoded(_SIDE_FAMILIES[n]))


class _Reader:
    """Turns selected records into cells, decoding only the families a read asks for.

    *extra* columns are read for a test in Python and dropped from the result unless asked.
    A record is ``key, fetch_time, id, content, <batch cells>, <family records>``.
    """

    def __init__(self, columns: Sequence[bytes] | None, extra: Sequence[bytes] = ()) -> None:
        if columns is None:
            self.families = list(range(len(FAMILIES)))
            self.content = True
            self.drop: set[bytes] = set()
            self.batch: tuple[bytes, ...] = _BATCH
            self.picks: list[frozenset[bytes] | None] = [None] * len(FAMILIES)
            return
        wanted = set(columns)
        whole = {c for c in wanted if b":" not in c}
        exact = {c for c in wanted if b":" in c and c.partition(b":")[0] not in whole}
        asked = wanted | set(extra)
        self.batch = tuple(c for c in _BATCH if c in asked or c[: c.find(b":")] in whole)
        # A column of a family the table lacks reads as missing, as in HBase.
        needed = {c.partition(b":")[0] for c in asked if c not in _BATCH_INDEX}
        self.families = sorted(_FAMILY_INDEX[f] for f in needed if f in _FAMILY_INDEX)
        self.content = CONTENT_COLUMN in wanted or b"f" in wanted
        self.drop = {c for c in extra if c not in wanted and c.partition(b":")[0] not in whole}
        # Of each family read, the columns kept (``None``: all of them). Only the families of
        # single columns are looked through: the cells of a family asked whole (a page's links:
        # tens of cells) are taken as they come.
        picked = exact | self.drop
        self.picks = [
            None
            if FAMILIES[i] in whole
            else frozenset(c for c in picked if c.startswith(FAMILIES[i] + b":"))
            for i in self.families
        ]

    def select(
        self,
        table: str,
        side_tables: Sequence[str],
        content_table: str,
        batch_table: str,
        *,
        by_batch: bool = False,
    ) -> str:
        """The ``SELECT … FROM`` of a read; with *by_batch*, driven by the batch records (``b``)
        rather than by the main records (``w``)."""
        cols = ["w.key", "w.fetch_time", "w.id", "c.value" if self.content else "NULL"]
        cols += [f"b.{_BATCH_NAMES[_BATCH_INDEX[c]]}" for c in self.batch]
        cols += [
            f"{_SIDES[_SIDE_OF[i]][2] if i in _SIDE_OF else 'w'}.{_quote(_FAMILY_COLUMNS[i])}"
            for i in self.families
        ]
        if by_batch:  # CROSS JOIN: SQLite keeps this order, from the batch index
            source = f"{batch_table} AS b CROSS JOIN {table} AS w ON w.key = b.key"
        elif self.batch:
            source = f"{table} AS w LEFT JOIN {batch_table} AS b ON b.key = w.key"
        else:
            source = f"{table} AS w"
        for n in sorted({_SIDE_OF[i] for i in self.families if i in _SIDE_OF}):
            alias = _SIDES[n][2]
            source += f" LEFT JOIN {side_tables[n]} AS {alias} ON {alias}.key = w.key"
        if self.content:
            source += f" LEFT JOIN {content_table} AS c ON c.key = w.key"
        return f"SELECT {', '.join(cols)} FROM {source}"

    def rows(
        self, records: Iterable[Sequence[Any]], marker: tuple[bytes, bytes] | None = None
    ) -> Iterator[tuple[bytes, Cells]]:
        drop = self.drop
        test = marker and (b"mk:" + marker[0], marker[1])
        batch = self.batch
        first = 4 + len(batch)
        picks = self.picks
        for record in records:
            cells: Cells | None = None
            for blob, pick in zip(record[first:], picks, strict=True):
                if blob is None:
                    continue
                found = _loads(blob, record[0])
                if pick is not None:  # single columns of the family, in the record's order
                    found = {c: v for c, v in found.items() if c in pick}
                if cells is None:  # the first record's dict is new: it becomes the row's
                    cells = found
                else:
                    cells.update(found)
            if cells is None:
                cells = {}
            if batch:
                for column, value in zip(batch, record[4:first], strict=True):
                    if value is not None:
                        cells[column] = value
            if record[3] is not None:
                cells[CONTENT_COLUMN] = record[3]
            if test and cells.get(test[0]) != test[1]:
                continue
            for column in drop:
                cells.pop(column, None)
            if cells:
                yield record[0], cells
