"""Leases of the HBase store: which writer may work on a part of the table, for how long.

HBase's Thrift1 API has no lock a client can hold and no transaction over several rows; what it
has is ``checkAndPut``, a compare-and-set of one cell. A lease is one such cell, in the
nutchy-only side table ``<table>_nutchy`` (``<crawlId>_webpage_nutchy``, family ``l``), created
the first time a lease is taken, so that nothing Nutch scans changes:

- the row is the lease's name (``modify:07``, ``generate``), the column ``l:h``;
- its value is ``<expiry in ms since the epoch> <host>:<pid>:<random>`` while held, and ``0``
  once released;
- a writer takes a lease with a ``checkAndPut`` that expects the value it read, when that value
  is absent, released or expired; renews it with one that expects its own value, and releases it
  with one that puts ``0``. Two writers that read the same free value cannot both take it.

A holder renews its leases every third of the lease time (:attr:`Leases.ttl`) from a thread of
its own (:class:`LeaseKeeper`), so a live holder's lease never expires, however long it holds
it; a lease that is not renewed for a whole lease time (its holder died, or stalled that long)
is taken over by the next writer that wants it, with a warning. Before writing what a lease
protects, the holder checks it still holds it (:meth:`LeaseKeeper.check`): if its last renewal
is older than half the lease time (the thread was held up), it renews at once, which fails if
the lease was taken over. The lease time must therefore exceed the longest a renewal call can
take, three socket timeouts (:class:`~nutchy.store.hbase.HBaseStore` checks it), and the
writers' clocks must agree to well within a third of it.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from nutchy.exceptions import StoreError, TableMissing

try:
    import happybase  # noqa: F401 - makes the Hbase_thrift module
    from Hbase_thrift import AlreadyExists, Mutation  # type: ignore[import-not-found]
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("nutchy's HBase store needs happybase: pip install 'nutchy[hbase]'") from exc

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)

#: The side table's suffix, its family and the column of a lease.
SIDE_TABLE_SUFFIX: Final = "_nutchy"
FAMILY: Final = "l"
COLUMN: Final = b"l:h"
#: The value of a released lease.
RELEASED: Final = b"0"

#: What runs one piece of work on a pooled connection (:meth:`HBaseStore._call`).
Call = Callable[[Callable[[Any], Any]], Any]


class LeaseLost(StoreError):
    """A lease this writer held was taken over by another (it was not renewed in time): what it
    protects was not written."""


def expiry(value: bytes | None) -> int:
    """When the lease whose cell holds *value* expires, in ms since the epoch (0: free).

    >>> expiry(b"1700000000000 host:12:ab"), expiry(b"0"), expiry(None), expiry(b"junk")
    (1700000000000, 0, 0, 0)
    """
    if not value:
        return 0
    try:
        return int(value.split(b" ", 1)[0])
    except ValueError:
        return 0


@dataclass(eq=False)
class Lease:
    """A lease held: its *name*, the *value* its cell holds, and when (``time.monotonic()``) the
    expiry in that value was computed, which is when the holder last knew it held the lease."""

    name: bytes
    value: bytes
    confirmed: float
    lost: bool = False


class Leases:
    """The leases of one table, in its side table *table* (the name without the crawl id
    prefix), reached through *call*.

    *ttl* is the lease time in ms. A writer waiting for a lease that a live holder keeps gives up
    after *wait* ms (0: it waits as long as the holder renews). *table_exists* says whether the
    web table itself exists: the side table is only created beside an existing one.
    """

    def __init__(
        self,
        call: Call,
        table: str,
        *,
        ttl: int,
        wait: int,
        table_exists: Callable[[], bool],
    ) -> None:
        self._call = call
        self.table = table
        self.ttl = ttl
        self.wait = wait
        self._table_exists = table_exists
        self._who = f"{socket.gethostname()}:{os.getpid()}"
        #: What the last :meth:`take_free` read (to name the holders a writer waits for).
        self.last_seen: dict[bytes, bytes | None] = {}

    # --- one call each ---------------------------------------------------------------------------

    def run(self, work: Callable[[Any], Any]) -> Any:
        """Run *work* on a connection, creating the side table first if it is missing."""
        try:
            return self._call(work)
        except TableMissing:
            self._create()
            return self._call(work)

    def _create(self) -> None:
        if not self._table_exists():
            raise TableMissing(
                f"the table of {self.table!r} does not exist; run 'nutchy storage init' or"
                " 'nutchy inject'"
            )

        def work(conn: Any) -> None:
            try:
                conn.create_table(self.table, {FAMILY: {"max_versions": 1}})
            except AlreadyExists:
                pass  # another writer created it meanwhile
            else:
                logger.info("Created the lease table %s", self.table)

        self._call(work)

    def poll(self, names: Sequence[bytes]) -> dict[bytes, bytes | None]:
        """The values of the leases *names* (``None``: never taken), in one call."""

        def work(conn: Any) -> dict[bytes, bytes | None]:
            rows = conn.table(self.table).rows(list(names), columns=[COLUMN])
            return {key: cells.get(COLUMN) for key, cells in rows}

        found = self.run(work)
        return {name: found.get(name) for name in names}

    def _swap(self, name: bytes, expected: bytes | None, value: bytes) -> bool:
        """Put *value* in the cell of lease *name* if it holds *expected* (``None``: no cell)."""

        def work(conn: Any) -> bool:
            table = conn.table(self.table).name  # with the crawl id prefix
            put = Mutation(column=COLUMN, value=value)
            if conn.client.checkAndPut(table, name, COLUMN, expected, put, {}):
                return True
            # A call retried after its answer was lost finds its own value there.
            cells = conn.client.get(table, name, COLUMN, {})
            return bool(cells) and cells[0].value == value

        return bool(self.run(work))

    def _value(self) -> tuple[bytes, float]:
        """A new value for a lease taken or renewed now, and the monotonic time of *now*."""
        confirmed = time.monotonic()
        expires = int(time.time() * 1000) + self.ttl
        return f"{expires} {self._who}:{secrets.token_hex(4)}".encode(), confirmed

    def take(self, name: bytes, seen: bytes | None) -> Lease | None:
        """Take lease *name*, whose cell held *seen* when polled, if that value is free (absent,
        released or expired); ``None`` if it is held or another writer took it first."""
        expires = expiry(seen)
        now = int(time.time() * 1000)
        if expires > now:
            return None
        value, confirmed = self._value()
        if not self._swap(name, seen, value):
            return None
        if expires:
            logger.warning(
                "Took over the lease %s of %s from %s: not renewed for %d ms (its holder died"
                " or stalled)",
                name.decode(errors="replace"),
                self.table,
                (seen or b"").split(b" ", 1)[-1].decode(errors="replace"),
                self.ttl + now - expires,
            )
        return Lease(name, value, confirmed)

    def renew(self, lease: Lease) -> None:
        """Extend *lease* by a lease time from now; raise :class:`LeaseLost` if it was taken over."""
        if lease.lost:
            raise LeaseLost(f"the lease {lease.name!r} of {self.table} was taken over")
        value, confirmed = self._value()
        if not self._swap(lease.name, lease.value, value):
            lease.lost = True
            raise LeaseLost(
                f"the lease {lease.name!r} of {self.table} was taken over: it was not renewed"
                f" within {self.ttl} ms"
            )
        lease.value, lease.confirmed = value, confirmed

    def release(self, lease: Lease) -> None:
        """Let *lease* go (a lease already taken over is left to its new holder)."""
        if lease.lost:
            return
        if not self._swap(lease.name, lease.value, RELEASED):
            lease.lost = True
            logger.warning(
                "The lease %s of %s was taken over before it was released",
                lease.name.decode(errors="replace"),
                self.table,
            )

    # --- taking several ------------------------------------------------------------------------

    def take_free(self, wanted: Mapping[bytes, int], enough: int) -> list[Lease]:
        """Take free leases among *wanted* (name → what it is worth), in their order, until what
        is taken is worth *enough*: one call to read them all, then one per lease taken."""
        taken: list[Lease] = []
        if not wanted:
            return taken
        seen = self.poll(list(wanted))
        self.last_seen = seen
        for name, worth in wanted.items():
            if enough <= 0:
                break
            lease = self.take(name, seen[name])
            if lease is not None:
                taken.append(lease)
                enough -= worth
        return taken

    def waiter(self) -> Waiter:
        return Waiter(self.wait, self.table)


class Waiter:
    """Sleeps between attempts to take leases held by others, longer each time (up to half a
    second), and gives up after *wait* ms without progress (0: never)."""

    def __init__(self, wait: int, table: str) -> None:
        self._wait = wait
        self._table = table
        self._pause = 0.005
        self._since: float | None = None

    def progress(self) -> None:
        self._pause = 0.005
        self._since = None

    def pause(self, holders: Mapping[bytes, bytes | None]) -> None:
        now = time.monotonic()
        if self._since is None:
            self._since = now
        elif self._wait and (now - self._since) * 1000 > self._wait:
            named = ", ".join(
                f"{name.decode(errors='replace')} by {(value or b'').decode(errors='replace')}"
                for name, value in holders.items()
            )
            raise StoreError(
                f"{self._table}: leases held by other writers for more than {self._wait} ms"
                f" (NUTCH_HBASE_LOCK_TIMEOUT): {named}"
            )
        time.sleep(self._pause)
        self._pause = min(self._pause * 2, 0.5)


class LeaseKeeper:
    """Renews the leases it is given, every third of the lease time, from a daemon thread, and
    releases those still held when the ``with`` block it opens ends.

    Every call on a lease (renew, check, release) runs under one lock, so a renewal never races
    the release of the same lease.
    """

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._held: list[Lease] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            held, self._held = self._held, []
            for lease in held:
                try:
                    self._leases.release(lease)
                except StoreError as exc:  # it expires on its own
                    logger.warning("Could not release the lease %r: %s", lease.name, exc)

    @property
    def held(self) -> Iterator[Lease]:
        return iter(list(self._held))

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._held.append(lease)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._renew_loop, name=f"nutchy-lease {self._leases.table}", daemon=True
                )
                self._thread.start()

    def check(self, lease: Lease) -> None:
        """Raise :class:`LeaseLost` unless *lease* is still held for at least half a lease time
        (renewing it now if the thread is late)."""
        with self._lock:
            if lease.lost or (time.monotonic() - lease.confirmed) * 1000 > self._leases.ttl / 2:
                self._leases.renew(lease)

    def release(self, lease: Lease) -> None:
        """Let *lease* go now. A release that fails is no failure of the work it protected,
        which is done: the lease then expires on its own."""
        with self._lock:
            self._held.remove(lease)
            try:
                self._leases.release(lease)
            except StoreError as exc:
                logger.warning("Could not release the lease %r: %s", lease.name, exc)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._leases.ttl / 3000):
            with self._lock:
                for lease in self._held:
                    if lease.lost:
                        continue
                    try:
                        self._leases.renew(lease)
                    except LeaseLost as exc:
                        logger.warning("%s", exc)
                    except Exception as exc:  # noqa: BLE001 - retried at the next tick
                        logger.warning("Could not renew the lease %r: %s", lease.name, exc)
