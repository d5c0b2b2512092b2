"""The inject job: seed files into the web table.

:func:`inject` reads seed files line by line (never a whole file at once), turns each line into
a :class:`~nutchy.core.inject.Seed` with :mod:`nutchy.core.inject`, drops URLs the URL filter
rejects and repeats of a URL met earlier in the same run, and writes the rest in chunks: for each
chunk it applies the merge rule of :func:`~nutchy.core.inject.seed_change`: with the default mode
(a known row is left as it is) one :meth:`~nutchy.store.base.Store.insert_new` writes the rows the
table does not have; with ``-overwrite`` and ``-update`` the job asks the table which rows exist
(one ``get_many``) and writes each row's change. Memory holds one chunk and the
set of row keys seen so far (to drop repeats), whatever the size of the seed files.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from nutchy.core.inject import (
    MAX_LINE_BYTES,
    InjectMode,
    InjectOutcome,
    MalformedSeed,
    RowChange,
    Seed,
    decode_seed_line,
    make_seed,
    parse_seed_line,
    seed_change,
)
from nutchy.core.urlfilter import RegexURLFilter
from nutchy.exceptions import NutchError
from nutchy.jobs import _settings
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import WebTable

__all__ = ["InjectOptions", "InjectResult", "SeedPathError", "inject", "seed_files"]

logger = logging.getLogger(__name__)

#: Malformed lines quoted in the result (the rest are only counted).
MAX_EXAMPLES: Final = 5
#: Characters of a malformed line quoted in the result.
_EXCERPT: Final = 80
#: The most distinct new-row templates kept (see _write_chunk).
_TEMPLATES: Final = 1024
#: The fields read to tell whether a row exists.
_EXISTS_FIELDS: Final = ("fetch_time", "markers")


class SeedPathError(NutchError):
    """The seed path names nothing inject can read: it is missing, or a directory with no seed
    file in it."""


@dataclass(frozen=True, slots=True)
class InjectOptions:
    """The settings inject runs with.

    *fetch_interval* and *score* are the defaults for seeds that give none
    (``NUTCH_DB_FETCH_INTERVAL_DEFAULT``, ``NUTCH_DB_SCORE_INJECTED``); *url_filter* rejects
    URLs (``None``: no filtering); *mode* says what to do to URLs already in the table.
    """

    fetch_interval: int
    score: float
    url_filter: RegexURLFilter | None
    mode: InjectMode = InjectMode.KEEP

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, *, mode: InjectMode = InjectMode.KEEP, filter_urls: bool = True
    ) -> InjectOptions:
        return cls(
            fetch_interval=_settings.get_int(settings, "NUTCH_DB_FETCH_INTERVAL_DEFAULT", 1),
            score=_settings.get_float(settings, "NUTCH_DB_SCORE_INJECTED"),
            url_filter=_settings.url_filter(settings) if filter_urls else None,
            mode=mode,
        )


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """A seed line that was not injected: where it is, how it starts, and why."""

    path: str
    line_number: int
    excerpt: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_number}: {self.reason}: {self.excerpt}"


@dataclass(slots=True)
class InjectResult:
    """What inject did.

    *lines* counts every line read, blank and comment lines included. Each seed line ends in
    exactly one of *injected*, *known*, *overwritten*, *updated*, *duplicates* (the URL came
    earlier in this run), *filtered* and *malformed*; the first :data:`MAX_EXAMPLES` malformed
    lines are quoted in *malformed_lines*. *unreadable* lists files that could not be opened.
    """

    #: Whether inject created the table, which was missing.
    created_table: bool = False
    files: int = 0
    lines: int = 0
    injected: int = 0
    known: int = 0
    overwritten: int = 0
    updated: int = 0
    duplicates: int = 0
    filtered: int = 0
    malformed: int = 0
    malformed_lines: list[MalformedLine] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def outcomes(self) -> list[tuple[str, int]]:
        """How many seed lines ended each way, by the name reports give it."""
        return [
            ("injected", self.injected),
            ("already known", self.known),
            ("overwritten", self.overwritten),
            ("updated", self.updated),
            ("duplicates", self.duplicates),
            ("filtered", self.filtered),
            ("malformed", self.malformed),
        ]

    @property
    def written(self) -> int:
        """Rows written: injected, overwritten and updated."""
        return self.injected + self.overwritten + self.updated


def seed_files(path: str | os.PathLike[str]) -> list[Path]:
    """The seed files at *path*: the file itself, or the files of a directory.

    As in Nutch (through Hadoop's input format), a directory's regular files are read, not its
    subdirectories, and names starting with ``.`` or ``_`` are skipped (hidden files, ``_SUCCESS``
    markers). Files come in name order. :class:`SeedPathError` if there is nothing to read.
    """
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.exists():
        raise SeedPathError(f"seed path {str(root)!r} does not exist")
    if not root.is_dir():
        raise SeedPathError(f"seed path {str(root)!r} is neither a file nor a directory")
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise SeedPathError(f"seed directory {str(root)!r} holds no seed file")
    return files


def inject(
    table: WebTable,
    files: Sequence[Path],
    options: InjectOptions,
    *,
    now: int,
    chunk_size: int = 20_000,
    workers: int | None = None,
    progress: Progress | None = None,
) -> InjectResult:
    """Inject the seeds of *files* into *table* at time *now* (ms); create the table if needed.

    Rows are written in chunks of *chunk_size* seeds, one store write (one transaction on the
    embedded store) per chunk, in key order; a failure of the store stops the job, and the
    chunks written before it stay written (inject can simply be run again: with the default
    mode, seeds already injected are kept as they are).

    *workers* processes parse, normalize and filter the lines beside this one, which does the
    rest (repeats, the merge rule, the writes) on their answers, taken in line order: the
    result is the same with any number of workers. ``0`` parses here; ``None`` (the default)
    uses one process per CPU but one (at most 3) when the seed files hold at least
    :data:`PARALLEL_BYTES` and the machine has more than one CPU, and none otherwise.
    """
    if chunk_size < 1:
        raise ValueError(f"'chunk_size' must be >= 1, got {chunk_size!r}")
    if workers is not None and workers < 0:
        raise ValueError(f"'workers' must be >= 0 or None, got {workers!r}")
    result = InjectResult(created_table=table.create())
    if workers is None:
        workers = _default_workers(files)
    seen: set[str] = set()
    chunk: list[Seed] = []
    templates: dict[tuple[float | None, int | None, tuple[tuple[str, str], ...]], RowUpdate] = {}
    with _Parser(options.url_filter, workers, chunk_size) as parser:
        for path in files:
            try:
                handle = path.open("rb")
            except OSError as exc:
                result.unreadable.append(f"{path}: {exc.strerror or exc}")
                logger.warning("Cannot read seed file %s: %s", path, exc)
                continue
            result.files += 1
            failed: list[tuple[int, OSError]] = []
            with handle:
                lines = _numbered_lines(handle, progress, failed)
                for number, raw, parsed in parser.parse(lines):
                    result.lines += 1
                    if parsed is None:
                        continue
                    if isinstance(parsed, int):  # _FILTERED
                        result.filtered += 1
                        continue
                    if isinstance(parsed, str):
                        result.malformed += 1
                        if len(result.malformed_lines) < MAX_EXAMPLES:
                            result.malformed_lines.append(
                                MalformedLine(str(path), number, _excerpt(raw), parsed)
                            )
                        continue
                    if parsed.key in seen:
                        result.duplicates += 1
                        continue
                    seen.add(parsed.key)
                    chunk.append(parsed)
                    if len(chunk) >= chunk_size:
                        _write_chunk(table, chunk, options, now, result, templates)
                        chunk = []
            for last, error in failed:  # the lines before it are kept; the next file is read
                why = error.strerror or str(error)
                result.unreadable.append(f"{path}: line {last + 1}: {why}")
                logger.warning("Cannot read seed file %s at line %d: %s", path, last + 1, why)
        if chunk:
            _write_chunk(table, chunk, options, now, result, templates)
    return result


#: Seed files smaller than this (in all) are parsed in the job's own process by default.
PARALLEL_BYTES: Final = 8 << 20
#: Lines sent to a worker at a time, and the fewest batches of lines in flight per worker.
_BATCH_LINES: Final = 2000
_IN_FLIGHT: Final = 4
#: What :func:`_parse_lines` gives for a line the URL filter rejects.
_FILTERED: Final = 0

#: A parsed line: a seed, ``None`` (blank or comment), :data:`_FILTERED`, or why it is malformed.
Parsed = Seed | None | int | str


def _default_workers(files: Sequence[Path]) -> int:
    cpus = os.cpu_count() or 1
    if cpus < 2:
        return 0
    size = sum(_size(path) for path in files)
    return min(cpus - 1, 3) if size >= PARALLEL_BYTES else 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # reported when the file is opened
        return 0


def _parse_lines(raws: list[bytes], url_filter: RegexURLFilter | None) -> list[Parsed]:
    """Parse, normalize and filter seed lines (in a worker process, or in the job's own)."""
    parsed: list[Parsed] = []
    for raw in raws:
        try:
            line = parse_seed_line(decode_seed_line(raw))
            if line is None:
                parsed.append(None)
                continue
            seed = make_seed(line)
        except MalformedSeed as exc:
            parsed.append(str(exc))
            continue
        if url_filter is not None and not url_filter.accepts(seed.url):
            parsed.append(_FILTERED)
        else:
            parsed.append(seed)
    return parsed


_worker_filter: RegexURLFilter | None = None


def _start_worker(url_filter: RegexURLFilter | None) -> None:
    global _worker_filter  # the state of a worker process, set once when it starts
    _worker_filter = url_filter


def _parse_in_worker(raws: list[bytes]) -> list[Parsed | tuple[Any, ...]]:
    # Seeds travel as plain tuples: pickling a frozen dataclass runs Python code for every
    # object on both sides (about 13 µs a seed against 2 µs for its tuple).
    return [
        (p.url, p.key, p.score, p.fetch_interval, p.metadata) if type(p) is Seed else p
        for p in _parse_lines(raws, _worker_filter)
    ]


def _from_worker(parsed: Parsed | tuple[Any, ...]) -> Parsed:
    return Seed(*parsed) if isinstance(parsed, tuple) else parsed


class _Parser:
    """Parses numbered seed lines, here or in *workers* processes, and gives them back in order.

    Lines go to the workers in batches, a few batches per worker at a time, so memory holds a
    bounded part of a file whatever its size. The lines in flight cover two chunks of
    *chunk_size* lines, so the workers parse the next chunk while the job's process writes one
    (with less in flight they sat idle through every write).
    """

    def __init__(
        self, url_filter: RegexURLFilter | None, workers: int, chunk_size: int = 20_000
    ) -> None:
        self.url_filter = url_filter
        self.pool: ProcessPoolExecutor | None = None
        if workers:
            # Forked where possible (the job's process runs no other thread): a spawned worker
            # would import the caller's main module again, which breaks scripts that call
            # inject() without an ``if __name__ == "__main__"`` guard.
            methods = multiprocessing.get_all_start_methods()
            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("fork" if "fork" in methods else None),
                initializer=_start_worker,
                initargs=(url_filter,),
            )
            self.in_flight = max(workers * _IN_FLIGHT, -(-2 * chunk_size // _BATCH_LINES))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def parse(self, lines: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, Parsed]]:
        if self.pool is None:
            for number, raw in lines:
                yield number, raw, _parse_lines([raw], self.url_filter)[0]
            return
        pending: deque[tuple[list[tuple[int, bytes]], Future[list[Parsed | tuple[Any, ...]]]]] = (
            deque()
        )
        while True:
            batch = list(islice(lines, _BATCH_LINES))
            if batch:
                future = self.pool.submit(_parse_in_worker, [raw for _, raw in batch])
                pending.append((batch, future))
            if pending and (not batch or len(pending) >= self.in_flight):
                done, future = pending.popleft()
                for (number, raw), parsed in zip(done, future.result(), strict=True):
                    yield number, raw, _from_worker(parsed)
            if not batch and not pending:
                return


def _numbered_lines(
    handle: IO[bytes], progress: Progress | None, failed: list[tuple[int, OSError]]
) -> Iterator[tuple[int, bytes]]:
    """The lines of *handle*, numbered from 1. A line longer than the limit is cut short after
    ``MAX_LINE_BYTES + 1`` bytes (enough to be refused) and the rest of it is skipped unread. A
    read that fails (EIO: a bad disk sector, a network file system gone) ends the lines, and
    is added to *failed* with the number of the last line read."""
    number = 0
    position = 0
    while True:
        try:
            raw = handle.readline(MAX_LINE_BYTES + 3)
            if len(raw) == MAX_LINE_BYTES + 3 and not raw.endswith(b"\n"):
                while rest := handle.readline(1 << 20):
                    position += len(rest)
                    if rest.endswith(b"\n"):
                        break
        except OSError as exc:
            failed.append((number, exc))
            return
        if not raw:
            return
        number += 1
        position += len(raw)
        if progress is not None:
            progress.advance(1, position)
        yield number, raw


#: The user information of something shaped like a URL (``scheme://user:password@``, or with
#: the scheme's colon or slashes mistyped), which a quoted line must not show.
_CREDENTIALS: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*(?::/*|/+))[^\s/@]+@")


def redact(text: str) -> str:
    """*text* with the user and password of the URLs in it replaced by ``***``, so that a seed
    line quoted in a log or a message does not give them away.

    >>> redact("http://user:secret@example.com/ ftp//bob:pw@h/ mailto me@example.com")
    'http://***@example.com/ ftp//***@h/ mailto me@example.com'
    """
    return _CREDENTIALS.sub(r"\1***@", text)


def _excerpt(raw: bytes) -> str:
    text = redact(raw.rstrip(b"\r\n")[: _EXCERPT * 4].decode("utf-8", "backslashreplace"))
    shown = repr(text[:_EXCERPT])
    return shown + ("…" if len(text) > _EXCERPT else "")


def _write_chunk(
    table: WebTable,
    chunk: list[Seed],
    options: InjectOptions,
    now: int,
    result: InjectResult,
    templates: dict[tuple[float | None, int | None, tuple[tuple[str, str], ...]], RowUpdate],
) -> None:
    # In key order: the rows land side by side in the store's key index (and in HBase regions).
    chunk.sort(key=_key_of)

    def new_row(seed: Seed) -> RowUpdate:
        # A new row's cells depend only on the score, the interval and the metadata of its
        # line, so they are encoded once and shared (no store modifies the cells of an update,
        # and the stores sort shared cells out once).
        template = templates.get((seed.score, seed.fetch_interval, seed.metadata))
        if template is None:
            if len(templates) >= _TEMPLATES:
                templates.clear()  # lines with metadata of their own: do not keep them all
            template = _update(seed, False, options, now)
            templates[seed.score, seed.fetch_interval, seed.metadata] = template
        return RowUpdate(seed.key.encode(), template.puts)

    if options.mode is InjectMode.KEEP:
        # A known row is left as it is: the store writes the rows it does not have, without
        # reading them first.
        written = table.store.insert_new([new_row(seed) for seed in chunk])
        result.injected += written
        result.known += len(chunk) - written
        return
    existing = table.get_many([seed.key for seed in chunk], _EXISTS_FIELDS)
    updates: list[RowUpdate] = []
    for seed in chunk:
        exists = seed.key in existing
        if not exists:
            updates.append(new_row(seed))
            result.injected += 1
            continue
        change = _change(seed, exists, options, now)
        if change.outcome is InjectOutcome.KNOWN:
            result.known += 1
            continue
        updates.append(build_update(seed.key, change.fields, change.entries))
        if change.outcome is InjectOutcome.INJECTED:
            result.injected += 1
        elif change.outcome is InjectOutcome.OVERWRITTEN:
            result.overwritten += 1
        else:
            result.updated += 1
    if updates:
        table.store.write(updates)


def _key_of(seed: Seed) -> str:
    return seed.key


def _change(seed: Seed, exists: bool, options: InjectOptions, now: int) -> RowChange:
    return seed_change(
        seed,
        exists=exists,
        mode=options.mode,
        now=now,
        fetch_interval=options.fetch_interval,
        score=options.score,
    )


def _update(seed: Seed, exists: bool, options: InjectOptions, now: int) -> RowUpdate:
    change = _change(seed, exists, options, now)
    return build_update(seed.key, change.fields, change.entries)
