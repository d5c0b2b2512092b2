"""The parse process: the fetch's parse (``NUTCH_FETCHER_PARSE``) on another core.

The parse (lxml, link selection, the signature) holds the GIL for about a millisecond a page.
In a thread of the fetch's process, it takes turns with Scrapy's reactor for one core, and the fetch
waits for the parse. :class:`ParseProcess` runs the parse in a process of its own,
``python -m nutchy._parsework``, started with the pipeline (before the spider opens): the fetch's process sends
it the pages (:class:`~nutchy._pageparse.FetchedPage`, content as bytes) through a pipe, and
gets back their items' fields and what was counted. The process opens the table itself, reads
the pages' rows, and writes their parse columns as the pipeline in a thread does
(:class:`~nutchy._pageparse.PageParser`: every ``NUTCH_FETCHER_FLUSH_SIZE`` pages, at the end
of a batch and on close).

It imports no Scrapy and no Twisted (the core, the store, lxml: some 30 MB of memory less than
a process importing Scrapy): the fetch's process sends it what it makes of the settings rather
than the settings, the store's class and arguments (:func:`nutchy.store.table_opener`) and the
parser's (:meth:`~nutchy._pageparse.PageParser.options`), and gets the items back as dicts.

It ignores Ctrl-C (the fetch's process, which gets it too, shuts down and closes it) and ends
when its input ends. When the fetch's process dies without closing it, the parses it held are
not written, as they would not be in a thread: ``nutchy parse ID -resume`` parses those pages.

Messages are pickles, one after the other, on the child's standard input and output: first
``(open_table, options)``, then ``("parse", pages, write, shares)`` answered by ``("ok", fields,
stats, error, outcomes)`` (or ``("failed", text)``), ``("shares", batch_id)`` answered by ``("ok",
shares)``, and ``("close",)``, answered once the table is closed.

With *shares*, once it has answered, the process keeps what updatedb needs of the pages whose
parses it wrote (:class:`~nutchy.jobs.updatedb.ParsedShares`): their outlinks, and the cash and
distance of their rows, read with the rest. This is updatedb's first read, on this core,
during the fetch, rather than in the process that runs updatedb after the fetch.
``("shares", batch_id)`` gives them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NoReturn, cast

from nutchy._memory import release_memory
from nutchy.exceptions import StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.settings import BaseSettings

    from nutchy._pageparse import FetchedPage
    from nutchy.store.table import WebTable

__all__ = ["ParseProcess"]

#: Seconds the fetch's process waits for the parse process to end once it is closed.
CLOSE_TIMEOUT = 30.0


class ParseProcess:
    """The parse process (see the module docstring), running as *process*.

    :meth:`parse` and :meth:`close` block (the pipeline calls them in threads). Several
    :meth:`parse` calls may be under way at once, each in a thread of its own: they are sent
    in turn and answered in the order they were sent, so the process finds the next pages in
    its pipe as soon as it has answered. :meth:`close` comes after the last.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        #: held while a call is sent, and until it is next to read its answer
        self._sending = threading.Lock()
        #: held while an answer is read
        self._receiving = threading.Lock()

    @classmethod
    def start(cls, settings: BaseSettings) -> ParseProcess:
        """Start the process and have it open the table and make the parser of *settings*."""
        process = subprocess.Popen(
            [sys.executable, "-m", "nutchy._parsework"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        started = cls(process)
        try:
            started.begin(settings)
        except BaseException:
            started.kill()
            raise
        return started

    def begin(self, settings: BaseSettings) -> None:
        """Send the process, first, what it opens the table of *settings* with and the
        parser's arguments."""
        from nutchy._pageparse import PageParser
        from nutchy.store import table_opener

        self._send((table_opener(settings), PageParser.options(settings)))

    def parse(
        self, pages: Sequence[FetchedPage], write: bool, *, shares: bool = False
    ) -> tuple[list[dict[str, Any]], dict[str, int], str | None, tuple[list[str], list[str]]]:
        """Parse *pages* (and write what is held when *write*) in the process: their items'
        fields, the stats counted, the store error met (see
        :meth:`~nutchy._pageparse.PageParser.take`) and the keys of the rows whose fetch
        outcome was written or could not be (:meth:`~nutchy._pageparse.PageParser.take_outcomes`).
        With *shares*, the process keeps updatedb's shares of the pages once their parses are
        written (:meth:`~nutchy._pageparse.PageParser.read_shares`), for :meth:`shares`."""
        from nutchy._pageparse import FetchedPage

        # The pages as the parser's own class: a subclass (the spider's item) would pickle
        # as a class of a module that imports Scrapy, with what it holds of this process.
        plain = [p if type(p) is FetchedPage else _plain(p) for p in pages]
        _, items, stats, error, outcomes = self._call(("parse", plain, write, shares))
        return items, stats, error, outcomes

    def shares(self, batch_id: str) -> list[Any]:
        """The shares the process kept of *batch_id*'s pages
        (:meth:`~nutchy._pageparse.PageParser.take_shares`)."""
        return self._call(("shares", batch_id))[1]  # type: ignore[no-any-return]

    def _call(self, message: tuple[Any, ...]) -> tuple[Any, ...]:
        """Send *message* and return its answer (``("ok", ...)``)."""
        with self._sending:
            self._send(message)
            # The answers come in the order of the calls: this one's is read after those of
            # the calls sent before it.
            self._receiving.acquire()
        try:
            answer = self._receive()
        finally:
            self._receiving.release()
        if answer[0] != "ok":
            raise RuntimeError(f"the parse process failed: {answer[1]}")
        return answer  # type: ignore[no-any-return]

    def close(self) -> None:
        """Have the process close the table and end; wait for it."""
        try:
            self._send(("close",))
            self._receive()
        except (OSError, EOFError, RuntimeError):
            pass  # gone already: nothing to close
        finally:
            assert self.process.stdin is not None
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
            assert self.process.stdout is not None
            self.process.stdout.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a pipe to a process gone: nothing to flush
                    pipe.close()

    def _send(self, message: object) -> None:
        assert self.process.stdin is not None
        pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self.process.stdin.flush()

    def _receive(self) -> Any:
        assert self.process.stdout is not None
        try:
            return pickle.load(self.process.stdout)
        except EOFError:
            code = self.process.wait()
            raise RuntimeError(f"the parse process ended with exit code {code}") from None


def _plain(page: FetchedPage) -> FetchedPage:
    from nutchy._pageparse import FetchedPage

    return FetchedPage(**{f.name: getattr(page, f.name) for f in dataclasses.fields(FetchedPage)})


class _Unreachable:
    """The table, when the store could not be opened: every read and write fails with *error*."""

    def __init__(self, error: StoreError) -> None:
        self.error = error

    def get_many(self, *args: object) -> NoReturn:
        raise self.error

    def write(self, *args: object) -> NoReturn:
        raise self.error

    def close(self) -> None:
        pass


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """Answer the messages read from *source* on *sink* until *source* ends or says close."""
    # Here rather than above: the WARC process runs this module's run_child, and needs none
    from nutchy._pageparse import PageParser

    open_table: Callable[[], WebTable]
    open_table, options = pickle.load(source)
    try:
        table = open_table()
    except StoreError as exc:
        # Each parse then counts its pages as not written, and says why once, as a store gone
        # away does to the pipeline in a thread.
        table = cast("WebTable", _Unreachable(exc))
    parser = PageParser(table, **options)
    # What the imports and the opening made lives as long as the process: frozen out of the
    # cyclic collector's generations, it is not gone over again by the collections during the
    # parses (the collector's time in a re-crawl of 200 pages, 4 alternated pairs: 0.04-0.07 s
    # -> 0.02-0.04 s of this process's 0.7-1.0 s of CPU; docs/benchmarks.md).
    gc.freeze()
    closed = False
    try:
        while True:
            try:
                message = pickle.load(source)
            except EOFError:
                return  # the fetch's process is gone: what is held is not written
            if message[0] == "close":
                parser.process([], write=True)
                parser.table.close()
                closed = True
                pickle.dump(("closed",), sink)
                sink.flush()
                return
            if message[0] == "shares":
                try:
                    answer: tuple[Any, ...] = ("ok", parser.take_shares(message[1]))
                except Exception as exc:
                    logging.getLogger(__name__).exception("Cannot give the shares kept")
                    answer = ("failed", f"{type(exc).__name__}: {exc}")
                pickle.dump(answer, sink, protocol=pickle.HIGHEST_PROTOCOL)
                sink.flush()
                continue
            _, pages, write, shares = message
            try:
                items = parser.process(pages, write, shares=shares)
            except Exception as exc:
                logging.getLogger(__name__).exception("Cannot parse %d pages", len(pages))
                answer = ("failed", f"{type(exc).__name__}: {exc}")
            else:
                answer = ("ok", items, *parser.take(), parser.take_outcomes())
                if write:  # the end of a batch, or of a fetch
                    release_memory()
            pickle.dump(answer, sink, protocol=pickle.HIGHEST_PROTOCOL)
            sink.flush()
            # updatedb's shares of the pages just written, once the fetch has the answer and
            # sends the next pages (updatedb reads those it has not)
            try:
                parser.read_shares()
            except Exception:
                logging.getLogger(__name__).exception("Cannot keep updatedb's shares")
    finally:
        if not closed:
            parser.table.close()


def run_child(answer: Callable[[IO[bytes], IO[bytes]], None]) -> int:
    """The main function of a child process of the fetch (this one, :mod:`nutchy._warcwork`):
    *answer* reads the messages of its standard input and answers them on its standard output."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s [%(name)s] %(levelname)s: %(message)s"
    )
    source = sys.stdin.buffer
    # Only the answers go to the pipe: anything printed goes to standard error.
    sink = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        answer(source, sink)
    except BrokenPipeError:
        return 0  # the fetch's process is gone
    return 0


def main() -> int:
    return run_child(serve)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
