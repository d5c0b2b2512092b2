"""Fetch one batch: ``python -m nutchy._fetchrun BATCH [SETTINGS_JSON [PARTITION]]``.

``nutchy crawl`` runs each round's fetch in a child process when it cannot run it in its own
(:class:`FetchThread`), because Twisted's reactor cannot be started twice in one process. The
child reads nutchy's defaults, the Scrapy project's settings
(when there is a project), then the overrides given as a JSON object, turns the add-on on, and
runs the ``nutch`` spider on the batch (on partition *k* of *K* only with ``PARTITION`` =
``k/K``); it leaves parse and updatedb to ``nutchy crawl``, and writes its Scrapy stats as JSON
to the file named by the environment variable ``NUTCHY_FETCH_REPORT``, when set, for
``nutchy crawl`` to say what it fetched. It exits with 1 when the crawl
could not start, could not read or write the table, or was stopped by a signal.

A child whose ``nutchy crawl`` dies (``kill -9``) dies with it (the environment variable
``NUTCHY_FETCH_PARENT`` names the parent), rather than fetch on alone beside the crawl that
re-running the command starts: that one finishes the batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from nutchy._imports import import_download_handler
from nutchy.config import load_settings

#: Stats that make a fetch a failure: the table could not be read or written, or the WARC file
#: (NUTCH_WARC_ENABLED) could not be written.
FAILURE_STATS = ("nutch/store/put_error", "nutch/fetch/read_error", "nutch/warc/write_error")

if TYPE_CHECKING:
    from scrapy.crawler import CrawlerProcess
    from scrapy.settings import Settings

    from nutchy.spiders import NutchSpider

logger = logging.getLogger(__name__)

#: The batch argument of a long-lived fetch (``-rounds``): none, the batches come on stdin.
ROUNDS = "-rounds"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rounds_fd = None
    if args[:1] == ["-rounds"] and 2 <= len(args) <= 3 and args[1].isdigit():
        # The batches come one at a time on stdin (nutchy._fetchrounds).
        rounds_fd = int(args[1])
        args = [ROUNDS, *args[2:]]
    if not 1 <= len(args) <= 3:
        print(
            "usage: python -m nutchy._fetchrun BATCH [SETTINGS_JSON [PARTITION]]\n"
            "       python -m nutchy._fetchrun -rounds FD [SETTINGS_JSON]",
            file=sys.stderr,
        )
        return 2
    _die_with_parent()
    from nutchy.spiders import NutchSpider

    overrides = json.loads(args[1]) if len(args) >= 2 else {}
    partition = args[2] if len(args) == 3 else None
    spider: type[NutchSpider] = NutchSpider
    spider_args: dict[str, Any] = {"batch": args[0], "partition": partition}
    if rounds_fd is not None:
        spider = parent_driven(sys.stdin, open(rounds_fd, "w", encoding="utf-8"))  # noqa: SIM115
        spider_args = {}
    settings = fetch_settings(overrides)
    code, stats = run_crawl(settings, spider, spider_args)
    _write_report(stats)
    return code


def fetch_settings(overrides: Mapping[str, Any]) -> Settings:
    """The settings of a fetch of ``nutchy crawl``: nutchy's defaults, the Scrapy project's
    settings, then *overrides*, with the add-on on, at INFO unless *overrides* give a
    ``LOG_LEVEL``, and without updatedb (``nutchy crawl`` parses what is left and runs updatedb
    itself) or the contact warning (said once by ``nutchy crawl``)."""
    settings = load_settings(overrides)
    settings.set("ADDONS", {**settings.getdict("ADDONS"), "nutchy.NutchAddon": 0}, "cmdline")
    if "LOG_LEVEL" not in overrides:
        settings.set("LOG_LEVEL", "INFO", "cmdline")
    settings.set("NUTCH_FETCHER_UPDATEDB", False, "cmdline")
    settings.set("NUTCH_HTTP_AGENT_CONTACT_WARNING", False, "cmdline")
    return settings


def run_crawl(
    settings: Settings,
    spider: type[NutchSpider],
    spider_args: Mapping[str, Any],
    *,
    started: Callable[[CrawlerProcess], None] | None = None,
    in_thread: bool = False,
) -> tuple[int, dict[str, Any]]:
    """Run *spider* with *settings* until its crawl ends (the reactor's whole life); return the
    fetch's exit code and its Scrapy stats. *started* is given the process once its crawl is
    scheduled. *in_thread*: the reactor runs in this thread, which is not the main one, without
    signal handlers and without a root log handler of Scrapy's (see :class:`FetchThread`)."""
    from scrapy.crawler import CrawlerProcess

    import_download_handler()  # before the crawler's: Scrapy's import of it costs more
    if in_thread:
        settings.set("LOG_INSTALL_ROOT_HANDLER", False, "cmdline")
        level = logging.getLevelName(str(settings.get("LOG_LEVEL")).upper())
        if not isinstance(level, int):
            level = logging.INFO
        # Scrapy's banner, said at INFO as its process is made (Scrapy's loggers at DEBUG then)
        gate = _Below(level, "scrapy")
        for handler in logging.root.handlers:
            handler.addFilter(gate)
        try:
            process = CrawlerProcess(settings)
        finally:
            for handler in logging.root.handlers:
                handler.removeFilter(gate)
        # Scrapy puts its own loggers at DEBUG for its root handler to filter: without one, the
        # crawl's handler shows what the fetch's level lets through, as a child shows it.
        logging.getLogger("scrapy").setLevel(level)
    else:
        process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider)
    process.crawl(crawler, **spider_args)
    if started is not None:
        started(process)
    process.start(install_signal_handlers=not in_thread)
    # As scrapy crawl: a crawl that could not start (bad settings, no table...) fails.
    if process.bootstrap_failed:
        return 1, {}
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    # So does a fetch that could not read or write the table (a store gone away), or that was
    # stopped by a signal (SIGINT, SIGTERM: Scrapy's finish reason "shutdown"): its batch is not
    # for parse and updatedb until it is fetched whole (-a resume=true). A fetch that ends at its
    # time limit, or by Scrapy's CloseSpider extension, is not a failure: as in Nutch, what it
    # fetched is parsed and updated, and the rest of the batch is generated again.
    if any(stats.get(key) for key in FAILURE_STATS):
        return 1, stats
    return (1 if stats.get("finish_reason") == "shutdown" else 0), stats


class _Below(logging.Filter):
    """Drops the records of the logger *name* (and its children) below *level*."""

    def __init__(self, level: int, name: str) -> None:
        super().__init__(name)
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or not super().filter(record)


class FetchThread:
    """The long-lived fetch of ``nutchy crawl`` (``-rounds``) in a thread of the crawl's own
    process instead of a child, for the crawl's memory: one interpreter holds Scrapy, Twisted
    and lxml once. The thread runs the reactor (once for the whole crawl: it cannot run twice in
    one process) and the ``nutch`` spider with :class:`~nutchy._fetchrounds.ParentRounds` as its
    round driver, fed through a pair of pipes as a child is: batches written to :attr:`stdin`,
    reports read on :attr:`reports`; its last stats go to the file *report*.

    It answers as the :class:`subprocess.Popen` of a child does (:attr:`pid`, :attr:`stdin`,
    :meth:`poll`, :meth:`wait`, :meth:`kill`, :meth:`send_signal`, :attr:`returncode`), so that
    the crawl drives either alike. A signal sent stops its crawl as Scrapy's handlers stop a
    child's: gracefully the first time (finish reason ``shutdown``: the fetch fails and its batch
    is left to finish), at once the second. Ctrl-C reaches it so: while a fetch thread lives,
    SIGINT in the main thread is sent to it before Python raises :exc:`KeyboardInterrupt` there,
    as the terminal sends SIGINT to both a crawl and its child.
    """

    def __init__(self, overrides: Mapping[str, Any], report: Path | str) -> None:
        command_read, command_write = os.pipe()
        report_read, report_write = os.pipe()
        self.pid = os.getpid()
        self.returncode: int | None = None
        #: where the batches are written, one JSON object a line
        self.stdin: IO[bytes] = open(command_write, "wb")  # noqa: SIM115
        #: where the end of each batch is told (:class:`~nutchy._fetchrounds.ParentRounds`)
        self.reports: IO[str] = open(report_read, encoding="utf-8")  # noqa: SIM115
        self._commands = open(command_read, encoding="utf-8")  # noqa: SIM115
        self._reports = open(report_write, "w", encoding="utf-8")  # noqa: SIM115
        self._report = str(report)
        self._overrides = dict(overrides)
        # reentrant: SIGINT's handler takes it in the main thread, which a second SIGINT may
        # interrupt there
        self._lock = threading.RLock()
        self._process: CrawlerProcess | None = None
        self._opened = False
        self._signals = 0
        #: the last batch's shares sent by the parse pipeline (:meth:`take_shares`)
        self._shares: tuple[str, list[Any]] | None = None
        _forward_sigint(self)
        self._thread = threading.Thread(target=self._run, name="nutchy-fetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        code = 1
        stats: dict[str, Any] = {}
        try:
            spider = parent_driven(self._commands, self._reports)
            settings = fetch_settings(self._overrides)
            code, stats = run_crawl(settings, spider, {}, started=self._started, in_thread=True)
            with self._lock:
                if self._signals:  # stopped by a signal, whatever became of its crawl
                    code = code or 1
        except Exception:
            logger.exception("The fetch could not run")
        finally:
            with contextlib.suppress(OSError):
                _write_report(stats, self._report)
            for handle in (self._reports, self._commands):
                with contextlib.suppress(OSError):
                    handle.close()
            self.returncode = code

    @property
    def process(self) -> CrawlerProcess | None:
        """The Scrapy process of the fetch, once its crawl is scheduled (``None`` before):
        another crawler may run in it, on the same reactor (the crawl's sitemaps,
        :func:`nutchy._sitemaprun.read_in_thread`)."""
        with self._lock:
            return self._process

    def _started(self, process: CrawlerProcess) -> None:
        from scrapy import signals

        from nutchy._fetch import batch_shares

        with self._lock:
            self._process = process
        for crawler in process.crawlers:
            crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(self._keep_shares, signal=batch_shares)

    def _keep_shares(self, batch_id: str, shares: list[Any]) -> None:
        with self._lock:
            self._shares = (batch_id, shares)

    def take_shares(self, batch_id: str) -> list[Any] | None:
        """The shares of *batch_id*'s pages that the parse process kept for updatedb
        (:data:`~nutchy._fetch.batch_shares`), once: ``None`` when there are none (those of another
        batch are dropped)."""
        with self._lock:
            kept, self._shares = self._shares, None
        if kept is None or kept[0] != batch_id:
            return None
        return kept[1]

    def _spider_opened(self) -> None:
        with self._lock:
            self._opened = True
            stop = self._signals
        if stop and self._process is not None:  # a signal came while it opened
            _stop_gracefully(self._process)

    def send_signal(self, signum: int) -> None:
        """Stop the fetch as a signal stops a child's: gracefully, then (a second signal) at
        once. *signum* is for the likeness; any signal stops it. A fetch whose spider is not
        open yet stops once it is, or ends without a batch when its input ends first (the crawl
        closes it as it stops): a crawl stopped while it opens leaves tasks half done."""
        with self._lock:
            self._signals += 1
            process, opened, again = self._process, self._opened, self._signals > 1
        if process is None or not self._thread.is_alive():
            return
        from twisted.internet import reactor

        if again:
            reactor.callFromThread(_stop_reactor)
        elif opened:
            reactor.callFromThread(_stop_gracefully, process)

    def kill(self) -> None:
        """End a fetch never given a batch: its input ends, and its crawl with it."""
        with contextlib.suppress(OSError):
            self.stdin.close()

    def poll(self) -> int | None:
        return None if self._thread.is_alive() else self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the fetch thread is still running after {timeout} s")
        _forward_sigint(self, stop=True)
        assert self.returncode is not None
        return self.returncode


def _stop_gracefully(process: CrawlerProcess) -> None:
    """Stop *process*'s crawl, then the reactor, as Scrapy's handler of a first signal does
    (the reactor stops even if the crawl's stop left it running)."""
    process.stop().addBoth(lambda _: _stop_reactor())


def _stop_reactor() -> None:
    from twisted.internet import reactor

    with contextlib.suppress(RuntimeError):  # already stopping
        reactor.stop()  # type: ignore[misc]


#: The fetch threads that SIGINT is sent to (:class:`FetchThread`).
_forwarded: weakref.WeakSet[FetchThread] = weakref.WeakSet()


def _forward_sigint(fetch: FetchThread, *, stop: bool = False) -> None:
    """Send SIGINT to *fetch* from now on (or, with *stop*, no longer), when Python's own
    handler is SIGINT's and this is the main thread (where Python runs signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if stop:
        _forwarded.discard(fetch)
        if not _forwarded and signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    if signal.getsignal(signal.SIGINT) is _on_sigint:
        _forwarded.add(fetch)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    for fetch in list(_forwarded):
        fetch.send_signal(signum)
    signal.default_int_handler(signum, frame)


def _die_with_parent() -> None:
    """Be killed when the process ``NUTCHY_FETCH_PARENT`` names ends: at once on Linux (the
    kernel's parent-death signal), within a second elsewhere (a thread watching the parent)."""
    parent = os.environ.get("NUTCHY_FETCH_PARENT", "")
    if not parent.isdigit():
        return
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    else:
        threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()
    if os.getppid() != int(parent):  # gone before the signal was asked for
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGKILL)


def parent_driven(commands: IO[str], reports: IO[str]) -> type[NutchSpider]:
    """The ``nutch`` spider fetching the batches read on *commands*, reporting on *reports*."""
    from nutchy._fetchrounds import ParentRounds
    from nutchy.spiders import NutchSpider

    driver = functools.partial(ParentRounds, commands=commands, reports=reports)
    return type("NutchSpider", (NutchSpider,), {"nutch_round_driver": staticmethod(driver)})


def _write_report(stats: dict[str, Any], path: str | None = None) -> None:
    """Write *stats* as JSON to the file *path* names (by default the environment variable
    ``NUTCHY_FETCH_REPORT``'s, a child's), when set: ``nutchy crawl`` reads what each fetch
    fetched there, whatever its log level."""
    path = path or os.environ.get("NUTCHY_FETCH_REPORT")
    if not path:
        return
    plain = {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(plain, handle)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
