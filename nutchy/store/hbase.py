"""The HBase store: the web table in HBase, through happybase and an HBase Thrift1 server.

The table is the one Nutch 2.x uses (``webpage`` or ``<crawlId>_webpage``, families ``f p s il ol
h mtdt mk stm`` with one version each), with the cells of :mod:`nutchy.store.schema`, so Nutch and
nutchy can work on the same table.

How the contract maps onto HBase:

- every call leases a connection from a ``happybase.ConnectionPool`` and gives it back before
  returning; scans read one page per lease, so a slow consumer never holds a connection or a
  server-side scanner;
- the batch-marker condition is the server-side filter Nutch itself uses,
  ``SingleColumnValueFilter('mk','<marker>',=,'binary:<batch>',true,true)``; the due condition is
  ``SingleColumnValueFilter('f','ts',<=,'binary:<8-byte fetch time>',false,true)``, which lets rows
  without ``f:ts`` through, because a missing fetch time reads as 0 and is due. Big-endian longs of
  non-negative times compare correctly as unsigned bytes;
- a family replacement is a family delete stamped one millisecond before the puts that refill it
  (an HBase delete masks puts of the same timestamp, and ``mutateRows`` applies puts before
  deletes), so the new cells always win and entries not written are gone;
- :meth:`HBaseStore.splits` returns the table's regions, for region-parallel scans;
- :meth:`HBaseStore.modify` locks each row with a ``checkAndPut`` on the nutchy-only cell
  ``mk:_nlk_`` (empty when free, the holder's token while held), reads, writes and unlocks it.
  Rows are locked in key order, so two writers never wait on each other in a circle; a lock
  older than :attr:`HBaseStore.lock_lease` ms (its holder died) is taken over. The cell never
  appears in what the store returns.

HBase applies each row's mutations atomically, not a whole :meth:`HBaseStore.write` call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store.base import Scan, key_range
from nutchy.store.schema import FAMILIES, FETCH_TIME_COLUMN, Cells, RowUpdate, coalesce

try:
    import happybase
    from Hbase_thrift import Mutation  # type: ignore[import-not-found]  # made by happybase
    from thriftpy2.thrift import TException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("nutchy's HBase store needs happybase: pip install 'nutchy[hbase]'") from exc

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")


def quote_filter_value(value: bytes) -> bytes:
    """Quote *value* for HBase's filter language: single quotes, with ``'`` doubled.

    >>> quote_filter_value(b"it's")
    b"'it''s'"
    """
    return b"'" + value.replace(b"'", b"''") + b"'"


def marker_filter(marker: bytes, value: bytes) -> bytes:
    """The filter keeping rows whose ``mk:<marker>`` equals *value* (rows without it are dropped).

    >>> marker_filter(b"_gnmrk_", b"1700000000-1")
    b"SingleColumnValueFilter('mk','_gnmrk_',=,'binary:1700000000-1',true,true)"
    """
    return (
        b"SingleColumnValueFilter('mk',"
        + quote_filter_value(marker)
        + b",=,"
        + quote_filter_value(b"binary:" + value)
        + b",true,true)"
    )


def due_filter(due_before: int) -> bytes:
    """The filter keeping rows with ``f:ts`` <= *due_before*, and rows without ``f:ts``.

    >>> due_filter(1500000000000)
    b"SingleColumnValueFilter('f','ts',<=,'binary:\\x00\\x00\\x01]>\\xf7\\x98\\x00',false,true)"
    """
    value = max(due_before, 0).to_bytes(8, "big", signed=True)
    return (
        b"SingleColumnValueFilter('f','ts',<=,"
        + quote_filter_value(b"binary:" + value)
        + b",false,true)"
    )


#: The cells :meth:`HBaseStore.insert_new` reads to tell whether a row is in the table.
_PRESENCE_COLUMNS: Final = (FETCH_TIME_COLUMN, b"mk")
#: The cell :meth:`HBaseStore.modify` locks a row with (nutchy only; hidden from reads).
LOCK_COLUMN = b"mk:_nlk_"
_FREE = b""


def _lock_token(now_ms: int) -> bytes:
    """A lock holder's token: when it was taken, and by whom (host, process, random).

    >>> _lock_token(1700000000000).split(b" ")[0]
    b'1700000000000'
    """
    who = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    return f"{now_ms} {who}".encode()


def _token_time(token: bytes) -> int | None:
    """When the lock *token* was taken (ms), or ``None`` if it is not a token.

    >>> _token_time(b"1700000000000 host:1:ab"), _token_time(b"junk")
    (1700000000000, None)
    """
    try:
        return int(token.split(b" ", 1)[0])
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    """The message of a Thrift or socket error (HBase's IOError carries bytes)."""
    message = getattr(exc, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if not message:
        try:
            message = str(exc)
        except TypeError:
            message = repr(exc)
    return f"{type(exc).__name__}: {message}"


class _Clock:
    """Write timestamps of this process: the wall clock in ms, but always at least 2 ms after
    the last one given, whichever store asked for it."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self, after: int = 0) -> int:
        with self._lock:
            ts = max(int(time.time() * 1000), self._last + 2, after + 2)
            self._last = ts
            return ts


_CLOCK = _Clock()


class HBaseStore:
    """The web table in HBase, reached through the Thrift1 server at *host*:*port*.

    *crawl_id* prefixes the table name as Nutch's ``storage.crawl.id`` does. *timeout* is the
    socket timeout in milliseconds, for connecting and for every call. *pool_size* connections are
    shared by the threads that use the store. *batch_size* caps the rows sent in one
    ``mutateRows`` call. :meth:`modify` waits at most *lock_timeout* ms for a row another
    writer has locked, and takes over a lock older than *lock_lease* ms.
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 9090,
        *,
        crawl_id: str = "",
        table: str = "webpage",
        timeout: int = 10000,
        pool_size: int = 4,
        batch_size: int = 1000,
        transport: str = "buffered",
        protocol: str = "binary",
        lock_timeout: int = 120_000,
        lock_lease: int = 60_000,
    ) -> None:
        self.host = host
        self.lock_timeout = lock_timeout
        self.lock_lease = lock_lease
        self.port = port
        self.timeout = timeout
        self.batch_size = batch_size
        self.table_name = f"{crawl_id}_{table}" if crawl_id else table
        self._short_name = table
        self._pool_size = pool_size
        self._probe()
        self._pool = happybase.ConnectionPool(
            size=pool_size,
            host=host,
            port=port,
            timeout=timeout,
            transport=transport,
            protocol=protocol,
            table_prefix=crawl_id or None,
            autoconnect=False,
        )

    def __repr__(self) -> str:
        return f"HBaseStore({self.host}:{self.port}, table_name={self.table_name!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _probe(self) -> None:
        """Fail fast, within the timeout, when nothing listens at host:port."""
        try:
            socket.create_connection((self.host, self.port), timeout=self.timeout / 1000).close()
        except OSError as exc:
            raise StoreUnavailable(
                f"the HBase Thrift server at {self.host}:{self.port} cannot be reached"
                f" (timeout {self.timeout} ms): {exc}"
            ) from exc

    def _call(self, work: Callable[[Any], T]) -> T:
        """Run *work(connection)* on a pooled connection, turning Thrift errors into ours."""
        try:
            with self._pool.connection(timeout=self.timeout / 1000) as conn:
                try:
                    conn.open()
                    return work(conn)
                except (TException, OSError):
                    conn.close()  # the pool gives it a new socket; close the broken one
                    raise
        except (TException, OSError) as exc:
            text = _describe(exc)
            if "TableNotFound" in text or "table does not exist" in text.lower():
                raise TableMissing(
                    f"table {self.table_name!r} does not exist on {self.host}:{self.port};"
                    " run 'nutchy storage init' or 'nutchy inject'"
                ) from exc
            if isinstance(exc, OSError) or "TSocket" in text or "connect" in text.lower():
                raise StoreUnavailable(
                    f"the HBase Thrift server at {self.host}:{self.port} failed: {text}"
                ) from exc
            raise StoreError(f"{self}: {text}") from exc
        except happybase.NoConnectionsAvailable as exc:
            raise StoreUnavailable(
                f"no connection to {self.host}:{self.port} became free within {self.timeout} ms"
            ) from exc

    # --- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        return self._call(lambda conn: self._short_name.encode() in conn.tables())

    def create(self) -> bool:
        if self.exists():
            return False
        families = {family.decode(): {"max_versions": 1} for family in FAMILIES}
        self._call(lambda conn: conn.create_table(self._short_name, families))
        logger.info("Created HBase table %s on %s:%s", self.table_name, self.host, self.port)
        return True

    def drop(self) -> None:
        if self.exists():
            self._call(lambda conn: conn.delete_table(self._short_name, disable=True))

    def close(self) -> None:
        """Close every pooled connection (happybase pools have no close of their own). Closing a
        store whose server has gone away does not fail."""
        with contextlib.suppress(TException, OSError), contextlib.ExitStack() as stack:
            for _ in range(self._pool_size):
                try:
                    conn = stack.enter_context(self._pool.connection(timeout=self.timeout / 1000))
                except happybase.NoConnectionsAvailable:
                    break
                conn.close()

    def checkpoint(self) -> None:
        """Nothing to do: HBase makes each write durable (its WAL) before answering it."""

    def splits(self) -> list[tuple[bytes, bytes | None]]:
        regions = self._call(lambda conn: conn.table(self._short_name).regions())
        if not regions:
            return [(b"", None)]
        return [
            (region["start_key"], region["end_key"] or None)
            for region in sorted(regions, key=lambda r: r["start_key"])
        ]

    # --- reads ---------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> Cells | None:
        cells = self._call(lambda conn: conn.table(self._short_name).row(key, columns=columns))
        cells.pop(LOCK_COLUMN, None)
        return dict(cells) if cells else None

    def get_many(
        self, keys: Sequence[bytes], columns: Sequence[bytes] | None = None
    ) -> dict[bytes, Cells]:
        found: dict[bytes, Cells] = {}
        for i in range(0, len(keys), self.batch_size):
            chunk = list(keys[i : i + self.batch_size])

            def work(conn: Any, chunk: list[bytes] = chunk) -> list[tuple[bytes, Cells]]:
                rows: list[tuple[bytes, Cells]] = conn.table(self._short_name).rows(
                    chunk, columns=columns
                )
                return rows

            rows = self._call(work)
            for key, cells in rows:
                cells.pop(LOCK_COLUMN, None)
                if cells:
                    found[key] = dict(cells)
        return found

    def scan(
        self, scan: Scan | None = None, page_size: int = 1000
    ) -> Iterator[tuple[bytes, Cells]]:
        if scan is None:
            scan = Scan()
        start, stop = key_range(scan)
        filters = []
        columns = list(scan.columns) if scan.columns is not None else None
        extra: set[bytes] = set()
        if scan.marker is not None:
            filters.append(marker_filter(*scan.marker))
            extra.add(b"mk:" + scan.marker[0])
        if scan.due_before is not None:
            filters.append(due_filter(scan.due_before))
            extra.add(FETCH_TIME_COLUMN)
        if columns is not None:
            # A filter only sees the columns the scan reads: add the tested ones, drop them after.
            extra = {c for c in extra if c not in columns and c.split(b":")[0] not in columns}
            columns.extend(sorted(extra))
        else:
            extra = set()
        filter_string = b" AND ".join(filters) if filters else None
        remaining = scan.limit
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            if stop is not None and start >= stop:
                return

            def page(conn: Any, start: bytes = start, n: int = n) -> list[tuple[bytes, Cells]]:
                table = conn.table(self._short_name)
                return list(
                    table.scan(
                        row_start=start,
                        row_stop=stop,
                        columns=columns,
                        filter=filter_string,
                        batch_size=n,
                        limit=n,
                    )
                )

            rows = self._call(page)
            for key, cells in rows:
                cells.pop(LOCK_COLUMN, None)
                if extra:
                    cells = {c: v for c, v in cells.items() if c not in extra}
                if not cells:
                    continue
                yield key, cells
                if remaining is not None:
                    remaining -= 1
            if len(rows) < n:
                return
            start = rows[-1][0] + b"\x00"

    # --- writes --------------------------------------------------------------------------------

    def _next_timestamp(self, after: int = 0) -> int:
        """A write timestamp in ms, at least 2 ms after the previous one of any store of this
        process (so a family delete at ts-1 never hides cells written just before, also by a
        store opened before this one) and after *after*."""
        return _CLOCK.next(after)

    def write(self, updates: Sequence[RowUpdate]) -> None:
        self._write_merged(coalesce(updates))

    def _write_merged(self, merged: list[RowUpdate]) -> None:
        """Write *merged*, one update per row (what :func:`coalesce` gives)."""
        if not merged:
            return
        ts = self._next_timestamp()
        self._call(lambda conn: self._write(conn, merged, ts))

    def insert_new(self, updates: Sequence[RowUpdate]) -> int:
        """Write the rows of *updates* that are not in the table, and leave the rows that are
        there as they are; return how many rows were written.

        One read of the rows (their ``f:ts`` and ``mk`` cells: every row a crawl writes has a
        fetch time) tells which are missing, then those are written. A row another process
        creates between the read and the write gets these cells over its own: HBase can insert
        a row only if absent one row at a time (``checkAndPut``), a round trip per row.
        """
        merged = coalesce(updates)
        found = self.get_many([update.key for update in merged], _PRESENCE_COLUMNS)
        missing = [update for update in merged if update.key not in found]
        self._write_merged(missing)
        return len(missing)

    def _write(self, conn: Any, merged: list[RowUpdate], ts: int) -> None:
        table = conn.table(self._short_name)
        replaced = [u for u in merged if u.replace]
        if replaced:
            with table.batch(timestamp=ts - 1, batch_size=self.batch_size) as batch:
                for update in replaced:
                    batch.delete(update.key, columns=sorted(update.replace))
        with table.batch(timestamp=ts, batch_size=self.batch_size) as batch:
            for update in merged:
                if update.puts:
                    batch.put(update.key, update.puts)
                if update.deletes:
                    batch.delete(update.key, columns=sorted(update.deletes))

    def modify(
        self,
        keys: Sequence[bytes],
        columns: Sequence[bytes] | None,
        change: Callable[[bytes, Cells | None], RowUpdate | None],
    ) -> int:
        """Read *keys*, call *change* for each and write what it returns, each row locked from
        its read to its write (see the module docstring)."""
        # A row that does not exist and would stay empty is not locked: locking creates the row.
        before = self.get_many(keys, columns)
        wanted = sorted({k for k in keys if k in before or change(k, None) is not None})
        if not wanted:
            return 0

        def work(conn: Any) -> int:
            table_name = conn.table(self._short_name).name  # with the crawl id prefix
            token = _lock_token(int(time.time() * 1000))
            held: list[bytes] = []
            try:
                for key in wanted:
                    self._lock_row(conn.client, table_name, key, token)
                    held.append(key)
                table = conn.table(self._short_name)
                rows = table.rows(wanted, columns=columns, include_timestamp=True)
                newest = 0
                found: dict[bytes, Cells] = {}
                for key, cells in rows:
                    cells.pop(LOCK_COLUMN, None)
                    if cells:
                        found[key] = {c: v for c, (v, _) in cells.items()}
                        newest = max(newest, *(ts for _, ts in cells.values()))
                updates = [u for k in wanted if (u := change(k, found.get(k))) is not None]
                merged = coalesce(updates)
                if merged:
                    # After every cell read, whatever the clocks of other writers say.
                    self._write(conn, merged, self._next_timestamp(after=newest))
                return len(merged)
            finally:
                for key in held:
                    self._unlock_row(conn.client, table_name, key, token)

        return self._call(work)

    def _lock_row(self, client: Any, table: bytes, key: bytes, token: bytes) -> None:
        deadline = time.monotonic() + self.lock_timeout / 1000
        pause = 0.002
        take = Mutation(column=LOCK_COLUMN, value=token)
        while True:
            for expected in (_FREE, None):
                if client.checkAndPut(table, key, LOCK_COLUMN, expected, take, {}):
                    return
            cells = client.get(table, key, LOCK_COLUMN, {})
            holder = cells[0].value if cells else None
            if holder is None or holder == _FREE:
                continue  # freed in between: try again at once
            taken = _token_time(holder)
            now = int(time.time() * 1000)
            if taken is None or now - taken > self.lock_lease:
                if client.checkAndPut(table, key, LOCK_COLUMN, holder, take, {}):
                    logger.warning(
                        "Took over the lock of row %r from %r (older than %d ms)",
                        key,
                        holder,
                        self.lock_lease,
                    )
                    return
                continue
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{self}: row {key!r} stayed locked by {holder!r} for more than"
                    f" {self.lock_timeout} ms"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _unlock_row(self, client: Any, table: bytes, key: bytes, token: bytes) -> None:
        free = Mutation(column=LOCK_COLUMN, value=_FREE)
        if not client.checkAndPut(table, key, LOCK_COLUMN, token, free, {}):
            logger.warning("The lock of row %r was taken over before it was released", key)

    def delete_rows(self, keys: Sequence[bytes]) -> None:
        # Stamped like writes: a delete stamped earlier than a put would not remove it.
        ts = self._next_timestamp()

        def work(conn: Any) -> None:
            table = conn.table(self._short_name)
            with table.batch(timestamp=ts, batch_size=self.batch_size) as batch:
                for key in keys:
                    batch.delete(key)

        self._call(work)
