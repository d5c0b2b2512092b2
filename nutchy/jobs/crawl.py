"""The crawl job: Nutch's ``bin/crawl`` (``nutchy crawl SEEDS -rounds N -topN M``).

Inject the seeds once, then run rounds of generate, fetch, parse and updatedb until *rounds* are
done, generate selects nothing, or a file named ``STOP`` appears in the crawl directory (checked
before each round, so the current round always finishes). Generate, parse and updatedb run in
this process; the fetch runs the ``nutch`` spider in a thread of this process
(:class:`~nutchy._fetchrun.FetchThread`, ``NUTCH_CRAWL_FETCH_IN_PROCESS``) or in a child
process (see :mod:`nutchy._fetchrun`), or in *K* children at once with ``-numFetchers K``:
generate splits the batch into *K* partitions by host (as ``nutchy generate -numFetchers K``)
and each child fetches one (``-a partition=k/K``), so every host is fetched by one process.
While the batch is fetched, this process reads ahead what updatedb needs of it
(:func:`~nutchy.jobs.updatedb.read_ahead`).

Each round is noted in a file of the crawl directory while it is under way
(:mod:`nutchy.jobs._unfinished`): a crawl that was killed leaves it, and the next ``nutchy crawl``
of the table finishes that batch first (fetching what is left, parsing what was not parsed,
updating it) before generating a new one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES

from nutchy._checks import check_settings
from nutchy._fetchrun import FetchThread
from nutchy._memory import release_memory
from nutchy.agent import contact_warning
from nutchy.config import crawl_dir
from nutchy.core.generate import new_batch_id
from nutchy.core.status import Mark
from nutchy.exceptions import NutchError, StoreError
from nutchy.index.chain import load_filters, load_writers
from nutchy.jobs import _unfinished
from nutchy.jobs._cycle import CUT_STATS, cut_summary, finish_batch, update_config
from nutchy.jobs._settings import get_bool, get_int
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.history import record_round
from nutchy.jobs.hostdb import describe_update, update_hostdb_of
from nutchy.jobs.index import index
from nutchy.jobs.inject import InjectOptions, InjectResult, inject
from nutchy.jobs.parse import ParseCounts
from nutchy.jobs.updatedb import ReadAhead, parsed_ahead, read_ahead
from nutchy.metrics import CrawlMetrics
from nutchy.store import open_table, table_name
from nutchy.store.schema import build_update

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.index.chain import IndexingFilters
    from nutchy.index.writers import IndexWriter
    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

#: Name of the file in the crawl directory that stops a crawl after its current round.
STOP_FILE = "STOP"
#: The folder of the crawl directory where each round under way is noted (:mod:`._unfinished`).
UNFINISHED_DIR = "unfinished"


@dataclass
class RoundReport:
    """What one round did, phase by phase, for the crawl's closing table."""

    number: int
    batch_id: str
    selected: int
    #: rows fetched, by fetch status name (``SUCCESS``, ``NOTFOUND``...), as the children said
    statuses: dict[str, int] = field(default_factory=dict)
    parsed: int = 0
    new_rows: int = 0
    #: seconds spent in each phase: generate, fetch, parse, updatedb
    seconds: dict[str, float] = field(default_factory=dict)
    #: the children's counts of pages cut short (:data:`~nutchy.jobs._cycle.CUT_STATS`)
    cut: dict[str, int] = field(default_factory=dict)
    #: what the sitemaps read before its generate counted (``nutch/sitemap/<name>``), if any
    sitemaps: dict[str, int] | None = None


@dataclass
class CrawlReport:
    """What a crawl did: the batch of each round, and why it stopped."""

    injected: int = 0
    batches: list[str] = field(default_factory=list)
    stopped: str = ""
    rounds: list[RoundReport] = field(default_factory=list)


@dataclass
class FetchRun:
    """How a fetch child ended: its exit code and its Scrapy stats (those a JSON report holds:
    ``nutch/fetch/status/...``, ``finish_reason``...; empty when it wrote none)."""

    code: int
    stats: dict[str, Any] = field(default_factory=dict)


#: How often ``nutchy crawl -sitemapsFromHostdb`` reads the sitemaps of the table's hosts, as
#: Nutch 1.x's ``bin/crawl --sitemaps-from-hostdb``: not at all, before the first generate, or
#: before every generate.
SITEMAP_FREQUENCIES = ("never", "once", "always")


@dataclass(frozen=True)
class SitemapOptions:
    """The sitemaps ``nutchy crawl`` reads before its rounds' generate: *urls* (a file of sitemap
    URLs or URLs separated by commas, as ``nutchy sitemap -sitemapUrls``) before the first,
    and the sitemaps of every host of the table (``nutchy sitemap -robots``) as often as
    *from_hosts* says (:data:`SITEMAP_FREQUENCIES`)."""

    urls: str | None = None
    from_hosts: str = "never"

    def __post_init__(self) -> None:
        if self.from_hosts not in SITEMAP_FREQUENCIES:
            raise ValueError(
                f"from_hosts must be one of {', '.join(SITEMAP_FREQUENCIES)}, got"
                f" {self.from_hosts!r}"
            )

    def spider_args(self, *, first: bool) -> dict[str, Any] | None:
        """The ``nutch_sitemap`` spider's arguments before a generate (the crawl's *first*, or
        a later one); ``None`` when none is read then.

        >>> SitemapOptions("s.txt", "once").spider_args(first=True)
        {'robots': True, 'sitemaps': 's.txt'}
        >>> SitemapOptions("s.txt", "once").spider_args(first=False) is None
        True
        >>> SitemapOptions(None, "always").spider_args(first=False)
        {'robots': True}
        """
        robots = self.from_hosts == "always" or (self.from_hosts == "once" and first)
        urls = self.urls if first else None
        if not robots and not urls:
            return None
        args: dict[str, Any] = {"robots": robots}
        if urls:
            args["sitemaps"] = urls
        return args


#: Starts the fetch of a batch (of its partition ``k/K``, or all of it for ``None``) and returns
#: a function that waits for the fetch and returns its exit code, or a :class:`FetchRun`.
StartFetch = Callable[[str, Mapping[str, Any], str | None], Callable[[], "int | FetchRun"]]

#: A long-lived fetch: a child process, or a thread of this one (:class:`FetchThread`).
Fetcher = subprocess.Popen[bytes] | FetchThread

#: The environment variable naming the file where ``python -m nutchy._fetchrun`` writes its stats.
REPORT_ENV = "NUTCHY_FETCH_REPORT"
#: The environment variable giving a fetch child its parent's process id: the child dies with it.
PARENT_ENV = "NUTCHY_FETCH_PARENT"
#: The prefix of the Scrapy stats that count the rows fetched by status.
STATUS_STAT = "nutch/fetch/status/"

#: Settings given to the fetch children unless the command line sets them or asks for ``-v``:
#: Scrapy's INFO lines (banner, versions, overridden settings, telnet password, the stats dump) of
#: every child of every round would bury the crawl's own lines, which say what the fetch did.
QUIET_CHILD = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False}


class ChildFetch:
    """A fetch running in a child process (:attr:`process`); calling it waits for the child and
    returns its exit code and the stats it wrote to *report* (removed then)."""

    def __init__(self, process: subprocess.Popen[bytes], report: Path) -> None:
        self.process = process
        self.report = report

    def __call__(self) -> FetchRun:
        try:
            code = self.process.wait()
            try:
                stats = json.loads(self.report.read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError):  # a child that could not start wrote nothing
                stats = {}
            return FetchRun(code, stats if isinstance(stats, dict) else {})
        finally:
            self.report.unlink(missing_ok=True)


def start_fetch_in_child(
    batch_id: str, overrides: Mapping[str, Any], partition: str | None = None
) -> ChildFetch:
    """Start fetching *batch_id* (its *partition* ``k/K`` only, when given) with ``python -m
    nutchy._fetchrun``; return what waits for the child and gives its exit code and stats."""
    command = [sys.executable, "-m", "nutchy._fetchrun", batch_id, json.dumps(dict(overrides))]
    if partition is not None:
        command.append(partition)
    return start_child(command)


def start_child(command: list[str]) -> ChildFetch:
    """Start *command*, a Scrapy crawl in a child process that writes its stats to the file
    named by :data:`REPORT_ENV` (a new temporary file); return what waits for it."""
    handle, name = tempfile.mkstemp(prefix="nutchy-fetch-", suffix=".json")
    os.close(handle)
    report = Path(name)
    try:
        process = subprocess.Popen(
            command, env={**os.environ, REPORT_ENV: name, PARENT_ENV: str(os.getpid())}
        )
    except BaseException:
        report.unlink(missing_ok=True)
        raise
    return ChildFetch(process, report)


class FetchProcesses:
    """Long-lived fetch processes, one per partition: ``python -m nutchy._fetchrun -rounds``
    (:mod:`nutchy._fetchrounds`), started with *overrides* at their first batch (or before it,
    :meth:`prestart`) and kept for
    the whole crawl, so that a round pays no Scrapy start-up and keeps what the last one learned
    of the hosts (robots.txt, Crawl-delay, last fetch times, DNS). Called as a
    :data:`StartFetch`, it gives a process its next batch (partition *k* to process *k*) and
    returns what waits for the batch's end: a :class:`FetchRun` with the stats of that batch
    alone, or, if the process ended instead, its exit code (1 for 0: the batch was not fetched)
    and the stats it left. A batch given other settings than the processes' (*overrides*, by
    default those of the first batch) is fetched by a child of its own. :meth:`finish` tells
    them no batch follows, and they end on their own while the caller goes on; :meth:`close`
    ends them (if need be) and waits for them.

    *in_process*: the fetch of a whole batch (no partition) runs in a thread of this process
    (:class:`~nutchy._fetchrun.FetchThread`) rather than in a child, the first time; as the
    reactor runs once in a process, a fetch that needs a new one after it is a child's."""

    def __init__(
        self, overrides: Mapping[str, Any] | None = None, *, in_process: bool = False
    ) -> None:
        #: the settings of the long-lived processes (None: those of the first batch)
        self.overrides = overrides
        #: whether the next whole-batch fetch may run in this process (:class:`FetchThread`)
        self.in_process = in_process
        self._children: dict[int, tuple[Fetcher, Any, Path]] = {}
        #: processes told that no batch follows, ending (:meth:`finish`)
        self._ending: list[tuple[Fetcher, Any, Path]] = []
        #: each process's stats at the end of its last batch
        self._seen: dict[int, dict[str, Any]] = {}
        #: the processes given a batch so far
        self._given: set[int] = set()

    def prestart(self, partitions: int) -> None:
        """Start the processes of *partitions* partitions now, before their first batch, so
        that their start-up (Python's and Scrapy's imports, the crawler, the spider's opening
        and its parse process: a second or more of CPU) runs beside what the caller does before
        it (inject, generate) rather than after it. The table must exist: a crawler refuses to
        start without it. One that never gets a batch is killed when the processes finish,
        having fetched nothing."""
        assert self.overrides is not None
        for k in range(partitions):
            if k not in self._children:
                self._children[k] = self._start(self.overrides, whole=partitions == 1)

    def __call__(
        self, batch_id: str, overrides: Mapping[str, Any], partition: str | None = None
    ) -> Callable[[], FetchRun]:
        if self.overrides is None:
            self.overrides = dict(overrides)
        if dict(overrides) != dict(self.overrides):
            # A fetch with other settings (the resume of a batch a killed crawl left): a child
            # of its own, as without long-lived processes.
            return start_fetch_in_child(batch_id, overrides, partition)
        k = 0 if partition is None else int(partition.partition("/")[0])
        if k not in self._children:
            self._children[k] = self._start(overrides, whole=partition is None)
        process, _reports, _ = self._children[k]
        self._given.add(k)
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps({"batch": batch_id, "partition": partition}).encode())
            process.stdin.write(b"\n")
            process.stdin.flush()
        except OSError:
            pass  # the process is gone: waiting says how it ended
        return functools.partial(self._wait, k)

    def fetches_here(self, overrides: Mapping[str, Any]) -> bool:
        """Whether a whole batch given with *overrides* is fetched in this process (by its
        :class:`FetchThread`)."""
        if self.overrides is not None and dict(overrides) != dict(self.overrides):
            return False
        if 0 in self._children:
            return isinstance(self._children[0][0], FetchThread)
        return self.in_process

    def fetch_thread(self, overrides: Mapping[str, Any]) -> FetchThread | None:
        """The fetch thread of this process (:class:`FetchThread`), started and still running,
        when it fetches the batches given with *overrides*; ``None`` otherwise."""
        if not self.fetches_here(overrides) or 0 not in self._children:
            return None
        fetcher = self._children[0][0]
        if not isinstance(fetcher, FetchThread) or fetcher.poll() is not None:
            return None
        return fetcher

    def take_shares(self, batch_id: str, overrides: Mapping[str, Any]) -> list[Any] | None:
        """The shares of *batch_id*'s pages that the parse process of this process's fetch kept
        for updatedb (:meth:`FetchThread.take_shares`); ``None`` when the fetch runs in a child,
        or kept none."""
        thread = self.fetch_thread(overrides)
        return None if thread is None else thread.take_shares(batch_id)

    @property
    def processes(self) -> list[Fetcher]:
        """The processes (and the fetch thread) started so far."""
        return [process for process, _, _ in (*self._ending, *self._children.values())]

    def _start(self, overrides: Mapping[str, Any], *, whole: bool) -> tuple[Fetcher, Any, Path]:
        handle, name = tempfile.mkstemp(prefix="nutchy-fetch-", suffix=".json")
        os.close(handle)
        if self.in_process and whole:
            self.in_process = False  # the reactor runs once in a process
            try:
                thread = FetchThread(overrides, name)
            except BaseException:
                Path(name).unlink(missing_ok=True)
                raise
            return thread, thread.reports, Path(name)
        read, write = os.pipe()
        command = [
            *(sys.executable, "-m", "nutchy._fetchrun", "-rounds", str(write)),
            json.dumps(dict(overrides)),
        ]
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                pass_fds=(write,),
                env={**os.environ, REPORT_ENV: name, PARENT_ENV: str(os.getpid())},
            )
        except BaseException:
            os.close(read)
            Path(name).unlink(missing_ok=True)
            raise
        finally:
            os.close(write)
        return process, open(read, encoding="utf-8"), Path(name)

    def _wait(self, k: int) -> FetchRun:
        process, reports, report = self._children[k]
        line = reports.readline()
        if line:
            stats = json.loads(line)["stats"]
            return FetchRun(0, self._since(k, stats))
        code = process.wait()
        try:
            stats = json.loads(report.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):  # a child that could not start wrote nothing
            stats = {}
        return FetchRun(code or 1, self._since(k, stats if isinstance(stats, dict) else {}))

    def _since(self, k: int, stats: dict[str, Any]) -> dict[str, Any]:
        """*stats* less the numbers process *k* had at the end of its last batch."""
        before, self._seen[k] = self._seen.get(k, {}), stats
        return {
            key: value - before.get(key, 0)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else value
            for key, value in stats.items()
        }

    def finish(self) -> None:
        """Tell the processes that no batch follows: each ends its crawl (Scrapy's close, the
        interpreter's exit) while the caller goes on; :meth:`close` waits for them. A batch
        given after this starts a new process; one that was never given a batch is killed."""
        for k, (process, _, _) in self._children.items():
            if k not in self._given:
                process.kill()  # still in its start-up, or waiting: it did nothing
            try:
                assert process.stdin is not None
                process.stdin.close()
            except OSError:
                pass
        self._ending.extend(self._children.values())
        self._children.clear()
        self._seen.clear()
        self._given.clear()

    def close(self) -> None:
        """End the processes (no more batches) and wait for them."""
        self.finish()
        for process, reports, report in self._ending:
            process.wait()
            reports.close()
            report.unlink(missing_ok=True)
        self._ending.clear()


def long_lived(settings: BaseSettings) -> bool:
    """Whether ``nutchy crawl`` fetches its rounds in long-lived processes: unless a limit
    that Scrapy counts per process (``NUTCH_FETCHER_TIMELIMIT_MINS``, Scrapy's
    ``CLOSESPIDER_*``) must hold for each round's fetch, which then gets a process of its
    own."""
    if settings.getfloat("NUTCH_FETCHER_TIMELIMIT_MINS") >= 0:
        return False
    return not any(
        settings.getfloat(name)
        for name in (
            "CLOSESPIDER_TIMEOUT",
            "CLOSESPIDER_ITEMCOUNT",
            "CLOSESPIDER_PAGECOUNT",
            "CLOSESPIDER_ERRORCOUNT",
            "CLOSESPIDER_TIMEOUT_NO_ITEM",
            "CLOSESPIDER_PAGECOUNT_NO_ITEM",
        )
    )


def fetch_in_process(settings: BaseSettings) -> bool:
    """Whether ``nutchy crawl``'s long-lived fetch may run in its own process
    (``NUTCH_CRAWL_FETCH_IN_PROCESS``): not if Twisted's reactor is installed in this process
    already (a program of its own that runs the crawl), which the fetch could not run again,
    nor with Scrapy's ``LOG_FILE``, which a fetch child's log goes to (the crawl's process has
    its own log)."""
    return (
        get_bool(settings, "NUTCH_CRAWL_FETCH_IN_PROCESS")
        and not settings.get("LOG_FILE")
        and "twisted.internet.reactor" not in sys.modules
    )


def fetch_in_child(
    batch_id: str, overrides: Mapping[str, Any], partition: str | None = None
) -> int:
    """Fetch *batch_id* (or its *partition*) with ``python -m nutchy._fetchrun``; return its exit
    code."""
    return start_fetch_in_child(batch_id, overrides, partition)().code


def _indexing(settings: BaseSettings) -> tuple[IndexingFilters, list[IndexWriter]] | None:
    """The indexing filters and writers each round indexes its batch with
    (``NUTCH_FETCHER_INDEX``, docs/index.md), or ``None``."""
    if not get_bool(settings, "NUTCH_FETCHER_INDEX"):
        return None
    return load_filters(settings), load_writers(settings)


def _read_sitemaps(
    options: SitemapOptions | None,
    *,
    first: bool,
    overrides: Mapping[str, Any],
    thread: FetchThread | None = None,
    number: int,
    log: Callable[[str], None],
) -> tuple[dict[str, int] | None, float]:
    """Read the sitemaps *options* name before a generate (the crawl's *first*, or a later
    one) with the fetch's *overrides*, and say what they did in one line; return the counts
    (``None`` when none were to be read) and the seconds it took. They are read by a second
    crawler of the fetch *thread*'s Scrapy process when the fetch runs in this process
    (:func:`nutchy._sitemaprun.read_in_thread`: no Python and Scrapy to start for them), else
    in a child process (:func:`nutchy.jobs.sitemap.read_sitemaps`). A sitemap that cannot be
    read, or a crawl that cannot start, is a warning: the round goes on without it, as with a
    history line that cannot be written."""
    args = options.spider_args(first=first) if options is not None else None
    if args is None:
        return None, 0.0
    from nutchy._sitemaprun import read_in_thread
    from nutchy.jobs.sitemap import read_sitemaps, sitemap_report  # they import this module

    started = time.monotonic()
    try:
        if thread is not None:
            report = sitemap_report(*read_in_thread(thread, args))
        else:
            report = read_sitemaps(args, dict(overrides))
    except OSError as exc:
        logger.warning("Round %d: cannot read the sitemaps (%s); the round goes on", number, exc)
        return {}, time.monotonic() - started
    seconds = time.monotonic() - started
    counts = report.counts
    if report.code != 0:
        logger.warning(
            "Round %d: the sitemap crawl could not start (exit code %d); the round goes on",
            number,
            report.code,
        )
    elif not counts.get("read"):
        logger.warning("Round %d: no sitemap could be read; the round goes on", number)
    log(f"round {number}: sitemaps: {_sitemap_summary(counts)}; {seconds:.1f} s")
    return counts, seconds


def _sitemap_summary(counts: Mapping[str, int]) -> str:
    """``3 read, 1 failed: 40 URLs listed, 4 made due, 2 new``, from the sitemap spider's
    counts (those that are 0 left out, but for the sitemaps read).

    >>> _sitemap_summary({"read": 2, "urls": 40, "due": 4})
    '2 read: 40 URLs listed, 4 made due'
    """
    read = [f"{counts.get('read', 0)} read"]
    read += [
        f"{counts[k]} {label}"
        for k, label in (("failed", "failed"), ("invalid", "not sitemaps"))
        if counts.get(k)
    ]
    found = [
        f"{counts[k]} {label}"
        for k, label in (("urls", "URLs listed"), ("due", "made due"), ("injected", "new"))
        if counts.get(k)
    ]
    return ", ".join(read) + (f": {', '.join(found)}" if found else "")


def _index_round(
    table: WebTable,
    batch_id: str,
    indexing: tuple[IndexingFilters, list[IndexWriter]],
    number: int,
    log: Callable[[str], None],
) -> None:
    """Index the round's batch; a failure is said and the crawl goes on (the index is made from
    the table, which holds all it needs: ``nutchy index ID`` does it later)."""
    started = time.monotonic()
    filters, writers = indexing
    try:
        counts = index(table, batch_id, filters=filters, writers=writers)
    except NutchError as exc:
        log(f"round {number}: index: failed: {exc}; once fixed: nutchy index {batch_id}")
        return
    log(
        f"round {number}: index: {counts.indexed} indexed, {counts.deleted} deleted;"
        f" {time.monotonic() - started:.1f} s"
    )


def crawl(
    settings: BaseSettings,
    seeds: Sequence[Path],
    *,
    rounds: int,
    top_n: int | None,
    overrides: Mapping[str, Any],
    add_days: int = 0,
    num_fetchers: int = 1,
    sitemaps: SitemapOptions | None = None,
    start_fetch: StartFetch | None = None,
    log: Callable[[str], None] = print,
    verbose: bool = False,
) -> CrawlReport:
    """Run the crawl; *overrides* are the settings given on the command line, passed to fetch.

    Each round's generate selects the URLs due *add_days* days from now (``-adddays``) and splits
    them into *num_fetchers* partitions, fetched at once by as many children. Before a
    generate, the *sitemaps* are read (:class:`SitemapOptions`, by :func:`_read_sitemaps`: in
    the fetch's own Scrapy process when the fetch runs in this one, else in a child), so that it
    selects the pages they say changed.
    *start_fetch* starts the fetch of a batch (of one partition ``k/K`` of it, or of all of it
    for ``None``) and returns a function that waits for its exit code; by default, long-lived
    processes (:class:`FetchProcesses`) fetch every round (with one fetcher, a thread of this
    process: :func:`fetch_in_process`), or a child each round's fetch when a limit must hold for
    each (:func:`long_lived`). The fetches log at
    WARNING, without Scrapy's telnet console (:data:`QUIET_CHILD`), unless *verbose* or
    *overrides* say otherwise; each phase of each round is said in one line through *log*, and
    the rounds in a table at the end.
    """
    report = CrawlReport()
    stop = crawl_dir(settings) / STOP_FILE
    rounds_dir = crawl_dir(settings) / UNFINISHED_DIR
    if not verbose:
        overrides = {**QUIET_CHILD, **overrides}
    # Every setting of every phase, before anything is written.
    check_settings(settings)
    warning = contact_warning(settings)
    if warning and settings.getbool("NUTCH_HTTP_AGENT_CONTACT_WARNING"):
        logger.warning(warning)
    inject_options = InjectOptions.from_settings(settings)
    generate_options = GenerateOptions.from_settings(
        settings, top_n=top_n, num_fetchers=num_fetchers
    )
    indexing = _indexing(settings)
    processes = None
    if start_fetch is None and long_lived(settings):
        in_process = num_fetchers == 1 and fetch_in_process(settings)
        processes = FetchProcesses(overrides, in_process=in_process)
    start_fetch = start_fetch or processes or start_fetch_in_child
    ending = contextlib.closing(processes) if processes else contextlib.nullcontext()
    with _metrics(settings) as metrics, open_table(settings) as table, ending:
        if processes is not None:
            if seeds:
                table.create()  # as inject does: the fetch processes check that it exists
            processes.prestart(num_fetchers)
        if seeds:
            result = inject(table, seeds, inject_options, now=_now())
            report.injected = result.injected
            _log_inject(result, log)
        # The rounds of crawls of this table that were killed: finished first, in order.
        left = _unfinished.take_over(rounds_dir, table_name(settings))
        current: _unfinished.Round | None = None
        generates = 0  # the generates of this crawl so far: the sitemaps "once" read before one
        try:
            for number in range(1, rounds + 1):
                if stop.exists():
                    report.stopped = f"{stop} found"
                    break
                started = time.monotonic()
                current = left.pop(0) if left else None
                # a fetch (or parse and updatedb) to finish; a generate cut short is redone
                resumed = (
                    current is not None
                    and current.phase != _unfinished.GENERATE
                    and _resumable(table, current)
                )
                if current is None or current.phase == _unfinished.GENERATE:
                    sitemap_counts, sitemap_seconds = _read_sitemaps(
                        sitemaps,
                        first=generates == 0,
                        overrides=overrides,
                        thread=processes.fetch_thread(overrides) if processes else None,
                        number=number,
                        log=log,
                    )
                    generates += 1
                    started = time.monotonic()
                    now = _now()
                    if current is None:
                        # a random number, as nutchy generate: two crawls started in the same
                        # second on one table get different batch ids
                        batch_id = new_batch_id(now, secrets.randbelow(2**31))
                        current = _unfinished.Round.start(
                            rounds_dir, table_name(settings), batch_id
                        )
                    else:
                        batch_id = current.batch_id
                        dropped = _drop_generate_marks(table, batch_id)
                        log(
                            f"round {number}: batch {batch_id}, left by a crawl that stopped"
                            f" during its generate ({dropped} URLs marked): generating it again"
                        )
                    generated = generate(
                        table, generate_options, now=now, batch_id=batch_id, add_days=add_days
                    )
                    if generated.selected == 0:
                        current.done()
                        report.stopped = "nothing left to fetch"
                        break
                    current.enter(_unfinished.FETCH, generated.partitions)
                    this = RoundReport(number, batch_id, generated.selected)
                    if sitemap_counts is not None:
                        this.sitemaps = sitemap_counts
                        this.seconds["sitemaps"] = sitemap_seconds
                    started = _lap(this, "generate", started)
                    line = f"round {number}: batch {batch_id}, {generated.selected} URLs"
                    if num_fetchers > 1:
                        sizes = ", ".join(map(str, generated.partitions))
                        line += f" in {num_fetchers} partitions ({sizes})"
                    log(f"{line}; generate {this.seconds['generate']:.1f} s")
                elif not resumed:
                    log(
                        f"round {number}: batch {current.batch_id}, left by a crawl that stopped,"
                        " has been finished since"
                    )
                    current.done()
                    current = None
                    continue
                else:
                    batch_id = current.batch_id
                    this = RoundReport(number, batch_id, sum(current.partitions))
                    log(
                        f"round {number}: batch {batch_id}, {this.selected} URLs, left by a crawl"
                        f" that stopped: finishing its {current.phase}"
                    )
                report.rounds.append(this)
                report.batches.append(batch_id)
                _note(metrics, round=number, batch_urls=this.selected, phase=1)
                try:
                    ahead = None
                    if current.phase == _unfinished.FETCH:
                        fetch_overrides = overrides
                        if resumed:  # the rows whose fetch the killed crawl wrote are left
                            fetch_overrides = {**overrides, "NUTCH_FETCHER_JOB_RESUME": True}
                        # what the last updatedb and this generate freed, before the fetch
                        release_memory()
                        ahead, failed, this.statuses, this.cut = _fetch(
                            table,
                            settings,
                            batch_id,
                            current.partitions,
                            fetch_overrides,
                            start_fetch,
                            read_ahead=not resumed
                            and _reads_ahead(settings, start_fetch, fetch_overrides),
                        )
                        if number == rounds and isinstance(start_fetch, FetchProcesses):
                            # No round follows: the fetch processes end (Scrapy's close, the
                            # interpreter's exit) beside this round's parse and updatedb.
                            start_fetch.finish()
                        table.checkpoint()  # the fetch's writes, copied into the file
                        started = _lap(this, "fetch", started)
                        log(
                            f"round {number}: fetch: {_statuses(this.statuses)};"
                            f" {this.seconds['fetch']:.1f} s"
                        )
                        if failed:
                            log(
                                f"round {number}: batch {batch_id} is left for {_by_hand(batch_id)}"
                            )
                            report.stopped = f"the fetch of batch {batch_id} failed ({failed})"
                            break
                        current.enter(_unfinished.FINISH)
                    parsed, updated = finish_batch(
                        table,
                        settings,
                        batch_id,
                        now=_now(),
                        ahead=ahead,
                        parsed=functools.partial(_log_parse, this, started=started, log=log),
                    )
                except StoreError as exc:
                    raise StoreError(
                        f"round {number}: cannot parse and update batch {batch_id}: {exc}. Once"
                        f" the table can be written again, finish the batch with"
                        f" {_by_hand(batch_id)}"
                    ) from exc
                except KeyboardInterrupt:  # Ctrl-C: the fetch children stop on theirs
                    log(
                        f"round {number}: interrupted; batch {batch_id} is left for"
                        f" {_by_hand(batch_id)}"
                    )
                    raise
                current.done()
                current = None
                # updatedb's writes copied into the file in a thread of the store, beside the
                # end of the round (the history's scan of the table, the next generate), rather
                # than by the store's close after them
                table.checkpoint()
                _note(metrics, rounds_done=number, phase=0)
                del ahead
                assert parsed is not None
                _lap(this, "updatedb", started + this.seconds["parse"])
                this.new_rows = updated.new_rows
                line = (
                    f"round {number}: updatedb: {updated.batch_pages} pages updated,"
                    f" {updated.new_rows} new URLs"
                )
                if updated.read_ahead:
                    pages = f"{updated.read_ahead} page{'s' if updated.read_ahead > 1 else ''}"
                    line += f" ({pages} updated from what was read during the fetch)"
                log(f"{line}; {this.seconds['updatedb']:.1f} s")
                if generate_options.suspended_hosts is not None:
                    # The host database's rules are on: the next generate reads this round.
                    hostdb, name = update_hostdb_of(table, settings, now=_now())
                    log(f"round {number}: updatehostdb: {describe_update(hostdb, name)}")
                if indexing is not None:
                    _index_round(table, batch_id, indexing, number, log)
                record_round(
                    table,
                    settings,
                    number,
                    batch_id,
                    selected=this.selected,
                    statuses=this.statuses,
                    new_rows=updated.new_rows,
                    seconds=this.seconds,
                    now=_now(),
                    sitemaps=this.sitemaps,
                )
            else:
                report.stopped = f"{rounds} rounds done"
        finally:  # what is not done is left, unlocked, for the next crawl
            for unfinished in (*left, *([current] if current is not None else [])):
                unfinished.release()
    log(f"stopped, {report.stopped}")
    for line in _table(report.rounds):
        log(line)
    return report


@contextlib.contextmanager
def _metrics(settings: BaseSettings) -> Iterator[CrawlMetrics | None]:
    """The crawl's Prometheus metrics while it runs (``NUTCH_METRICS_PORT``; ``None`` when off):
    served by this process, its fetch children's summed (nutchy.metrics)."""
    metrics = CrawlMetrics.from_settings(settings)
    try:
        yield metrics
    finally:
        if metrics is not None:
            metrics.close()


def _note(metrics: CrawlMetrics | None, **values: float) -> None:
    if metrics is not None:
        metrics.crawl.update(values)


def _lap(this: RoundReport, phase: str, started: float) -> float:
    """Note the seconds of *phase*, begun at *started*; return now (the next phase's start)."""
    now = time.monotonic()
    this.seconds[phase] = now - started
    return now


def _log_parse(
    this: RoundReport, counts: ParseCounts, *, started: float, log: Callable[[str], None]
) -> None:
    """Say what the parse of a round did, pages parsed during the fetch included."""
    _lap(this, "parse", started)
    this.parsed = counts.parsed + counts.resumed
    line = f"round {this.number}: parse: {this.parsed} pages parsed"
    if counts.resumed:
        line += f" ({counts.resumed} during the fetch)"
    parsed_cut = this.cut.get("nutch/parse/truncated", 0) + counts.truncated_parsed
    cut = cut_summary(
        max(this.cut.get("nutch/fetch/truncated", 0), parsed_cut + counts.truncated),
        parsed_cut,
        counts.truncated,
        this.cut.get("nutch/parse/outlinks_cut", 0) + counts.outlinks_cut,
    )
    others = [
        f"{n} {label}"
        for label, n in (
            ("redirects", counts.redirects),
            ("failed", counts.failed),
            ("not parsed", counts.not_parsed),  # truncated ones: below
        )
        if n
    ]
    if others:
        line += f", {', '.join(others)}"
    log(f"{line}{cut}; {this.seconds['parse']:.1f} s")


def _statuses(statuses: Mapping[str, int]) -> str:
    """``3 URLs fetched: 2 success, 1 notfound``, from counts by fetch status."""
    total = sum(statuses.values())
    text = f"{total} URLs fetched"
    if statuses:
        text += ": " + ", ".join(f"{n} {name.lower()}" for name, n in sorted(statuses.items()))
    return text


def _table(rounds: Sequence[RoundReport]) -> list[str]:
    """The rounds as a table: batch, URLs generated, fetched by status, parsed, new URLs and the
    seconds of the round's phases."""
    if not rounds:
        return []
    header = ("round", "batch", "URLs", "fetched", "parsed", "new URLs", "seconds")
    body = [
        (
            str(r.number),
            r.batch_id,
            str(r.selected),
            ", ".join(f"{n} {k.lower()}" for k, n in sorted(r.statuses.items())) or "-",
            str(r.parsed),
            str(r.new_rows),
            f"{sum(r.seconds.values()):.1f}",
        )
        for r in rounds
    ]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    numeric = {0, 2, 4, 5, 6}

    def cells(row: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    return [cells(header), *(cells(row) for row in body)]


def _fetch(
    table: WebTable,
    settings: BaseSettings,
    batch_id: str,
    sizes: Sequence[int],
    overrides: Mapping[str, Any],
    start_fetch: StartFetch,
    *,
    read_ahead: bool = True,
) -> tuple[ReadAhead | None, str, dict[str, int], dict[str, int]]:
    """Fetch *batch_id*, whose partitions hold *sizes* URLs: each partition that has any in a
    child of its own, all at once, while this process reads ahead for updatedb (unless not
    *read_ahead*). Return the read ahead, what failed (``""`` when every child exited with 0),
    the rows fetched by status and the pages cut short
    (:data:`~nutchy.jobs._cycle.CUT_STATS`), summed over the children."""
    if len(sizes) == 1:
        partitions: list[str | None] = [None]
    else:
        partitions = [f"{k}/{len(sizes)}" for k, size in enumerate(sizes) if size]
    waits: list[tuple[str | None, Callable[[], int | FetchRun]]] = []
    ahead = None
    try:
        # One at a time, so that if a start fails, those started are still waited for.
        for partition in partitions:
            waits.append((partition, start_fetch(batch_id, overrides, partition)))  # noqa: PERF401
        if read_ahead:
            ahead = _read_ahead(table, settings, batch_id)
    finally:  # never leave a child running unwaited
        runs = [(partition, wait()) for partition, wait in waits]
    if isinstance(start_fetch, FetchProcesses):
        # what the parse process of a fetch in this process kept for updatedb
        shares = start_fetch.take_shares(batch_id, overrides)
        if shares:
            ahead = parsed_ahead(batch_id, shares, ahead)
    codes = [(p, run if isinstance(run, int) else run.code) for p, run in runs]
    statuses: dict[str, int] = {}
    cut: dict[str, int] = {}
    for _, run in runs:
        if isinstance(run, FetchRun):
            for name, value in run.stats.items():
                if not isinstance(value, int):
                    continue
                if name.startswith(STATUS_STAT):
                    key = name.removeprefix(STATUS_STAT)
                    statuses[key] = statuses.get(key, 0) + value
                elif name in CUT_STATS:
                    cut[name] = cut.get(name, 0) + value
    failed = [
        f"exit code {code}" if partition is None else f"partition {partition}: exit code {code}"
        for partition, code in codes
        if code != 0
    ]
    return ahead, "; ".join(failed), statuses, cut


def _reads_ahead(
    settings: BaseSettings, start_fetch: StartFetch, overrides: Mapping[str, Any]
) -> bool:
    """Whether the crawl reads ahead for updatedb while it fetches with *overrides*: not beside
    a fetch in this process (:class:`FetchThread`) unless ``NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS``
    is given (by the project or ``-s``). There it shares the interpreter with the fetch instead
    of using a core the fetch leaves free, and holds its outlinks beside the fetch's memory:
    docs/crawl.md."""
    if not isinstance(start_fetch, FetchProcesses) or not start_fetch.fetches_here(overrides):
        return True
    given = settings.getpriority("NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS") or 0
    return given > SETTINGS_PRIORITIES["default"]


def _read_ahead(table: WebTable, settings: BaseSettings, batch_id: str) -> ReadAhead | None:
    """updatedb's first read of the batch, done while it is fetched; ``None`` when turned off
    (``NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS`` = 0) or if the table could not be read (updatedb then
    reads it all after the fetch, and reports what is wrong)."""
    limit = get_int(settings, "NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS", 0)
    if limit == 0:
        return None
    try:
        return read_ahead(table, batch_id, update_config(settings, batch_id), max_outlinks=limit)
    except StoreError as exc:  # an optimization: the crawl goes on without it
        logger.warning("Could not read batch %s ahead of updatedb: %s", batch_id, exc)
        return None


def _log_inject(result: InjectResult, log: Callable[[str], None]) -> None:
    """What inject did with the seeds, as ``nutchy inject`` says it, in fewer lines."""
    others = [f"{n} {label}" for label, n in result.outcomes() if n and label != "injected"]
    line = f"inject: {result.injected} URLs injected"
    if others:
        line += f" ({result.lines} lines read; {', '.join(others)})"
    log(line)
    for problem in result.unreadable:
        log(f"inject: cannot read {problem}")
    for malformed in result.malformed_lines:
        log(f"inject: malformed line {malformed}")
    if result.malformed > len(result.malformed_lines):
        log(f"inject: … and {result.malformed - len(result.malformed_lines)} more malformed lines")


def _by_hand(batch_id: str) -> str:
    """What finishes the fetch, parse and update of *batch_id*."""
    return (
        "the same nutchy crawl command, which finishes it before it generates another (or by"
        f" hand: scrapy crawl nutch -a batch={batch_id} -a resume=true, which fetches what is"
        " left, parses what was not parsed and updates the batch)"
    )


def _resumable(table: WebTable, left: _unfinished.Round) -> bool:
    """Whether rows still carry the generate mark of *left*'s batch: if none do, the batch was
    finished by hand since (or its generate marked nothing)."""
    marked = table.scan(["markers"], marker=(Mark.GENERATE, left.batch_id), limit=1)
    return any(True for _ in marked)


def _drop_generate_marks(table: WebTable, batch_id: str) -> int:
    """Take the generate mark of *batch_id* off the rows a generate cut short marked, so that
    generating the batch again selects them with the rest; return how many there were."""
    keys = [
        page.key
        for page in table.scan(["markers"], marker=(Mark.GENERATE, batch_id), skip_errors=True)
    ]
    with table.writer() as writer:
        for key in keys:
            writer.add(build_update(key, {}, {"markers": {Mark.GENERATE: None}}))
    return len(keys)


def _now() -> int:
    return int(time.time() * 1000)
