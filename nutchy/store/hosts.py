"""What the processes of a crawl remember of each host, beside the web table.

Politeness is owed to a host whatever process asks it for a page: the next round's fetch (a new
process under ``nutchy crawl``), another fetcher of the same batch (``-numFetchers``), another
worker of a shared batch (the Redis frontier), a scrapyd job. Two things are kept for that, in
:class:`HostMemory`:

- **robots.txt answers** (:class:`RobotsRecord`, by ``scheme://host:port``): the status and body
  fetched and when, so that a host's robots.txt is fetched once a day at most (RFC 9309 §2.4: a
  cached answer may be used for up to 24 hours) rather than once per process;
- **the last request to each fetch queue** (:class:`Visit`, by queue id): when it ended and the
  delay then owed, so that the first request of the next process waits for that delay too.

Two backends, one per store, chosen by :func:`open_host_memory`:

- the embedded store: a small SQLite file of its own beside the table's,
  ``<crawl dir>/<table>.hosts.sqlite`` (WAL mode, so several processes of the machine share it);
- HBase: rows of the nutchy side table ``<table>_nutchy`` that the store's leases live in
  (:mod:`nutchy.store.hbase_lease`), ``robots:<origin>`` (column ``l:r``) and ``visit:<queue>``
  (column ``l:v``), so that nothing Nutch reads changes.

Every call blocks: Scrapy components call them in threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from nutchy.exceptions import StoreError, StoreUnavailable

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.store.base import Store

__all__ = [
    "EmbeddedHostMemory",
    "HBaseHostMemory",
    "HostMemory",
    "RobotsRecord",
    "Visit",
    "host_memory_path",
    "open_host_memory",
]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """A robots.txt answer: its HTTP *status*, its *body*, and when it was *fetched* (ms since
    the epoch)."""

    fetched: int
    status: int
    body: bytes = b""

    def encode(self) -> bytes:
        """
        >>> RobotsRecord.decode(RobotsRecord(1700000000000, 200, b"a\\nb").encode())
        RobotsRecord(fetched=1700000000000, status=200, body=b'a\\nb')
        """
        return b"%d %d\n" % (self.fetched, self.status) + self.body

    @classmethod
    def decode(cls, value: bytes) -> RobotsRecord | None:
        """The record *value* holds; ``None`` for one that does not decode."""
        head, _, body = value.partition(b"\n")
        try:
            fetched, status = (int(part) for part in head.split(b" "))
        except ValueError:
            return None
        return cls(fetched, status, body)


@dataclass(frozen=True, slots=True)
class Visit:
    """The last request to a fetch queue: when it ended (*at*, ms since the epoch) and the
    *delay* (s) owed to the queue after it."""

    at: int
    delay: float

    def encode(self) -> bytes:
        """
        >>> Visit.decode(Visit(1700000000000, 2.5).encode())
        Visit(at=1700000000000, delay=2.5)
        """
        return b"%d %d" % (self.at, round(self.delay * 1000))

    @classmethod
    def decode(cls, value: bytes) -> Visit | None:
        try:
            at, delay = (int(part) for part in value.split(b" "))
        except ValueError:
            return None
        return cls(at, delay / 1000)

    def ready_at(self) -> int:
        """When the queue's next request may start, in ms since the epoch."""
        return self.at + round(self.delay * 1000)


class HostMemory(Protocol):
    """Robots.txt answers and last requests, shared by the processes of a crawl (see the module
    docstring). Reads of what was never written give nothing; a record that does not decode is
    left out."""

    def robots(self, origins: Sequence[str]) -> dict[str, RobotsRecord]: ...

    def keep_robots(self, records: Mapping[str, RobotsRecord]) -> None: ...

    def visits(self, queues: Sequence[str]) -> dict[str, Visit]: ...

    def keep_visits(self, visits: Mapping[str, Visit]) -> None:
        """Record *visits*; a queue keeps the later of the visit stored and the one given."""
        ...

    def close(self) -> None: ...


# --- the embedded store: a SQLite file beside the table's ----------------------------------------

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS robots (origin TEXT PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS visits (queue TEXT PRIMARY KEY, at INTEGER, value BLOB)",
)


class EmbeddedHostMemory:
    """:class:`HostMemory` in the SQLite file *path* (created with the first write; reads of a
    file not there yet find nothing). *busy_timeout* (s) is how long a write waits for another
    process's."""

    def __init__(self, path: str | Path, busy_timeout: float = 60.0) -> None:
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"EmbeddedHostMemory({str(self.path)!r})"

    def _connection(self, *, create: bool) -> sqlite3.Connection | None:
        if self._conn is None:
            if not create and not self.path.exists():
                return None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path,
                    timeout=self._busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                for statement in _SCHEMA:
                    conn.execute(statement)
            except (OSError, sqlite3.Error) as exc:
                raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
            self._conn = conn
        return self._conn

    def _read(self, sql: str, keys: Sequence[str]) -> list[tuple[str, bytes]]:
        if not keys:
            return []
        with self._lock:
            conn = self._connection(create=False)
            if conn is None:
                return []
            found: list[tuple[str, bytes]] = []
            try:
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    found += conn.execute(sql.format(marks), chunk).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from exc
            return found

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        if not rows:
            return
        with self._lock:
            conn = self._connection(create=True)
            assert conn is not None
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write {self.path}: {exc}") from exc

    def robots(self, origins: Sequence[str]) -> dict[str, RobotsRecord]:
        rows = self._read("SELECT origin, value FROM robots WHERE origin IN ({})", origins)
        return _decoded(rows, RobotsRecord.decode)

    def keep_robots(self, records: Mapping[str, RobotsRecord]) -> None:
        self._write(
            "INSERT OR REPLACE INTO robots (origin, value) VALUES (?, ?)",
            [(origin, record.encode()) for origin, record in records.items()],
        )

    def visits(self, queues: Sequence[str]) -> dict[str, Visit]:
        rows = self._read("SELECT queue, value FROM visits WHERE queue IN ({})", queues)
        return _decoded(rows, Visit.decode)

    def keep_visits(self, visits: Mapping[str, Visit]) -> None:
        self._write(
            "INSERT INTO visits (queue, at, value) VALUES (?, ?, ?) ON CONFLICT (queue) DO"
            " UPDATE SET at = excluded.at, value = excluded.value WHERE excluded.at > visits.at",
            [(queue, visit.at, visit.encode()) for queue, visit in visits.items()],
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# --- HBase: rows of the side table ---------------------------------------------------------------

_ROBOTS_COLUMN: Final = b"l:r"
_VISIT_COLUMN: Final = b"l:v"


class HBaseHostMemory:
    """:class:`HostMemory` in the side table of an HBase store: *side* runs ``work(table)`` on
    the side table (a happybase ``Table``), creating it when missing
    (:meth:`nutchy.store.hbase.HBaseStore.side`). *close* is called by :meth:`close` (the store
    it was opened with, when this owns it).

    Two processes that record a visit of one queue at once both write; the last write stays.
    They do not happen: a queue is fetched by one process at a time (one partition, or one lease
    of the Redis frontier).
    """

    def __init__(
        self, side: Callable[[Callable[[Any], Any]], Any], close: Callable[[], None] | None = None
    ) -> None:
        self._side = side
        self._close = close

    def _get(self, prefix: bytes, column: bytes, keys: Sequence[str]) -> list[tuple[str, bytes]]:
        if not keys:
            return []
        names = [prefix + key.encode("utf-8") for key in keys]

        def work(table: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
            return list(table.rows(names, columns=[column]))

        return [
            (row[len(prefix) :].decode("utf-8"), cells[column])
            for row, cells in self._side(work)
            if column in cells
        ]

    def _put(self, prefix: bytes, column: bytes, values: Mapping[str, bytes]) -> None:
        if not values:
            return

        def work(table: Any) -> None:
            with table.batch() as batch:
                for key, value in values.items():
                    batch.put(prefix + key.encode("utf-8"), {column: value})

        self._side(work)

    def robots(self, origins: Sequence[str]) -> dict[str, RobotsRecord]:
        return _decoded(self._get(b"robots:", _ROBOTS_COLUMN, origins), RobotsRecord.decode)

    def keep_robots(self, records: Mapping[str, RobotsRecord]) -> None:
        self._put(b"robots:", _ROBOTS_COLUMN, {k: r.encode() for k, r in records.items()})

    def visits(self, queues: Sequence[str]) -> dict[str, Visit]:
        return _decoded(self._get(b"visit:", _VISIT_COLUMN, queues), Visit.decode)

    def keep_visits(self, visits: Mapping[str, Visit]) -> None:
        self._put(b"visit:", _VISIT_COLUMN, {k: v.encode() for k, v in visits.items()})

    def close(self) -> None:
        if self._close is not None:
            self._close()


def _decoded(
    rows: Sequence[tuple[str, bytes]], decode: Callable[[bytes], _T | None]
) -> dict[str, _T]:
    found: dict[str, _T] = {}
    for key, value in rows:
        record = decode(value)
        if record is not None:
            found[key] = record
    return found


# --- opening -------------------------------------------------------------------------------------


def host_memory_path(store_path: Path, table_name: str) -> Path:
    """The embedded host memory's file beside the table's file *store_path*.

    >>> host_memory_path(Path("crawl/webpage.sqlite"), "webpage").as_posix()
    'crawl/webpage.hosts.sqlite'
    """
    return store_path.with_name(f"{table_name}.hosts.sqlite")


def open_host_memory(store: Store, *, owns: bool = False) -> HostMemory:
    """The host memory beside *store*'s table; with *owns*, closing it closes *store*."""
    from nutchy.store.embedded import EmbeddedStore

    if isinstance(store, EmbeddedStore):
        memory = EmbeddedHostMemory(host_memory_path(store.path, store.table_name))
        if owns:
            store.close()
        return memory
    from nutchy.store.hbase import HBaseStore

    if isinstance(store, HBaseStore):
        return HBaseHostMemory(store.side, store.close if owns else None)
    raise TypeError(f"no host memory for {store!r}")


def open_host_memory_from_settings(settings: BaseSettings) -> HostMemory:
    """The host memory of the table the settings name, opened on its own (the embedded one
    without opening the table)."""
    from nutchy.store import _ALIASES, EMBEDDED, open_store, table_name

    backend = settings.get("NUTCH_STORAGE_DATA_STORE_CLASS")
    if _ALIASES.get(backend, backend) == EMBEDDED:
        from nutchy.config import crawl_dir

        name = table_name(settings)
        return EmbeddedHostMemory(host_memory_path(crawl_dir(settings) / f"{name}.sqlite", name))
    return open_host_memory(open_store(settings), owns=True)
