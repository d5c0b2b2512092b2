"""The HBase store: the web table in HBase, through happybase and an HBase Thrift1 server.

The table is the one Nutch 2.x uses (``webpage`` or ``<crawlId>_webpage``, families ``f p s il ol
h mtdt mk stm`` with one version each), with the cells of :mod:`nutchy.store.schema`, so Nutch and
nutchy can work on the same table.

How the contract maps onto HBase:

- every call leases a connection from the store's pool and gives it back before returning; scans
  read one page per lease, so a slow consumer never holds a connection or a server-side scanner;
- a connection the server closed while it sat in the pool (HBase's Thrift server closes one after
  60 s without a request) is noticed before it is used and replaced. A call that fails on the
  transport (a reset, a timeout, a closed socket) is sent once more on a new connection when sending
  it twice does the same as once: reads, and writes and deletes with the explicit timestamps every
  write of this store carries. Increments are never sent twice, nor is a ``checkAndPut`` but a
  lease's, whose value is unique: a second call that finds it in place knows the first one
  was applied (:mod:`nutchy.store.hbase_lease`);
- errors are told apart by their Thrift types: transport and socket errors are
  :class:`~nutchy.exceptions.StoreUnavailable`, HBase's ``IOError`` for a
  ``TableNotFoundException`` is :class:`~nutchy.exceptions.TableMissing`, anything else HBase
  answers (``IOError``, ``IllegalArgument``, ``TApplicationException``) is
  :class:`~nutchy.exceptions.StoreError`;
- a write is cut into ``mutateRowsTs`` calls of at most *batch_size* rows and *batch_bytes* bytes
  (a row larger than that goes alone), so no call outgrows the 2 MB frames a framed Thrift server
  accepts;
- the batch-marker condition is the server-side filter Nutch itself uses,
  ``SingleColumnValueFilter('mk','<marker>',=,'binary:<batch>',true,true)``; the due condition is
  ``SingleColumnValueFilter('f','ts',<=,'binary:<8-byte fetch time>',false,true)``, which lets rows
  without ``f:ts`` through, because a missing fetch time reads as 0 and is due. Big-endian longs of
  non-negative times compare correctly as unsigned bytes;
- a family replacement writes the new cells at the write's timestamp *ts* first, then deletes the
  family at *ts - 1*: the delete masks every older cell and none of the new ones. Thrift1's
  ``mutateRowsTs`` gives all its mutations one timestamp (and applies puts before deletes, so a
  family delete in the same call would mask the new cells), hence two calls; a failure between them
  leaves the old entries beside the new ones, never a row without the family;
- a scan with a condition goes region by region, with its own timeout per scanner call
  (*scanner_timeout*); where a region is so sparse that one call still times out, it goes on in
  stretches of a known number of rows (:meth:`HBaseStore._scan_range`): HBase's Thrift1
  ``scannerGetList`` answers only when it has the rows asked for or the scan has ended;
- :meth:`HBaseStore.splits` returns the table's regions, for region-parallel scans;
- :meth:`HBaseStore.modify` takes no row lock: the key space is cut into :data:`MODIFY_BUCKETS`
  buckets by a stable hash of the key, and a writer holds the lease of a bucket
  (:mod:`nutchy.store.hbase_lease`, a few ``checkAndPut`` calls per bucket, none per row) while
  it reads the bucket's rows with one ``getRows`` per chunk and writes them with one
  ``mutateRows`` per chunk. A writer that finds a bucket held works on the others first and
  comes back to it, so two writers of overlapping rows interleave. Tables written by older
  nutchy versions may hold a row lock cell, ``mk:_nlk_``: it never appears in what the store
  returns, and ``modify`` deletes it from the rows it rewrites.

HBase applies each row's mutations of one call atomically, not a whole :meth:`HBaseStore.write`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import secrets
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store.base import Scan, key_range
from nutchy.store.hbase_lease import SIDE_TABLE_SUFFIX, Lease, LeaseKeeper, Leases
from nutchy.store.schema import FAMILIES, FETCH_TIME_COLUMN, Cells, RowUpdate, coalesce

try:
    import happybase
    from Hbase_thrift import (  # type: ignore[import-not-found]  # made by happybase
        BatchMutation,
        Mutation,
        TScan,
    )
    from Hbase_thrift import IOError as HBaseIOError
    from thriftpy2.protocol.exc import TProtocolException
    from thriftpy2.thrift import TException
    from thriftpy2.transport import TTransportException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("nutchy's HBase store needs happybase: pip install 'nutchy[hbase]'") from exc

try:
    from thriftpy2.protocol.cybin import (  # type: ignore[attr-defined]  # Cython, no stubs
        ProtocolError as CyProtocolError,
    )
except ImportError:  # pragma: no cover - thriftpy2 built without its Cython extensions
    CyProtocolError = TProtocolException

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
#: The row lock cell of nutchy versions before leases (nutchy only): hidden from reads, deleted
#: by :meth:`HBaseStore.modify` from the rows it rewrites.
LOCK_COLUMN = b"mk:_nlk_"
#: How many key buckets :meth:`HBaseStore.modify` leases. Every writer of a table must use the
#: same number, so it is fixed. 16 lets a few writers work side by side, and costs a writer
#: about 50 lease calls per ``modify``, whatever the number of rows.
MODIFY_BUCKETS: Final = 16


def modify_bucket(key: bytes) -> int:
    """The bucket of row *key* for the leases of :meth:`HBaseStore.modify`: a stable hash (the
    CRC-32 of the key), so every writer, on every machine, agrees.

    >>> modify_bucket(b"com.example:http/"), modify_bucket(b"com.example:http/a")
    (14, 15)
    """
    return zlib.crc32(key) % MODIFY_BUCKETS


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


#: What an answer that does not decode raises (thriftpy2's Cython protocols have their own).
_PROTOCOL_ERRORS: Final = (TProtocolException, CyProtocolError)

#: What a broken connection raises: the socket's errors, and thriftpy2's for a closed or short
#: read. After one of these the connection's stream is in an unknown state and is thrown away.
_TRANSPORT_ERRORS: Final = (TTransportException, OSError)


def _table_not_found(exc: BaseException) -> bool:
    """Whether *exc* is HBase's answer for a table that does not exist: an ``IOError`` whose
    message is the Java ``TableNotFoundException`` (its stack trace, or its class and message)."""
    if not isinstance(exc, HBaseIOError):
        return False
    message = exc.message
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return "TableNotFoundException" in (message or "")


def _socket_of(conn: Any) -> socket.socket | None:
    """The socket under a happybase connection's transport (``None`` if it is not open)."""
    transport = conn.transport
    inner = getattr(transport, "sock", None)  # thriftpy2's Cython transports
    if inner is None:
        inner = getattr(transport, "_trans", None)  # its pure-Python ones: a TSocket
    if isinstance(inner, socket.socket):
        return inner
    sock = getattr(inner, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed *sock* (or sent something nobody asked for) while it sat idle.

    Between calls a Thrift connection has nothing to read; a peek that finds the end of the
    stream (or stray bytes, or an error) means the connection cannot carry the next call.
    """
    timeout = sock.gettimeout()
    try:
        sock.setblocking(False)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)
    return True


class _TimedOut(StoreUnavailable):
    """A call given its own timeout (a scanner's) did not get its answer in time."""


#: How long :meth:`HBaseStore.scan` trusts the region boundaries it read, in seconds.
_REGIONS_MAX_AGE: Final = 300.0
#: The most rows one stretch of a sparse scan covers (the key-only call that finds its end
#: returns that many keys).
_MAX_STEP: Final = 10_000
#: The filter of that key-only call: each row's first cell, without its value.
_KEYS_ONLY: Final = b"FirstKeyOnlyFilter() AND KeyOnlyFilter()"


class _Pool:
    """A fixed number of happybase connections shared by threads.

    happybase's own ``ConnectionPool`` cannot be closed (and hands a thread that asks twice the
    connection it already holds, so one cannot lease them all to close them), and it reopens a
    connection inside its error handler, where a server that is gone raises again and hides the
    first error. This one leases each connection to one caller at a time, connects lazily,
    replaces a connection the server closed while it was idle before handing it out, and throws
    away one whose call failed on the transport.
    """

    def __init__(self, size: int, make: Callable[[], Any]) -> None:
        self._make = make
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        for _ in range(size):
            self._idle.put(None)  # a free slot, connected on first use

    def acquire(self, timeout: float) -> Any:
        """A connection, open and ready; ``queue.Empty`` if none is free within *timeout* s."""
        conn = self._idle.get(timeout=timeout)
        try:
            if conn is not None and conn.transport.is_open():
                sock = _socket_of(conn)
                if sock is not None and _closed_by_server(sock):
                    logger.debug("Replacing a connection the server closed while it was idle")
                    self._discard(conn)
                    conn = None
            if conn is None:
                conn = self._make()
            with self._lock:
                self._open.add(conn)
            conn.open()
        except BaseException:
            self.release(conn, broken=True)
            raise
        return conn

    def release(self, conn: Any, *, broken: bool = False) -> None:
        """Give *conn* back; a *broken* one is closed and its slot reconnects on next use."""
        if broken and conn is not None:
            self._discard(conn)
            conn = None
        self._idle.put(conn)

    def _discard(self, conn: Any) -> None:
        with self._lock:
            self._open.discard(conn)
        with contextlib.suppress(*_TRANSPORT_ERRORS):
            conn.close()

    def close(self) -> None:
        """Close every connection, also those leased out: their calls fail."""
        with self._lock:
            conns = list(self._open)
            self._open.clear()
        for conn in conns:
            with contextlib.suppress(*_TRANSPORT_ERRORS):
                conn.close()

    def open_count(self) -> int:
        """How many connections are open (for tests)."""
        with self._lock:
            return sum(1 for conn in self._open if conn.transport.is_open())


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

    *crawl_id* prefixes the table name (*table*: ``webpage``, or ``host`` for the host database
    with its *families* ``mtdt il ol``) as Nutch's ``storage.crawl.id`` does. *timeout* is the
    socket timeout in milliseconds, for connecting and for every call. *pool_size* connections are
    shared by the threads that use the store; *transport* (``buffered`` or ``framed``) and
    *protocol* (``binary`` or ``compact``) must be the server's. One ``mutateRows`` call carries
    at most *batch_size* rows and *batch_bytes* bytes of cells. A scanner call asks for at most
    *scanner_caching* rows and may take *scanner_timeout* ms (see :meth:`scan`). The leases of
    :meth:`modify` and :meth:`exclusive` last *lock_lease* ms without renewal (at least three
    *timeout*: their holder renews them every third of that); a writer waits at most
    *lock_timeout* ms for a lease a live writer holds (0: as long as that writer renews it).
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 9090,
        *,
        crawl_id: str = "",
        table: str = "webpage",
        families: Sequence[bytes] = FAMILIES,
        timeout: int = 10000,
        pool_size: int = 4,
        batch_size: int = 1000,
        batch_bytes: int = 1 << 20,
        scanner_caching: int = 1000,
        scanner_timeout: int = 60_000,
        transport: str = "buffered",
        protocol: str = "binary",
        lock_timeout: int = 0,
        lock_lease: int = 60_000,
    ) -> None:
        if transport not in happybase.connection.THRIFT_TRANSPORTS:
            raise ValueError(f"transport must be 'buffered' or 'framed', got {transport!r}")
        if protocol not in happybase.connection.THRIFT_PROTOCOLS:
            raise ValueError(f"protocol must be 'binary' or 'compact', got {protocol!r}")
        if lock_lease < 3 * timeout:
            raise ValueError(
                f"'lock_lease' must be at least 3 times 'timeout' ({3 * timeout} ms), got"
                f" {lock_lease!r}: a lease must outlive the call that renews it"
            )
        if lock_timeout < 0:
            raise ValueError(f"'lock_timeout' must be >= 0, got {lock_timeout!r}")
        self.host = host
        self.lock_timeout = lock_timeout
        self.lock_lease = lock_lease
        self.port = port
        self.timeout = timeout
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.transport = transport
        self.protocol = protocol
        self.table_name = f"{crawl_id}_{table}" if crawl_id else table
        self._table_bytes = self.table_name.encode()
        self._short_name = table
        self.families = tuple(families)
        self.scanner_caching = scanner_caching
        self.scanner_timeout = scanner_timeout
        #: When the region boundaries were read (time.monotonic()) and what they are.
        self._regions: tuple[float, list[bytes]] | None = None
        self._probe()

        def connect() -> happybase.Connection:
            return happybase.Connection(
                host=host,
                port=port,
                timeout=timeout,
                transport=transport,
                protocol=protocol,
                table_prefix=crawl_id or None,
                autoconnect=False,
            )

        self._pool = _Pool(pool_size, connect)
        self._leases = Leases(
            # Safe to send twice: a lease call that finds its own value there counts as done.
            functools.partial(self._call, retry=True),
            table + SIDE_TABLE_SUFFIX,
            ttl=lock_lease,
            wait=lock_timeout,
            table_exists=self.exists,
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

    def _call(
        self, work: Callable[[Any], T], *, retry: bool = False, timeout: int | None = None
    ) -> T:
        """Run *work(connection)* on a pooled connection, turning Thrift errors into ours.

        With *retry* (only for work that does the same when done twice), a failure of the
        transport is tried once more on a new connection. *timeout* (ms) replaces the socket
        timeout of :attr:`timeout` for this work; when it is given, a timeout is not tried again
        but raised as :class:`_TimedOut` for the caller to handle.
        """
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                # As long as another thread's call may keep a connection: a scanner call.
                conn = self._pool.acquire(max(self.timeout, self.scanner_timeout) / 1000)
            except queue.Empty as exc:
                raise StoreUnavailable(
                    f"no connection to {self.host}:{self.port} became free within"
                    f" {max(self.timeout, self.scanner_timeout)} ms"
                ) from exc
            except _TRANSPORT_ERRORS as exc:
                if attempt < attempts:
                    continue
                raise self._error(exc) from exc
            broken = True
            sock = _socket_of(conn) if timeout is not None else None
            try:
                if sock is not None and timeout is not None:
                    sock.settimeout(timeout / 1000)
                result = work(conn)
                broken = False
                if sock is not None:
                    sock.settimeout(self.timeout / 1000)
                return result
            except _TRANSPORT_ERRORS as exc:
                if isinstance(exc, TimeoutError) and timeout is not None:
                    raise _TimedOut(
                        f"the HBase Thrift server at {self.host}:{self.port} did not answer"
                        f" within {timeout} ms"
                    ) from exc
                if attempt < attempts:
                    logger.debug("%s: %s; trying again on a new connection", self, _describe(exc))
                    continue
                raise self._error(exc) from exc
            except _PROTOCOL_ERRORS as exc:
                raise self._error(exc) from exc  # bytes that do not decode: out of step
            except TException as exc:
                # An answer of the server (IOError, IllegalArgument, an internal error) leaves
                # the connection in step.
                broken = False
                raise self._error(exc) from exc
            finally:
                self._pool.release(conn, broken=broken)
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, exc: BaseException) -> StoreError:
        """Our error for a Thrift or socket error, told apart by its type."""
        text = _describe(exc)
        if isinstance(exc, _TRANSPORT_ERRORS):
            if isinstance(exc, TTransportException) and exc.type == exc.END_OF_FILE:
                # What a server that speaks another transport or protocol does too.
                text += (
                    f" (the server closed the connection: it is stopping, or it does not speak"
                    f" the {self.transport} transport and {self.protocol} protocol of"
                    f" NUTCH_HBASE_TRANSPORT and NUTCH_HBASE_PROTOCOL)"
                )
            return StoreUnavailable(
                f"the HBase Thrift server at {self.host}:{self.port} failed: {text}"
            )
        if _table_not_found(exc):
            return self._missing()
        return StoreError(f"{self}: {text}")

    def _missing(self) -> TableMissing:
        return TableMissing(
            f"table {self.table_name!r} does not exist on {self.host}:{self.port};"
            " run 'nutchy storage init' or 'nutchy inject'"
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def exists(self) -> bool:
        return self._call(lambda conn: self._table_bytes in conn.client.getTableNames(), retry=True)

    def create(self) -> bool:
        if self.exists():
            return False
        families = {family.decode(): {"max_versions": 1} for family in self.families}
        self._call(lambda conn: conn.create_table(self._short_name, families))
        logger.info("Created HBase table %s on %s:%s", self.table_name, self.host, self.port)
        return True

    def drop(self) -> None:
        """Delete the table, and its lease table (:mod:`nutchy.store.hbase_lease`) if there is
        one."""
        side = self._leases.table
        tables = self._call(lambda conn: conn.tables(), retry=True)
        for name in (side, self._short_name):
            if name.encode() in tables:

                def delete(conn: Any, name: str = name) -> None:
                    conn.delete_table(name, disable=True)

                self._call(delete)

    def side(self, work: Callable[[Any], T]) -> T:
        """Run *work(table)* on the happybase ``Table`` of the nutchy side table
        ``<table>_nutchy`` (:mod:`nutchy.store.hbase_lease`), created when missing beside an
        existing web table: where :mod:`nutchy.store.hosts` keeps what it remembers of hosts."""
        name = self._leases.table
        result: T = self._leases.run(lambda conn: work(conn.table(name)))
        return result

    def close(self) -> None:
        """Close every connection of the pool. Closing a store whose server has gone away does
        not fail; a store used after its close connects again."""
        self._pool.close()

    def checkpoint(self) -> None:
        """Nothing to do: HBase makes each write durable (its WAL) before answering it."""

    def splits(self) -> list[tuple[bytes, bytes | None]]:
        regions = self._call(lambda conn: conn.table(self._short_name).regions(), retry=True)
        if not regions:
            # HBase answers a table it does not know with no regions at all.
            if not self.exists():
                raise self._missing()
            return [(b"", None)]
        return [
            (region["start_key"], region["end_key"] or None)
            for region in sorted(regions, key=lambda r: r["start_key"])
        ]

    # --- reads ---------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> Cells | None:
        cells = self._call(
            lambda conn: conn.table(self._short_name).row(key, columns=columns), retry=True
        )
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

            rows = self._call(work, retry=True)
            for key, cells in rows:
                cells.pop(LOCK_COLUMN, None)
                if cells:
                    found[key] = dict(cells)
        return found

    def scan(
        self, scan: Scan | None = None, page_size: int = 1000
    ) -> Iterator[tuple[bytes, Cells]]:
        """Stream the rows of *scan*, *page_size* rows per lease of a connection.

        A scan with a condition (a marker, a due time) is a server-side filter, and a filter that
        matches few rows makes the server read many to fill one page. So such a scan goes region
        by region (no call reads past a region's end), and if a call still outlasts
        :attr:`scanner_timeout` (a huge sparse region), the rest of that region is read in
        stretches of a known number of rows: a cheap key-only call finds where the next stretch
        ends, then the filtered call reads only that stretch (see :meth:`_scan_range`).
        """
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
        if stop is not None and start >= stop:
            return
        ranges = self._region_ranges(start, stop) if filter_string else [(start, stop)]
        remaining = scan.limit
        if remaining is not None:
            page_size = max(1, min(page_size, remaining))
        for low, high in ranges:
            for key, cells in self._scan_range(low, high, columns, filter_string, page_size):
                if remaining is not None and remaining <= 0:
                    return
                cells.pop(LOCK_COLUMN, None)
                if extra:
                    cells = {c: v for c, v in cells.items() if c not in extra}
                if not cells:
                    continue
                yield key, cells
                if remaining is not None:
                    remaining -= 1

    def _region_ranges(self, start: bytes, stop: bytes | None) -> list[tuple[bytes, bytes | None]]:
        """[*start*, *stop*) cut at the table's region boundaries (read at most every
        :data:`_REGIONS_MAX_AGE` seconds: a stale list still cuts the key space into ranges that
        cover it, only not at the regions' current ends)."""
        now = time.monotonic()
        if self._regions is None or now - self._regions[0] > _REGIONS_MAX_AGE:
            regions = self._call(lambda conn: conn.table(self._short_name).regions(), retry=True)
            if not regions:  # a table that does not exist: the scan says so
                return [(start, stop)]
            self._regions = (
                now,
                sorted(region["start_key"] for region in regions if region["start_key"]),
            )
        ranges: list[tuple[bytes, bytes | None]] = []
        low = start
        for boundary in self._regions[1]:
            if boundary <= low:
                continue
            if stop is not None and boundary >= stop:
                break
            ranges.append((low, boundary))
            low = boundary
        ranges.append((low, stop))
        return ranges

    def _scan_range(
        self,
        start: bytes,
        stop: bytes | None,
        columns: list[bytes] | None,
        filter_string: bytes | None,
        page_size: int,
    ) -> Iterator[tuple[bytes, Cells]]:
        """The rows of [*start*, *stop*), a page per call of :meth:`_page`.

        While pages come back within :attr:`scanner_timeout`, each reads from where the last one
        ended. When one does not (only a filtered scan can read many rows to return few), the
        range goes on in stretches: :meth:`_key_after` finds the key *step* rows ahead, and the
        page reads up to there only. A stretch that comes back within a quarter of the timeout
        doubles *step* (up to :data:`_MAX_STEP`), one that times out quarters it; a stretch of one
        row that times out fails the scan. Nothing is returned twice: a page that timed out
        returned nothing.
        """
        step = 0  # 0: pages end where page_size rows are found, or at stop
        while stop is None or start < stop:
            began = time.monotonic()
            try:
                end = self._key_after(start, stop, step) if step else stop
                rows = self._page(start, end, columns, filter_string, page_size)
            except _TimedOut:
                if filter_string is None or step == 1:
                    raise
                step = max(1, step // 4) if step else min(page_size, _MAX_STEP)
                logger.info(
                    "%s: a filtered scan from %r read for more than %d ms without filling a"
                    " page; reading on in stretches of %d rows",
                    self,
                    start,
                    self.scanner_timeout,
                    step,
                )
                continue
            yield from rows
            if len(rows) == page_size:
                start = rows[-1][0] + b"\x00"
                continue
            if end is None or end == stop:
                return
            start = end
            if time.monotonic() - began < self.scanner_timeout / 4000:
                step = min(step * 2, _MAX_STEP)

    def _page(
        self,
        start: bytes,
        stop: bytes | None,
        columns: list[bytes] | None,
        filter_string: bytes | None,
        count: int,
    ) -> list[tuple[bytes, Cells]]:
        """Up to *count* rows of [*start*, *stop*) on one connection: a scanner opened, read in
        calls of :attr:`scanner_caching` rows, each within :attr:`scanner_timeout`, and closed.

        A call that fails on the transport is tried again on a new connection, except a timeout:
        that is the scan's to handle (:meth:`_scan_range`).
        """
        caching = max(1, min(count, self.scanner_caching))
        spec = TScan(
            startRow=start,
            stopRow=stop,
            columns=columns,
            caching=caching,
            filterString=filter_string,
        )

        def work(conn: Any) -> list[tuple[bytes, Cells]]:
            client = conn.client
            scanner = client.scannerOpenWithScan(self._table_bytes, spec, {})
            rows: list[tuple[bytes, Cells]] = []
            try:
                while len(rows) < count:
                    wanted = min(caching, count - len(rows))
                    results = client.scannerGetList(scanner, wanted)
                    rows.extend(
                        (result.row, {c: cell.value for c, cell in result.columns.items()})
                        for result in results
                    )
                    if len(results) < wanted:  # HBase fills a call unless the scan has ended
                        break
            except _TRANSPORT_ERRORS:
                raise  # the connection is lost, and with it the way to close the scanner
            except BaseException:
                with contextlib.suppress(TException):
                    client.scannerClose(scanner)
                raise
            client.scannerClose(scanner)
            return rows

        return self._call(work, retry=True, timeout=self.scanner_timeout)

    def _key_after(self, start: bytes, stop: bytes | None, count: int) -> bytes | None:
        """The key just after the *count*-th row from *start* (*stop* if fewer rows are left):
        the end of a stretch of *count* rows. A key-only call, unfiltered, so the server reads
        exactly the rows it returns."""
        rows = self._page(start, stop, None, _KEYS_ONLY, count)
        if len(rows) < count:
            return stop
        return rows[-1][0] + b"\x00"

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
        for timestamp, batch in self._mutate_calls(merged, self._next_timestamp()):
            # The same cells at the same timestamp: sent twice, they are written once.
            self._call(self._mutate(batch, timestamp), retry=True)

    def _mutate(self, batch: list[Any], timestamp: int) -> Callable[[Any], None]:
        """The work of one ``mutateRowsTs`` call of *batch* at *timestamp*."""

        def work(conn: Any) -> None:
            conn.client.mutateRowsTs(self._table_bytes, batch, timestamp, {})

        return work

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

    def _mutate_calls(self, merged: list[RowUpdate], ts: int) -> Iterator[tuple[int, list[Any]]]:
        """The ``mutateRowsTs`` calls that write *merged* at *ts*, in the order to send them.

        Rows go in chunks of at most :attr:`batch_size` rows and :attr:`batch_bytes` bytes (a row
        larger than that alone). A chunk is one call at *ts* with its puts and entry deletes, then,
        if it replaces families, one call at *ts - 1* with the family deletes: sent after the new
        cells, a delete that fails leaves old entries beside them rather than none at all.
        """
        chunk: list[RowUpdate] = []
        size = 0
        for update in merged:
            row_size = _mutation_bytes(update)
            if chunk and (len(chunk) >= self.batch_size or size + row_size > self.batch_bytes):
                yield from _chunk_calls(chunk, ts)
                chunk, size = [], 0
            chunk.append(update)
            size += row_size
        if chunk:
            yield from _chunk_calls(chunk, ts)

    def modify(
        self,
        keys: Sequence[bytes],
        columns: Sequence[bytes] | None,
        change: Callable[[bytes, Cells | None], RowUpdate | None],
        chunk_size: int | None = None,
    ) -> int:
        """Read *keys*, call *change* for each and write what it returns, *chunk_size* rows
        (:attr:`batch_size` by default) at a time, each row's bucket leased from its read to its
        write (see the module docstring).

        The buckets are taken in an order of this call's own (so concurrent writers start apart)
        and as many at a time as fill a chunk; a bucket another writer holds is left for later.
        Every chunk is one ``getRows`` and one ``mutateRows``, after a check that its leases are
        still held. A bucket is released once its rows are written, and a chunk is never kept
        waiting for a bucket: what is held is written first.
        """
        chunk = chunk_size or self.batch_size
        if chunk < 1:
            raise ValueError(f"'chunk_size' must be >= 1, got {chunk!r}")
        buckets: dict[int, list[bytes]] = {}
        for key in sorted(set(keys)):
            buckets.setdefault(modify_bucket(key), []).append(key)
        if not buckets:
            return 0
        order = sorted(buckets)
        first = secrets.randbelow(len(order))
        pending = {b"modify:%02d" % b: buckets[b] for b in order[first:] + order[:first]}
        held: list[tuple[Lease, list[bytes]]] = []
        written = 0
        waiter = self._leases.waiter()
        with LeaseKeeper(self._leases) as keeper:
            while pending or held:
                have = sum(len(rows) for _, rows in held)
                if have < chunk and pending:
                    wanted = {name: len(rows) for name, rows in pending.items()}
                    for lease in self._leases.take_free(wanted, chunk - have):
                        keeper.add(lease)
                        held.append((lease, pending.pop(lease.name)))
                if not held:
                    waiter.pause(self._leases.last_seen)
                    continue
                waiter.progress()
                part: list[bytes] = []
                leases: list[Lease] = []
                done: list[Lease] = []
                while held and len(part) < chunk:
                    lease, rows = held[0]
                    room = chunk - len(part)
                    part.extend(rows[:room])
                    leases.append(lease)
                    if len(rows) <= room:
                        held.pop(0)
                        done.append(lease)
                    else:
                        held[0] = (lease, rows[room:])
                written += self._modify_chunk(part, columns, change, leases, keeper)
                for lease in done:
                    keeper.release(lease)
        return written

    def _modify_chunk(
        self,
        keys: list[bytes],
        columns: Sequence[bytes] | None,
        change: Callable[[bytes, Cells | None], RowUpdate | None],
        leases: list[Lease],
        keeper: LeaseKeeper,
    ) -> int:
        """One chunk of :meth:`modify`: one read, the changes, the lease check, one write."""

        def read(conn: Any) -> list[tuple[bytes, dict[bytes, tuple[bytes, int]]]]:
            table = conn.table(self._short_name)
            rows: list[tuple[bytes, dict[bytes, tuple[bytes, int]]]] = table.rows(
                keys, columns=columns, include_timestamp=True
            )
            return rows

        newest = 0
        found: dict[bytes, Cells] = {}
        stale: set[bytes] = set()
        for key, cells in self._call(read, retry=True):
            if cells.pop(LOCK_COLUMN, None) is not None:
                stale.add(key)
            if cells:
                found[key] = {c: v for c, (v, _) in cells.items()}
                newest = max(newest, *(ts for _, ts in cells.values()))
        updates = []
        for key in keys:
            update = change(key, found.get(key))
            if update is not None:
                if key in stale:
                    update.deletes.add(LOCK_COLUMN)
                updates.append(update)
        merged = coalesce(updates)
        if not merged:
            return 0
        for lease in leases:
            keeper.check(lease)
        # Stamped after every cell read, whatever the clocks of other writers say. Sent twice
        # (the bucket is still this writer's), the same cells at the same time are written once.
        ts = self._next_timestamp(after=newest)
        for timestamp, batch in self._mutate_calls(merged, ts):
            self._call(self._mutate(batch, timestamp), retry=True)
        return len(merged)

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[Callable[[], None]]:
        """Hold the lease *name* of this table (in its lease table) for the ``with`` block,
        waiting while another writer holds it; the value is a function that raises
        :class:`~nutchy.store.hbase_lease.LeaseLost` if the lease was taken over meanwhile."""
        wanted = {name.encode(): 1}
        waiter = self._leases.waiter()
        with LeaseKeeper(self._leases) as keeper:
            while not (taken := self._leases.take_free(wanted, 1)):
                waiter.pause(self._leases.last_seen)
            lease = taken[0]
            keeper.add(lease)
            yield lambda: keeper.check(lease)

    def delete_rows(self, keys: Sequence[bytes]) -> None:
        # Stamped like writes: a delete stamped earlier than a put would not remove it.
        ts = self._next_timestamp()
        families = [Mutation(isDelete=True, column=family) for family in self.families]
        for i in range(0, len(keys), self.batch_size):
            batch = [
                BatchMutation(row=key, mutations=families) for key in keys[i : i + self.batch_size]
            ]
            self._call(self._mutate(batch, ts), retry=True)


#: What one cell costs in a ``mutateRows`` call besides its column and value: Thrift's field
#: headers, lengths and flags of a ``Mutation`` (23 bytes in the binary protocol), rounded up.
_CELL_OVERHEAD: Final = 32
#: The same for a row of a call (its ``BatchMutation``: the key's header and the list's).
_ROW_OVERHEAD: Final = 16


def _mutation_bytes(update: RowUpdate) -> int:
    """The bytes *update* adds to a ``mutateRows`` call: its key and cells, and Thrift's framing.

    >>> _mutation_bytes(RowUpdate(b"k", {b"f:st": b"1234"}, {b"mk:_gnmrk_"}, {b"ol"}))
    133
    """
    size = _ROW_OVERHEAD + len(update.key)
    size += sum(_CELL_OVERHEAD + len(column) + len(value) for column, value in update.puts.items())
    size += sum(_CELL_OVERHEAD + len(column) for column in update.deletes)
    size += sum(_CELL_OVERHEAD + len(family) for family in update.replace)
    return size


def _chunk_calls(chunk: list[RowUpdate], ts: int) -> Iterator[tuple[int, list[Any]]]:
    """The calls of one chunk of rows: cells and entry deletes at *ts*, then family deletes at
    *ts - 1* (see :meth:`HBaseStore._mutate_calls`)."""
    writes = []
    replaces = []
    for update in chunk:
        mutations = [Mutation(column=column, value=value) for column, value in update.puts.items()]
        mutations.extend(
            Mutation(isDelete=True, column=column) for column in sorted(update.deletes)
        )
        if mutations:
            writes.append(BatchMutation(row=update.key, mutations=mutations))
        if update.replace:
            families = [Mutation(isDelete=True, column=family) for family in sorted(update.replace)]
            replaces.append(BatchMutation(row=update.key, mutations=families))
    if writes:
        yield ts, writes
    if replaces:
        yield ts - 1, replaces
