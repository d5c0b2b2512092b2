"""The store interface every backend implements.

A store holds one web table: rows of cells, ``{b"fam:qual": value}``, keyed by the reversed URL in
UTF-8 and kept in byte order. It knows nothing of WebPages: :mod:`nutchy.store.schema` turns cells
into pages and back, and :class:`nutchy.store.table.WebTable` puts the two together.

The calls, all blocking (Scrapy components call them from a thread, never on the reactor):

- :meth:`Store.exists`, :meth:`Store.create` (idempotent), :meth:`Store.drop`;
- :meth:`Store.get` and :meth:`Store.get_many` read rows, optionally only some columns;
- :meth:`Store.scan` streams rows between a start and a stop key, with two conditions a backend
  evaluates close to the data: a marker equal to a batch id, and a fetch time at or before a
  moment. Memory is bounded by the page size, whatever the table holds;
- :meth:`Store.write` applies :class:`~nutchy.store.schema.RowUpdate` changes;
  :meth:`Store.insert_new` writes only the rows that are not in the table;
- :meth:`Store.modify` reads rows, computes their changes and writes them with no other
  ``modify`` of those rows in between (what adding to a score needs when several processes
  update one table), without a lock per row;
- :meth:`Store.exclusive` holds a named lock of the table, for work that must not run twice
  at once (generate's selection and marks);
- :meth:`Store.splits` cuts the key space into ranges that can be scanned in parallel;
- :meth:`Store.close`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from nutchy.store.schema import Cells, RowUpdate

#: The key that sorts after every row key of a scan without a stop key.
NO_STOP = None


@dataclass(frozen=True, slots=True)
class Scan:
    """What to read in one scan.

    *start* is inclusive and *stop* exclusive; *prefix* restricts the scan to keys starting with
    it (and may be combined with start/stop). *columns* are ``b"fam:qual"`` columns or ``b"fam"``
    families (``None`` reads everything). *marker* = ``(b"_gnmrk_", b"<batch id>")`` keeps only
    rows whose marker has exactly that value; *due_before* keeps rows whose fetch time (``f:ts``,
    0 when missing) is at or before that many ms since the epoch. *limit* stops after that many
    rows.

    Rows come in key order, except that with *due_before* a backend may return them in another
    order (the embedded store returns them by fetch time, from its index).
    """

    start: bytes = b""
    stop: bytes | None = None
    prefix: bytes = b""
    columns: Sequence[bytes] | None = None
    marker: tuple[bytes, bytes] | None = None
    due_before: int | None = None
    limit: int | None = None


class Store(Protocol):
    """A web table backend. See the module docstring for the contract."""

    #: The table's name (``webpage`` or ``<crawlId>_webpage``).
    table_name: str

    def exists(self) -> bool: ...

    def create(self) -> bool:
        """Create the table if missing; return whether it was created."""
        ...

    def drop(self) -> None:
        """Delete the table and everything in it."""
        ...

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> Cells | None: ...

    def get_many(
        self, keys: Sequence[bytes], columns: Sequence[bytes] | None = None
    ) -> dict[bytes, Cells]: ...

    def scan(
        self, scan: Scan | None = None, page_size: int = 1000
    ) -> Iterator[tuple[bytes, Cells]]: ...

    def write(self, updates: Sequence[RowUpdate]) -> None:
        """Apply *updates*. The embedded store applies one call atomically; HBase applies each row
        atomically."""
        ...

    def insert_new(self, updates: Sequence[RowUpdate]) -> int:
        """Write the rows of *updates* that are not in the table, leave the rows that are there
        as they are, and return how many rows were written (inject's default merge rule). The
        embedded store decides row by row inside one transaction; HBase reads the rows first
        (see :meth:`nutchy.store.hbase.HBaseStore.insert_new`)."""
        ...

    def modify(
        self,
        keys: Sequence[bytes],
        columns: Sequence[bytes] | None,
        change: Callable[[bytes, Cells | None], RowUpdate | None],
        chunk_size: int | None = None,
    ) -> int:
        """Read *columns* of *keys*, call ``change(key, cells)`` for each (``None`` for a missing
        row) and write the updates it returns, *chunk_size* rows at a time (the store's batch
        size by default); return how many rows were written.

        Between the read of a row and the write of its update, no other ``modify`` of that row,
        from this process or another, reads or writes it: a change computed from the cells read
        is never applied over a newer value. Each chunk is applied whole or not at all (HBase:
        each row), and a call that fails keeps the chunks written before. No store takes a lock
        per row: the embedded store runs each chunk in one write transaction; HBase leases
        buckets of keys, a few calls per bucket and none per row (see
        :mod:`nutchy.store.hbase`). *change* may be called more than once for a key and must
        have no other effect. Keys may come in any order; the store chooses its own.
        """
        ...

    def exclusive(self, name: str) -> AbstractContextManager[Callable[[], None]]:
        """Hold the lock *name* of this table for a ``with`` block: no other ``exclusive(name)``
        of the table, in this process or another, runs until the block ends; it waits.

        The value of the ``with`` is a function to call before writing what the lock protects:
        it raises :class:`~nutchy.exceptions.StoreError` if the lock was lost meanwhile (HBase:
        a lease not renewed in time because the process stalled). A holder that dies releases
        the lock: at once on the embedded store (a file lock), after the lease time on HBase.
        """
        ...

    def delete_rows(self, keys: Sequence[bytes]) -> None: ...

    def splits(self) -> list[tuple[bytes, bytes | None]]:
        """Key ranges ``(start, stop)`` that cover the table, one per region (HBase) or one."""
        ...

    def checkpoint(self) -> None:
        """Say that a burst of writes has ended (a fetch): the embedded store starts copying its
        write-ahead log into the file, in a thread of its own, beside whatever the process does
        next, so that :meth:`close` has less left to do; HBase has nothing to do."""
        ...

    def close(self) -> None: ...


def prefix_stop(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with *prefix* (``None``: no such key).

    >>> prefix_stop(b"com.example:"), prefix_stop(b"a\\xff"), prefix_stop(b"\\xff")
    (b'com.example;', b'b', None)
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def key_range(scan: Scan) -> tuple[bytes, bytes | None]:
    """The effective ``(start, stop)`` of a scan, with its prefix folded in."""
    start, stop = scan.start, scan.stop
    if scan.prefix:
        start = max(start, scan.prefix)
        pstop = prefix_stop(scan.prefix)
        if pstop is not None and (stop is None or pstop < stop):
            stop = pstop
    return start, stop
