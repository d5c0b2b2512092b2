"""Region-parallel jobs: a job's scan cut into key ranges, each range scanned by one task.

HBase keeps a table in regions, key ranges each served by one region server, and Nutch 2.x runs
one map task per region. The jobs that scan the table (readdb, parse, generate, updatedb) do the
same with ``-numTasks K``: :func:`run` cuts the key space into ranges, the table's regions
(:meth:`~nutchy.store.base.Store.splits`) or, on the embedded store, which has none, *K* ranges of
about as many rows each (:meth:`~nutchy.store.embedded.EmbeddedStore.sample_splits`); *K* worker
processes take the ranges one at a time, each opening the table itself, and send back one result
per range, which the job merges in key order.

The tasks are processes, not threads. A scan's client side is Python that holds the GIL: reading
``readdb -stats``'s columns costs the client 22-30 µs a row on HBase (happybase's decoding and
nutchy's), 16-20 µs on the embedded store (its lock also serializes the reads of one store
object), so threads cap one process at 35,000-45,000 rows/s whatever the region servers could
serve, and parse, whose client work is milliseconds a page, gains nothing from them. Processes
scale with cores, and a task that opens the table from the settings alone is what one machine
of several runs as well (docs/storage.md, "Several processes, several machines").

Each worker gets only the ``NUTCH_*`` settings (what opening the table and configuring a job
read) and rebuilds the job's configuration from them, as a Nutch task reads the job's
configuration; the work function and its other arguments must pickle. The workers start from a
clean interpreter (the ``forkserver`` start method, or ``spawn`` where there is none), never by
forking a process that holds sockets, SQLite connections and threads.
"""

from __future__ import annotations

import itertools
import pickle
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from nutchy.exceptions import NutchError

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from scrapy.settings import BaseSettings

    from nutchy.store.base import Store
    from nutchy.store.table import WebTable

__all__ = [
    "KeyRange",
    "Tasks",
    "group_ranges",
    "key_ranges",
    "key_text",
    "parse_key",
    "run",
    "table_splits",
]

R = TypeVar("R")

#: A key range ``(start, stop)``: *start* inclusive, *stop* exclusive (``None``: to the end).
KeyRange = tuple[bytes, bytes | None]

#: What a task runs for one range: ``work(table, settings, start, stop)``.
Work = Callable[["WebTable", "BaseSettings", bytes, "bytes | None"], R]


@dataclass(frozen=True, slots=True)
class Tasks:
    """How a job scans the table: in *count* tasks at once (``-numTasks``), each a process
    that opens the table with *settings* (the ``NUTCH_*`` settings, as plain values), over the
    keys from *start* to *stop* (``-range``; the whole table by default).

    With *count* 1 the job scans its keys in one range, in the calling process, on the table it
    was given, as it does without tasks.
    """

    count: int = 1
    settings: Mapping[str, Any] = field(default_factory=dict)
    start: bytes = b""
    stop: bytes | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"'count' must be >= 1, got {self.count!r}")

    @classmethod
    def from_settings(
        cls,
        settings: BaseSettings,
        count: int = 1,
        key_range: tuple[str, str] | None = None,
    ) -> Tasks:
        """*count* tasks opening the table that *settings* name, over *key_range* (two keys as
        :func:`key_text` writes them, ``""`` for an open end) when given.

        A key that does not parse, or a range that ends before it starts, raises
        :exc:`~nutchy.exceptions.NutchError`.
        """
        values = {
            name: value
            for name, value in settings.copy_to_dict().items()
            if name.startswith("NUTCH_")
        }
        if key_range is None:
            return cls(count, values)
        start, stop = parse_key(key_range[0]), parse_key(key_range[1]) or None
        if stop is not None and stop <= start:
            raise NutchError(
                f"the range from {key_range[0]!r} to {key_range[1]!r} is empty:"
                " its stop key must sort after its start key"
            )
        return cls(count, values, start, stop)


def key_ranges(
    store: Store, count: int, start: bytes = b"", stop: bytes | None = None
) -> list[KeyRange]:
    """The ranges a job of *count* tasks scans between *start* and *stop*: the store's regions,
    or on a store that has one range and can sample its keys (the embedded store), *count*
    ranges of about equal size; each cut to *start* and *stop*. One range when *count* is 1."""
    if count == 1:
        return [(start, stop)]
    ranges = store.splits()
    sample: Callable[[int], list[KeyRange]] | None = getattr(store, "sample_splits", None)
    if len(ranges) == 1 and sample is not None:
        ranges = sample(count)
    clipped = []
    for low, high in ranges:
        low = max(low, start)
        if stop is not None and (high is None or stop < high):
            high = stop
        if high is None or low < high:
            clipped.append((low, high))
    return clipped or [(start, stop)]


def table_splits(store: Store, count: int | None = None) -> list[KeyRange]:
    """The ranges ``nutchy storage splits`` prints: the store's regions, joined into at most
    *count* ranges of about as many regions each when *count* is given (on the embedded store,
    *count* ranges of about as many rows each)."""
    if count is None:
        return store.splits()
    return group_ranges(key_ranges(store, count), count)


def group_ranges(ranges: list[KeyRange], count: int) -> list[KeyRange]:
    """*ranges* (in key order, each starting where the one before stops) joined into at most
    *count* ranges of about as many of them each.

    >>> group_ranges([(b"", b"b"), (b"b", b"d"), (b"d", b"f"), (b"f", None)], 3)
    [(b'', b'b'), (b'b', b'd'), (b'd', None)]
    """
    n = len(ranges)
    bounds = sorted({n * i // count for i in range(count)} | {n})
    return [(ranges[i][0], ranges[j - 1][1]) for i, j in itertools.pairwise(bounds) if j > i]


def key_text(key: bytes) -> str:
    r"""*key* as HBase's shell writes keys (``Bytes.toStringBinary``): printable ASCII as it is,
    every other byte and the backslash as ``\xNN``.

    >>> key_text(b"com.example:http/a b"), key_text(b"\\\x00\xe9")
    ('com.example:http/a b', '\\x5C\\x00\\xE9')
    """
    return "".join(
        chr(byte) if 32 <= byte < 127 and byte != 92 else f"\\x{byte:02X}" for byte in key
    )


def parse_key(text: str) -> bytes:
    r"""The key *text* writes as :func:`key_text` writes it (non-ASCII characters as UTF-8).

    >>> parse_key(r"com.example:http/\x00\xe9é") == b"com.example:http/\x00\xe9\xc3\xa9"
    True
    """
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\":
            digits = text[i + 2 : i + 4]
            if text[i + 1 : i + 2] != "x" or len(digits) != 2:
                raise NutchError(f"bad key {text!r}: a backslash starts \\xNN (two hex digits)")
            try:
                out.append(int(digits, 16))
            except ValueError:
                raise NutchError(f"bad key {text!r}: \\x{digits} is not two hex digits") from None
            i += 4
        else:
            out += text[i].encode("utf-8")
            i += 1
    return bytes(out)


def run(
    table: WebTable,
    tasks: Tasks,
    work: Work[R],
    *,
    local: Work[R] | None = None,
    on_result: Callable[[R], None] | None = None,
) -> list[R]:
    """Run *work* over the key ranges of *table* (see :func:`key_ranges`) in ``tasks.count``
    processes, and return its results in key order; *on_result* is called with the result of
    each worker process as it arrives (to show progress).

    One range (one task, or a table of one region) runs here, on *table*, with *local* when
    given instead of *work* (the same work, with what only this process has: a progress line,
    an open file). The first task that
    fails ends the others and its error is raised here: a :exc:`~nutchy.exceptions.NutchError`
    with its own message (its traceback stays in the worker), anything else with the worker's
    traceback as its cause.
    """
    ranges = key_ranges(table.store, tasks.count, tasks.start, tasks.stop)
    if len(ranges) == 1:
        return [(local or work)(table, _settings(tasks.settings), *ranges[0])]
    jobs = [(i, work, tasks.settings, start, stop) for i, (start, stop) in enumerate(ranges)]
    results: list[Any] = [None] * len(ranges)
    pool = _context().Pool(min(tasks.count, len(ranges)), initializer=_ignore_interrupts)
    try:
        for i, result in pool.imap_unordered(_run_range, jobs):
            results[i] = result
            if on_result is not None:
                on_result(result)
    except BaseException:
        pool.terminate()  # the first failure (or Ctrl-C) ends the tasks still running
        raise
    else:
        pool.close()
    finally:
        pool.join()
    return results


def _context() -> BaseContext:
    # Here rather than above: the parse process imports this module and starts no pool.
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        # Workers fork from a server that has imported what every task needs, once.
        context.set_forkserver_preload(["nutchy.jobs._regions", "nutchy.store", "nutchy.config"])
        return context
    return multiprocessing.get_context("spawn")


def _ignore_interrupts() -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _settings(values: Mapping[str, Any]) -> BaseSettings:
    from nutchy.config import load_settings

    return load_settings(values, project=False)


def _run_range(
    job: tuple[int, Work[R], Mapping[str, Any], bytes, bytes | None],
) -> tuple[int, R]:
    """One task's range, in a worker process: open the table, run the work, close the table."""
    from nutchy.store import open_table

    index, work, values, start, stop = job
    settings = _settings(values)
    try:
        with open_table(settings) as table:
            return index, work(table, settings, start, stop)
    except NutchError as exc:
        raise _portable(exc) from None


def _portable(exc: NutchError) -> NutchError:
    """*exc*, or one with its message when it would not survive the trip to the parent (an
    error whose constructor takes more than its message)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - whatever fails, the message still gets through
        return NutchError(str(exc))
    return exc
