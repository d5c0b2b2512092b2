"""The batches ``nutchy crawl`` has under way, noted in the crawl directory so that a crawl that
was killed (``kill -9``, a power cut, the machine's OOM killer) can be finished by the next.

Each round of ``nutchy crawl`` keeps a small file, ``<crawl dir>/unfinished/<table>.<batch>``,
from before its generate writes a mark until its updatedb has ended. The file says which phase
the round is in (``generate``, ``fetch``, ``finish``: parse and updatedb) and how the batch is
split into partitions, and the crawl holds an exclusive ``flock`` on it the whole time. The system
releases that lock when the process ends, however it ends: a file that another process can lock
is the round of a crawl that is gone, and the next ``nutchy crawl`` of the same table takes it
over and finishes the batch before it generates one (:mod:`nutchy.jobs.crawl`). A file still
locked belongs to a crawl at work on the table, whose batch is left to it.

Why a file rather than a scan for generate marks without an updatedb mark: the marks say neither
whether a process is still at work on the batch (two crawls can share a table) nor whether a
generate ended (a generate killed half way has marked part of its batch, which a new generate
must select whole, or the batch would not be the one an uninterrupted crawl makes).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: The phases of a round, in order: what a crawl that takes the round over does first.
GENERATE: Final = "generate"
FETCH: Final = "fetch"
FINISH: Final = "finish"
PHASES: Final = (GENERATE, FETCH, FINISH)


@dataclass
class Round:
    """A round of ``nutchy crawl`` in its file, which this process holds locked."""

    path: Path
    batch_id: str
    phase: str
    #: the URLs of each partition of the batch (one partition unless ``-numFetchers``)
    partitions: list[int]
    _handle: int

    @classmethod
    def start(cls, directory: Path, table: str, batch_id: str) -> Round:
        """Note the round of *batch_id* on *table*, in its ``generate`` phase, locked."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{table}.{batch_id}"
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(handle, fcntl.LOCK_EX)
        started = cls(path, batch_id, GENERATE, [], handle)
        started.enter(GENERATE)
        return started

    def enter(self, phase: str, partitions: list[int] | None = None) -> None:
        """Note that the round is now in *phase* (with the batch's *partitions*, when given)."""
        self.phase = phase
        if partitions is not None:
            self.partitions = list(partitions)
        data = json.dumps(
            {"batch": self.batch_id, "phase": phase, "partitions": self.partitions}
        ).encode()
        # Written over the old text, then cut to its length: a process killed in between leaves
        # the new text followed by the old one's tail, which reading ignores.
        os.pwrite(self._handle, data, 0)
        os.ftruncate(self._handle, len(data))

    def done(self) -> None:
        """The batch is updated: remove the file (while it is locked), then let it go."""
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        """Let the file go, left for the next crawl (the batch is not finished)."""
        if self._handle >= 0:
            os.close(self._handle)  # and with it the lock
            self._handle = -1


def take_over(directory: Path, table: str) -> list[Round]:
    """The rounds on *table* that crawls which are gone left unfinished, oldest batch first, each
    now locked by this process. Files locked by a live crawl are left alone; a file that says
    nothing readable (its crawl was killed as it created it, before any mark was written) is
    removed."""
    rounds: list[Round] = []
    if not directory.is_dir():
        return rounds
    prefix = f"{table}."
    for path in sorted(directory.iterdir()):
        batch_id = path.name.removeprefix(prefix)
        if not path.name.startswith(prefix) or not batch_id or "." in batch_id:
            continue
        try:
            handle = os.open(path, os.O_RDWR)
        except FileNotFoundError:  # finished by its crawl meanwhile
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a crawl at work on it
            os.close(handle)
            continue
        if not path.exists():  # the crawl that held it finished it and removed it
            os.close(handle)
            continue
        found = _read(handle, batch_id)
        if found is None:
            path.unlink(missing_ok=True)
            os.close(handle)
            continue
        phase, partitions = found
        rounds.append(Round(path, batch_id, phase, partitions, handle))
    rounds.sort(key=lambda r: r.batch_id)  # batch ids start with their time
    return rounds


def _read(handle: int, batch_id: str) -> tuple[str, list[int]] | None:
    """The phase and partitions in an open round file, or ``None`` if it holds none."""
    text = os.pread(handle, 1 << 16, 0).decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        data, _ = json.JSONDecoder().raw_decode(text)
        if isinstance(data, dict) and data.get("batch") == batch_id:
            phase = data.get("phase")
            partitions = data.get("partitions")
            if (
                phase in PHASES
                and isinstance(partitions, list)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in partitions)
            ):
                return phase, partitions
    return None
