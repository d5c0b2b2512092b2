"""The WARC process: the fetch's WARC files (``NUTCH_WARC_ENABLED``) written on another core.

warcio builds a record in Python: a WARC-Record-ID, a header list searched and rewritten a
few times, a block digest. For a small page that is a sixth of what the fetch itself costs, and
in a thread of the fetch's process it holds the GIL the reactor needs. :class:`WarcProcess`
runs :class:`~nutchy.warc.WarcFiles` in a process of its own, ``python -m nutchy._warcwork``:
the writer thread of :class:`~nutchy.warc.NutchWarcExtension` sends it each batch of
:class:`~nutchy.warc.Capture` (pickled, through a pipe; the pickling is the only part of the
work left in the fetch's process) and waits for its answer while the reactor goes on fetching.
The process imports warcio and no Scrapy: about 22 MB of memory. It runs at a niceness
:data:`NICENESS` above the fetch's, so that busy cores go to the fetch first.

Messages are pickles, one after the other, on the child's standard input and output: first a
dict of :class:`~nutchy.warc.WarcFiles`'s arguments, answered ``("ready",)``; then
``("write", captures)``, answered ``("ok",)`` once the batch is in the file (flushed), or
``("failed", errno, text)`` when the disk refused it (the batch and every later one are not
written); and ``("close",)``, answered ``("closed", totals)`` once the last file is synced and
renamed. It ignores Ctrl-C (the fetch's process closes it). When the fetch's process dies without
closing it, it flushes what it received and leaves the file under its ``.open`` name.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from nutchy.warc import Capture

__all__ = ["WarcProcess"]

#: Seconds the fetch's process waits for the WARC process to end once it is closed (the last
#: file is synced to the disk first).
CLOSE_TIMEOUT = 60.0

#: How much nicer than the fetch the WARC process runs: when other work keeps the cores busy, the
#: scheduler gives the fetch the CPU first, and the WARC process takes what is left (its queue,
#: ``NUTCH_WARC_QUEUE_SIZE`` answers, pauses the fetch if it falls that far behind).
NICENESS = 10


class WarcProcess:
    """The WARC process (see the module docstring), running as *process*; after :meth:`close`,
    the same totals as :class:`~nutchy.warc.WarcFiles`: :attr:`files`, :attr:`captures`,
    :attr:`records`, :attr:`revisits`. One call at a time (the writer thread's)."""

    def __init__(self, process: subprocess.Popen[bytes], directory: Path) -> None:
        self.process = process
        self.directory = directory
        self.files: list[Path] = []
        self.captures = 0
        self.records = 0
        self.revisits = 0

    @classmethod
    def start(cls, directory: Path, *, prefix: str, max_size: int, gzip_level: int) -> WarcProcess:
        """Start the process and wait until it is ready to write into *directory* (an
        :exc:`OSError` when it cannot start)."""
        process = subprocess.Popen(
            [sys.executable, "-m", "nutchy._warcwork"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        started = cls(process, directory)
        try:
            arguments = {
                "directory": str(directory),
                "prefix": prefix,
                "max_size": max_size,
                "gzip_level": gzip_level,
            }
            started._send(arguments)
            started._receive()
        except BaseException:
            started.kill()
            raise
        return started

    def write_batch(self, captures: list[Capture]) -> None:
        """Write *captures* and flush the file (an :exc:`OSError` when the disk refused)."""
        self._send(("write", captures))
        self._receive()

    def close(self) -> None:
        """Have the process close the file and end; take its totals."""
        try:
            self._send(("close",))
            _, totals = self._receive()
        finally:
            self._end()
        self.files = [Path(name) for name in totals["files"]]
        self.captures = totals["captures"]
        self.records = totals["records"]
        self.revisits = totals["revisits"]

    def kill(self) -> None:
        self.process.kill()
        self._end()

    def _end(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()

    def _send(self, message: object) -> None:
        assert self.process.stdin is not None
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except BrokenPipeError:
            self._gone()

    def _receive(self) -> Any:
        assert self.process.stdout is not None
        try:
            answer = pickle.load(self.process.stdout)
        except EOFError:
            self._gone()
        if answer[0] == "failed":
            raise OSError(answer[1], answer[2])
        return answer

    def _gone(self) -> NoReturn:
        code = self.process.wait()
        raise OSError(f"the WARC process ended with exit code {code}")


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """Answer the messages read from *source* on *sink* until *source* ends or says close."""
    from nutchy.warc import WarcFiles

    arguments = pickle.load(source)
    os.nice(NICENESS)  # the fetch first, when the cores are busy
    files = WarcFiles(Path(arguments.pop("directory")), **arguments)

    def answer(*message: object) -> None:
        pickle.dump(message, sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()

    answer("ready")
    error: OSError | None = None
    while True:
        try:
            message = pickle.load(source)
        except EOFError:  # the fetch's process is gone: keep what was received, as .open
            if error is None:
                with contextlib.suppress(OSError):
                    files.flush()
            return
        if message[0] == "close":
            if error is None:
                try:
                    files.close()
                except OSError as exc:
                    answer("failed", exc.errno, exc.strerror or str(exc))
                    return
            answer(
                "closed",
                {
                    "files": [str(path) for path in files.files],
                    "captures": files.captures,
                    "records": files.records,
                    "revisits": files.revisits,
                },
            )
            return
        if error is None:
            try:
                for capture in message[1]:
                    files.write(capture)
                files.flush()
            except OSError as exc:
                error = exc
        if error is None:
            answer("ok")
        else:
            answer("failed", error.errno, error.strerror or str(error))


def main() -> int:
    from nutchy._parsework import run_child

    return run_child(serve)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
