"""The fetch's Scrapy scheduler: a batch of the web table, fetched politely, outcomes written.

:class:`NutchScheduler` is Nutch's ``FetcherReducer`` on Scrapy. It keeps the rows of the batch
it is about to fetch in one queue per host, domain or IP (``fetcher.queue.mode``), hands the
engine a request only when a queue may start one, and has what each fetch gave written. Three
components of their own do the rest, each usable without a crawler:

- a :class:`~nutchy.frontier.Frontier` brings the rows of the batch
  (:class:`~nutchy.frontier.LocalFrontier` reads them from the web table);
- the :class:`~nutchy.outcomes.OutcomeWriter` writes the outcomes to the table in batches;
- the :class:`~nutchy.rounds.RoundDriver` ends each batch (the parse and updatedb pipelines
  act then) and, without ``-a batch``, generates the next ones.

Politeness
    A queue has at most ``fetcher.threads.per.queue`` requests in flight, and starts the next one
    ``fetcher.server.delay`` seconds after the end of the previous one (``fetcher.server.min.delay``
    when it fetches several pages at a time; robots.txt's ``Crawl-delay``, at least
    ``fetcher.min.crawl.delay``, when the host gives one, with one request at a time). Each queue
    is a Scrapy download slot (``meta["download_slot"]``) whose delay and concurrency the
    scheduler sets, with no random jitter, so Scrapy's downloader enforces the delay to the
    millisecond. The scheduler releases requests round-robin over the queues that may start one
    now, so one slow host never fills the downloader; when none may, it releases the request of
    the queue that may start soonest, which then waits in its slot. A 429 or 503 with
    ``Retry-After`` holds the queue for that long (a longer wait than ``fetcher.max.crawl.delay``
    leaves the host's rows for a later fetch); a 429 without it doubles the queue's pause. A
    robots.txt answering 5xx holds the queue for ``http.robots.503.defer.visits.delay``. A
    robots.txt request counts as a request of the queue: the page that asked for it comes back
    (``meta["nutch_after_robots"]``) and waits for the delay. Each queue's last request is
    written to the crawl's host memory (:mod:`nutchy.store.hosts`), and a queue made in this
    process reads it first: the delay holds across rounds and processes.

Writing
    Requests stop being released while twice ``NUTCH_FETCHER_FLUSH_SIZE`` outcomes wait to be
    written (see :mod:`nutchy.outcomes` for what a crash loses).

Time limit
    After ``fetcher.timelimit.mins`` (``-a timelimit=MIN``) no request is released any more; the
    requests in flight end and are written, and the rows not fetched keep their generate mark
    without a fetch mark, for a resumed fetch.

Garbage collection
    While it fetches, Python's cyclic garbage collector runs its young collection every
    ``NUTCH_FETCHER_GC_THRESHOLD`` allocations rather than every 700 (the interpreter's
    threshold, put back when the scheduler closes unless another part of the process set a
    threshold of its own meanwhile, which is then left as it is): each page makes thousands of short-lived
    objects (Scrapy's and Twisted's requests, Deferreds, coroutines), and at 700 the collector
    ran some 800 times in a fetch of 2,000 pages, for 0.7-0.9 s of the fetch process's CPU, most
    of it to find nothing (docs/benchmarks.md).

The end of a batch, and rounds
    When the crawl goes idle, every row of the batch has ended: the scheduler writes the last
    outcomes, then the round driver ends the batch and, without ``-a batch``, generates the next
    one; the fetch queues, and their politeness, carry over from one round to the next.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import call_later, create_looping_call, run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from nutchy._checks import refuse_to_start
from nutchy._fetch import (
    META_AFTER_ROBOTS,
    META_CHAIN,
    META_CRAWL_DELAY,
    META_DEFER,
    META_ENTRY,
    META_EXPIRED,
    META_FOLLOW,
    META_HANDOVER,
    META_NEW_ROW,
    META_QUEUE,
    FetchJob,
    FetchSettings,
    fetch_finished,
    fetch_gauges,
    fetch_halted,
)
from nutchy.config import stop_file
from nutchy.core.fetch import (
    FetchEntry,
    FetchOutcome,
    exception_status,
    fetch_change,
)
from nutchy.core.status import CrawlStatus, ProtocolStatusCode
from nutchy.exceptions import ConfigError, FrontierUnavailable, StoreError, TableMissing
from nutchy.frontier import FETCH_COLUMNS, LocalFrontier
from nutchy.jobs import _settings
from nutchy.jobs.generate import GenerateOptions
from nutchy.jobs.inject import InjectOptions
from nutchy.outcomes import OutcomeWriter
from nutchy.progress import Progress
from nutchy.rounds import RoundDriver
from nutchy.store import open_table
from nutchy.store.hosts import Visit, open_host_memory
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from scrapy.core.downloader import Downloader
    from scrapy.core.scheduler import BaseScheduler
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from nutchy.frontier import Frontier, FrontierOwner
    from nutchy.store.hosts import HostMemory
    from nutchy.store.table import WebTable

__all__ = ["FETCH_COLUMNS", "NutchScheduler"]

logger = logging.getLogger(__name__)

# Why a fetch stopped taking URLs, when the table failed it.
_READ_ERROR = "a read error"
_WRITE_ERROR = "a write error"
_STORE_FAILURES = (_READ_ERROR, _WRITE_ERROR)

_Item = tuple[FetchEntry, "dict[str, Any] | None"]

#: Request meta of the request the scheduler hands the engine only to make it look at the crawl
#: again (:meth:`NutchScheduler._nudge`); it is never fetched.
_META_NUDGE = "_nutch_nudge"
_NUDGE_URL = "data:,"


# --- queues --------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Queue:
    """One fetch queue: its rows in memory and its politeness."""

    id: str
    delay: float
    threads: int
    entries: deque[_Item] = field(default_factory=deque)
    inflight: int = 0
    #: monotonic time from which a request may start (the end of the last one plus the delay)
    ready_at: float = 0.0
    #: monotonic time before which nothing starts (Retry-After, robots.txt deferral)
    blocked_until: float = 0.0
    scheduled: bool = False
    dropped: bool = False
    backoff: int = 0
    defers: int = 0
    #: requests that failed with an exception (fetcher.max.exceptions.per.queue)
    exceptions: int = 0
    #: its last request in another process (or round) is being read from the host memory
    recalling: bool = False

    def can_release(self) -> bool:
        return (
            bool(self.entries)
            and self.inflight < self.threads
            and not self.dropped
            and not self.recalling
        )


# --- the downloader ------------------------------------------------------------------------------


class _DownloaderSlots:
    """The one place where nutchy touches Scrapy's downloader.

    It gives a fetch queue's download slot the queue's delay and concurrency, with no jitter (as
    Scrapy's AutoThrottle sets slot delays), and counts the delay from the end of the slot's last
    download rather than from its start, as Nutch does. Scrapy creates a slot for the first
    request of a queue with its own defaults; that request needs no delay, and the slot gets the
    queue's policy when it ends, before the queue's next request is released (or as soon as the
    request reaches the downloader, when a queue has several requests in flight).
    """

    def __init__(self, downloader: Downloader) -> None:
        self.downloader = downloader

    def exists(self, key: str) -> bool:
        """Whether the slot *key* exists (a request of it reached the downloader): only then
        does it hold a request released early until its delay is over."""
        return key in self.downloader.slots

    def configure(self, key: str, delay: float, concurrency: int) -> None:
        slot = self.downloader.slots.get(key)
        if slot is not None:
            slot.delay = delay
            slot.concurrency = concurrency
            slot.jitter = 0.0

    def finished(self, key: str, delay: float, concurrency: int) -> None:
        """A request of the slot ended: the slot's next one starts *delay* seconds from now."""
        slot = self.downloader.slots.get(key)
        if slot is not None:
            slot.delay = delay
            slot.concurrency = concurrency
            slot.jitter = 0.0
            slot.lastseen = time.monotonic()


class _Room(Mapping[str, int]):
    """The room left in each queue, as it is when read (a frontier reads it when its read
    starts, which may be after the scheduler asked for it)."""

    def __init__(self, queues: dict[str, _Queue], per_queue: int) -> None:
        self._queues = queues
        self._per_queue = per_queue

    def __getitem__(self, key: str) -> int:
        return self._per_queue - len(self._queues[key].entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._queues)

    def __len__(self) -> int:
        return len(self._queues)


# --- the scheduler -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Summary:
    read: int = 0
    released: int = 0
    outcomes: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


class NutchScheduler:
    """Fetches the batches of the web table (see the module docstring).

    *job* says which rows (``None``: the spider is not nutchy's, and every call goes to
    *fallback*, Scrapy's own scheduler). *table* opens the web table (called in a thread when the
    spider opens); *frontier* and *rounds* build the :class:`~nutchy.frontier.Frontier` and the
    :class:`~nutchy.rounds.RoundDriver` on the open table. *downloader* gives access to the slots
    of the queues, *crawl* hands the engine a request (the engine then asks for more),
    *close_spider* ends the crawl with a reason, and *stats* is the crawler's. *seeds* injects
    the crawl's seeds (``-a seeds``) into the open table, in that thread, before anything is read.
    """

    def __init__(
        self,
        job: FetchJob | None,
        settings: FetchSettings,
        *,
        table: Callable[[], WebTable],
        stats: StatsCollector,
        frontier: Callable[[WebTable, FrontierOwner], Frontier] | None = None,
        rounds: Callable[[WebTable, Frontier], RoundDriver] | None = None,
        downloader: _DownloaderSlots | None = None,
        crawl: Callable[[Request], None] | None = None,
        fallback: BaseScheduler | None = None,
        close_spider: Callable[[str], object] | None = None,
        seeds: Callable[[WebTable], object] | None = None,
        progress: Progress | None = None,
        memory: Callable[[WebTable], HostMemory] | None = None,
        gc_threshold: int = 0,
    ) -> None:
        self.job = job
        self.settings = settings
        self.stats = stats
        self._open_table = table
        self._seeds = seeds
        self._progress = progress
        self._open_memory = memory
        self._memory: HostMemory | None = None
        #: queues whose last request elsewhere is to be read, and whether a read is under way
        self._to_recall: list[str] = []
        self._recalling = False
        #: the last request of each queue, not written to the host memory yet
        self._visits: dict[str, Visit] = {}
        self._visits_loop: Any = None
        self._memory_logged = False
        #: the timer that wakes the engine when the next queue may start (and when)
        self._wake_call: Any = None
        self._wake_at = 0.0
        self._slots = downloader
        self._crawl = crawl
        self._fallback = fallback
        self._resume = settings.resume if job is None or job.resume is None else job.resume
        limit = (
            settings.time_limit_mins if job is None or job.time_limit is None else job.time_limit
        )
        self._time_limit = limit if limit is not None and limit >= 0 else None
        self._per_queue = settings.queue_room
        self._capacity = settings.capacity
        self._make_frontier = frontier or self._local_frontier
        self._make_rounds = rounds or (lambda table, _: RoundDriver(table, stats=stats))
        self._table: WebTable | None = None
        self._frontier: Frontier | None = None
        self._rounds: RoundDriver | None = None
        self._writer: OutcomeWriter | None = None
        # queues
        self._queues: dict[str, _Queue] = {}
        self._room = _Room(self._queues, self._per_queue)
        self._ready: deque[_Queue] = deque()
        self._soft: list[tuple[float, int, _Queue]] = []
        self._hard: list[tuple[float, int, _Queue]] = []
        self._seq = itertools.count()
        self._queued = 0
        #: the rows in flight: id of the entry -> the entry, its queue, when it was released,
        #: and its request
        self._released: dict[int, tuple[FetchEntry, _Queue, float, Request]] = {}
        #: ids of the entries the watchdog recorded while their request was still out
        self._expired: set[int] = set()
        self._watchdog: Any = None
        self._other: deque[Request] = deque()
        # reading
        self._reading = False
        self._read_call: Deferred[list[tuple[str, FetchEntry]]] | None = None
        self._follows = 0
        self._starved = False
        self._stopped = False
        self._deadline: float | None = None
        self._deadline_call: Any = None
        self._summary = _Summary()
        #: the batches this crawl started to fetch, in order, for the closing line
        self._batches: list[str | None] = []
        self._started = 0.0
        # the end of a batch, and rounds
        self._close_spider = close_spider
        self._phase = "fetching"  # then "wrapping" (the batch ended), "done" (nothing more)
        self._wrap_up_call: Deferred[None] | None = None
        self._closing = False
        self._stop_reason = ""
        #: the young generation's threshold of the garbage collector while fetching (0: the
        #: interpreter's), the thresholds it set and those it had before, put back on close
        self._gc_threshold = gc_threshold
        self._gc_set: tuple[int, int, int] | None = None
        self._gc_before: tuple[int, int, int] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        job: FetchJob | None = getattr(crawler.spider, "fetch_job", None)
        settings = crawler.settings
        if job is None:
            # Not the nutch spider: Scrapy's own scheduler does the work.
            from scrapy.core.scheduler import Scheduler

            return cls(
                None,
                FetchSettings(),
                table=_no_table,
                stats=crawler.stats,
                fallback=Scheduler.from_crawler(crawler),
            )
        engine = crawler.engine
        stats = crawler.stats
        assert stats is not None
        fetch_settings = FetchSettings.from_settings(settings)
        generate_options = None
        if job.generates:
            generate_options = GenerateOptions.from_settings(settings, top_n=job.top_n)
        partition_mode = _settings.get_choice(
            settings, "NUTCH_PARTITION_URL_MODE", ("byHost", "byDomain", "byIP")
        )
        partition_seed = _settings.get_int(settings, "NUTCH_PARTITION_URL_SEED")
        resume = fetch_settings.resume if job.resume is None else job.resume

        round_args: dict[str, Any] = {
            "stats": stats,
            "signals": crawler.signals,
            "generate_options": generate_options,
            "stop_file": stop_file(settings),
            "updates": _settings.get_bool(settings, "NUTCH_FETCHER_UPDATEDB"),
        }
        if _settings.get_choice(settings, "NUTCH_FRONTIER", ("local", "redis")) == "redis":
            from nutchy.redis_frontier import open_redis_frontier
            from nutchy.workers import WorkerFrontier, WorkerRounds

            redis = open_redis_frontier(settings)
            hold = _settings.get_float(settings, "NUTCH_FRONTIER_QUEUE_HOLD")
            if hold <= 0:
                raise ConfigError(f"NUTCH_FRONTIER_QUEUE_HOLD must be > 0, got {hold!r}")

            def frontier(table: WebTable, owner: FrontierOwner) -> Frontier:
                return WorkerFrontier(redis, table, fetch_settings, owner, stats=stats, hold=hold)

            def rounds(table: WebTable, frontier: Frontier) -> RoundDriver:
                assert isinstance(frontier, WorkerFrontier)
                return WorkerRounds(table, frontier, **round_args)

        else:

            def frontier(table: WebTable, owner: FrontierOwner) -> Frontier:
                return LocalFrontier(
                    table,
                    fetch_settings,
                    stats=stats,
                    resume=resume,
                    partition_mode=partition_mode,
                    partition_seed=partition_seed,
                )

            # A spider may bring its own driver (nutchy crawl's long-lived fetch process).
            driver = getattr(crawler.spider, "nutch_round_driver", None) or RoundDriver

            def rounds(table: WebTable, frontier: Frontier) -> RoundDriver:
                return driver(table, **round_args)

        def close_spider(reason: str) -> object:
            return deferred_from_coro(engine.close_spider_async(reason=reason))

        scheduler = cls(
            job,
            fetch_settings,
            table=lambda: open_table(settings),
            stats=stats,
            frontier=frontier,
            rounds=rounds,
            downloader=_DownloaderSlots(engine.downloader),
            crawl=engine.crawl,
            close_spider=close_spider,
            seeds=None
            if job.seeds is None
            else partial(job.seeds.inject, options=InjectOptions.from_settings(settings)),
            progress=Progress(
                "fetch",
                unit="URLs",
                log_interval=_settings.get_float(settings, "NUTCH_FETCHER_PROGRESS_LOG_INTERVAL"),
                check_every=1,
            ),
            memory=lambda table: open_host_memory(table.store),
            gc_threshold=_settings.get_int(settings, "NUTCH_FETCHER_GC_THRESHOLD", 0),
        )
        crawler.signals.connect(scheduler._fetch_finished, signal=fetch_finished)
        crawler.signals.connect(scheduler._write_failed, signal=fetch_halted)
        crawler.signals.connect(scheduler.gauges, signal=fetch_gauges)
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        if scheduler.settings.threads_per_queue > 1:
            # Several requests of a queue may wait in its slot: the slot must know the queue's
            # policy (a Crawl-delay just read) before it starts any of them.
            crawler.signals.connect(
                scheduler._reached_downloader, signal=signals.request_reached_downloader
            )
        return scheduler

    def _local_frontier(self, table: WebTable, owner: FrontierOwner) -> Frontier:
        return LocalFrontier(
            table,
            self.settings,
            stats=self.stats,
            resume=self._resume,
        )

    # --- the scheduler interface -----------------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None] | None:
        if self._fallback is not None:
            return self._fallback.open(spider)
        return deferred_from_coro(self._open())

    def close(self, reason: str) -> Deferred[None] | None:
        if self._fallback is not None:
            return self._fallback.close(reason)
        return deferred_from_coro(self._close(reason))

    def has_pending_requests(self) -> bool:
        if self._fallback is not None:
            return self._fallback.has_pending_requests()
        return bool(
            self._queued
            or self._other
            or self._reading
            or self._follows
            # a row in flight ends in an outcome, if need be the watchdog's
            or self._released
            or (not self._stopped and self._frontier is not None and self._frontier.more())
        )

    def enqueue_request(self, request: Request) -> bool:
        if self._fallback is not None:
            return self._fallback.enqueue_request(request)
        meta = request.meta
        if _META_NUDGE in meta:
            return True  # it has done its work: the engine looks at the crawl again
        if META_FOLLOW in meta:
            self._lookup(request)
            return True
        entry: FetchEntry | None = meta.get(META_ENTRY)
        if entry is None:
            self._other.append(request)
            return True
        # A request of a row coming back: a robots.txt deferral, a retry by another component,
        # or one the scheduler handed the engine itself.
        if id(entry) in self._expired:
            return True  # the watchdog recorded it already
        released = self._released.pop(id(entry), None)
        queue = self._queues.get(meta.get(META_QUEUE, ""))
        if released is not None:
            queue = released[1]
            queue.inflight -= 1
        extra: dict[str, Any] | None = {
            k: meta[k] for k in (META_CHAIN, META_NEW_ROW) if k in meta
        } or None
        if queue is None or not self._push(queue, (entry, extra), front=True):
            return True  # the row stays unfetched, for a later fetch
        now = time.monotonic()
        if meta.get(META_AFTER_ROBOTS):
            self._after_robots(queue, request, now)
        defer = meta.get(META_DEFER)
        if defer is not None:
            queue.defers += 1
            if queue.defers > self.settings.robots_defer_retries:
                self._drop(queue, "robots_deferred")
            else:
                queue.blocked_until = max(queue.blocked_until, now + defer)
                logger.info(
                    "Deferring %(queue)s for %(delay)s s: its robots.txt answered 5xx",
                    {"queue": queue.id, "delay": defer},
                )
        self._schedule(queue, now)
        return True

    def next_request(self) -> Request | None:
        if self._fallback is not None:
            return self._fallback.next_request()
        if self._other:
            return self._other.popleft()
        now = time.monotonic()
        if self._deadline is not None and now >= self._deadline:
            self._stop()
        self._maybe_read()
        if self._backlogged():
            self._starved = True
            return None
        while True:
            queue = self._next_queue(now)
            if queue is None:
                self._starved = True
                self._wake_when_ready(now)
                return None
            request = self._take(queue, now)
            if request is not None:
                self._starved = False
                return request

    # --- releasing ------------------------------------------------------------------------------

    def _schedule(self, queue: _Queue, now: float) -> None:
        if queue.scheduled or not queue.can_release():
            return
        queue.scheduled = True
        if queue.blocked_until > now:
            heapq.heappush(self._hard, (queue.blocked_until, next(self._seq), queue))
        elif queue.ready_at > now:
            heapq.heappush(self._soft, (queue.ready_at, next(self._seq), queue))
        else:
            self._ready.append(queue)

    def _next_queue(self, now: float) -> _Queue | None:
        """The queue to release a request from: the next one, round-robin, that may start one
        now; else the one that may start soonest (its download slot holds the request until
        then); ``None`` when every queue is busy, blocked or empty."""
        for heap in (self._hard, self._soft):
            while heap and heap[0][0] <= now:
                queue = heapq.heappop(heap)[2]
                queue.scheduled = False
                self._schedule(queue, now)
        while self._ready:
            queue = self._ready.popleft()
            queue.scheduled = False
            if queue.can_release() and queue.blocked_until <= now and queue.ready_at <= now:
                return queue
            self._schedule(queue, now)
        held: list[_Queue] = []
        found = None
        while self._soft:
            queue = heapq.heappop(self._soft)[2]
            queue.scheduled = False
            if queue.can_release() and queue.blocked_until <= now:
                if self._slots is None or self._slots.exists(queue.id):
                    found = queue
                    break
                held.append(queue)  # no slot yet to hold it: it waits here
                continue
            self._schedule(queue, now)
        for queue in held:
            self._schedule(queue, now)
        return found

    def _wake_when_ready(self, now: float) -> None:
        """Hand the engine a request when the first queue waiting for its delay, or held, may
        start one (the engine otherwise looks again only when a request ends, or every 5 s)."""
        times = [heap[0][0] for heap in (self._hard, self._soft) if heap]
        if not times or self._crawl is None:
            return
        when = min(times)
        if self._wake_call is not None:
            if self._wake_at <= when:
                return
            self._wake_call.cancel()
        self._wake_at = when
        self._wake_call = call_later(max(when - now, 0.0) + 0.001, self._woken)

    def _woken(self) -> None:
        self._wake_call = None
        if self._starved and not self._backlogged():
            self._poke()

    def _take(self, queue: _Queue, now: float) -> Request | None:
        entry, extra = queue.entries.popleft()
        self._queued -= 1
        if len(queue.entries) * 2 < self._per_queue and self._frontier is not None:
            self._frontier.low(queue.id)
        meta: dict[str, Any] = {META_ENTRY: entry, META_QUEUE: queue.id, "download_slot": queue.id}
        if extra:
            meta.update(extra)
        try:
            request = Request(entry.url, meta=meta, dont_filter=True)
        except ValueError as exc:  # a URL Scrapy refuses: recorded like a failed fetch
            outcome = FetchOutcome(exception_status("invalid url", str(exc)))
            change = fetch_change(entry, outcome, now=_now_ms())
            self._record(entry, outcome, build_update(entry.key, *change))
            self._schedule(queue, now)
            return None
        queue.inflight += 1
        self._released[id(entry)] = (entry, queue, now, request)
        self._summary.released += 1
        self._schedule(queue, now)
        return request

    def _push(self, queue: _Queue, item: _Item, *, front: bool = False) -> bool:
        """Add a row to *queue*, unless the fetch stopped or the queue was dropped (the row is
        then left for a later fetch); return whether it was added."""
        if self._stopped or queue.dropped:
            self.stats.inc_value("nutch/fetch/left_for_later")
            return False
        if front:
            queue.entries.appendleft(item)
        else:
            queue.entries.append(item)
        self._queued += 1
        return True

    def _drop(self, queue: _Queue, reason: str) -> None:
        """Leave the rest of *queue*'s rows for a later fetch: they are not fetched, not read."""
        queue.dropped = True
        dropped = len(queue.entries)
        self._queued -= dropped
        queue.entries.clear()
        if self._frontier is not None:
            self._frontier.drop(queue.id)
        self.stats.inc_value(f"nutch/fetch/queue_dropped/{reason}")
        self.stats.inc_value("nutch/fetch/left_for_later", dropped)
        logger.warning(
            "Leaving the rest of %(queue)s for a later fetch (%(reason)s)",
            {"queue": queue.id, "reason": reason},
        )

    def _stop(self) -> None:
        """The time limit: release nothing more, read nothing more."""
        if self._stopped:
            return
        self.stats.inc_value("nutch/fetch/hit_by_time_limit", self._queued)
        self._halt("its time limit")
        logger.info("Fetch time limit reached: the rest of the batch is left for -a resume=true")

    def _halt(self, reason: str) -> None:
        """Release nothing more, read nothing more, for *reason*; the requests in flight end."""
        self._stopped = True
        self._stop_reason = reason
        for queue in self._queues.values():
            queue.entries.clear()
        self._queued = 0
        if self._frontier is not None:
            self._frontier.stop()
        self._ready.clear()
        self._soft.clear()
        self._hard.clear()

    # --- the downloader's news ------------------------------------------------------------------

    def _reached_downloader(self, request: Request) -> None:
        queue = self._queues.get(request.meta.get(META_QUEUE, ""))
        if queue is None or self._slots is None:
            return
        self._apply_crawl_delay(queue, request)
        self._slots.configure(request.meta["download_slot"], queue.delay, queue.threads)

    def _apply_crawl_delay(self, queue: _Queue, request: Request) -> None:
        crawl_delay = request.meta.get(META_CRAWL_DELAY)
        if crawl_delay is not None:
            # Crawl-delay asks for one request at a time, that far apart.
            queue.delay = self.settings.crawl_delay(crawl_delay)
            queue.threads = 1

    def _fetch_finished(
        self,
        request: Request,
        outcome: FetchOutcome | None,
        update: RowUpdate | None,
        retry_after: float | None,
        throttled: bool,
        requested: bool,
    ) -> None:
        entry = request.meta.get(META_ENTRY)
        if entry is not None and id(entry) in self._expired:
            # The watchdog recorded this row and freed its queue already.
            self._expired.discard(id(entry))
            self.stats.inc_value("nutch/fetch/watchdog/late")
            return
        released = self._released.pop(id(entry), None) if entry is not None else None
        now = time.monotonic()
        # A page denied by the robots.txt just requested for it: the host was asked all the same.
        requested = requested or bool(request.meta.get(META_AFTER_ROBOTS))
        if released is not None:
            queue = released[1]
            queue.inflight -= 1
            self._apply_crawl_delay(queue, request)
            if requested:
                self._visited(queue)
            # Nutch's finishFetchItem: the next request after the delay, at once after a page
            # that needed no request (a robots.txt denial).
            queue.ready_at = now + (queue.delay if requested else 0.0)
            if requested and self._slots is not None:
                self._slots.finished(request.meta["download_slot"], queue.delay, queue.threads)
            self._throttle(queue, now, retry_after, throttled)
            if outcome is not None and not throttled and retry_after is None:
                self._count_exception(queue, outcome)
            self._schedule(queue, now)
            if not queue.entries and not queue.inflight and self._frontier is not None:
                self._frontier.idle(queue.id, max(queue.ready_at, queue.blocked_until) - now)
        if outcome is not None and update is not None and entry is not None:
            self._record(entry, outcome, update)
            if outcome.crawl_status == CrawlStatus.FETCHED:
                # the parse pipeline may have the parse process write it (nutchy.outcomes)
                request.meta[META_HANDOVER] = (self._writer, entry)
            if not self._released and not self._queued and self._writer is not None:
                # Nothing in flight, nothing to release: what waits is the end of a batch (or
                # of what this worker holds of it), written now rather than at the next tick.
                self._writer.flush()
        elif outcome is None:
            self.stats.inc_value("nutch/fetch/dropped_by_other")
            if entry is not None and self._frontier is not None:
                self._frontier.skipped([entry])

    def _count_exception(self, queue: _Queue, outcome: FetchOutcome) -> None:
        """Nutch 1.x's ``fetcher.max.exceptions.per.queue``: once a queue's requests failed with
        an exception that many times in this fetch, the rest of its rows are left for a later
        fetch (they keep their generate mark; updatedb releases them for the next generate)."""
        if outcome.status.code != ProtocolStatusCode.EXCEPTION:
            return
        queue.exceptions += 1
        limit = self.settings.max_exceptions_per_queue
        if 0 <= limit <= queue.exceptions and not queue.dropped:
            self._drop(queue, "exceptions")

    @property
    def stuck_after(self) -> float:
        """Seconds after which a request released from a queue with no delay and no outcome yet
        is taken for lost: its robots.txt fetched through five redirects (six timeouts), the page
        (one more), and one timeout of slack; a queue's own delay is added to it."""
        return 8 * self.settings.timeout

    def _watch(self) -> None:
        """The watchdog: a row whose request has been out longer than :attr:`stuck_after` plus
        its queue's delay, with no outcome, is recorded as a failed fetch and its queue freed,
        whatever became of the request (a component that lost it, a download that never ends).
        An outcome that comes for it later is dropped."""
        now = time.monotonic()
        lost = False
        for key, (entry, queue, since, request) in list(self._released.items()):
            bound = queue.delay + self.stuck_after
            if now - since <= bound:
                continue
            lost = True
            del self._released[key]
            self._expired.add(key)
            request.meta[META_EXPIRED] = True
            queue.inflight -= 1
            queue.ready_at = now + queue.delay
            self._schedule(queue, now)
            if not queue.entries and not queue.inflight and self._frontier is not None:
                self._frontier.idle(queue.id, max(queue.ready_at, queue.blocked_until) - now)
            outcome = FetchOutcome(
                exception_status("watchdog", f"no outcome {bound:.1f} s after the request left")
            )
            change = fetch_change(entry, outcome, now=_now_ms())
            self._record(entry, outcome, build_update(entry.key, *change))
            self.stats.inc_value("nutch/fetch/watchdog")
            logger.warning(
                "No outcome for %(url)s %(secs).1f s after its request left: recorded as failed",
                {"url": entry.url, "secs": now - since},
            )
        if lost and self._starved and not self._backlogged():
            self._poke()

    def _throttle(
        self, queue: _Queue, now: float, retry_after: float | None, throttled: bool
    ) -> None:
        limit = self.settings.max_crawl_delay
        if retry_after is not None:
            if 0 <= limit < retry_after:
                self._drop(queue, "retry_after")
                return
            queue.blocked_until = max(queue.blocked_until, now + retry_after)
            self.stats.inc_value("nutch/fetch/backoff/retry_after")
        elif throttled:
            queue.backoff += 1
            pause = max(queue.delay, 1.0) * 2 ** (queue.backoff - 1)
            cap = limit if limit >= 0 else 300.0
            queue.blocked_until = max(queue.blocked_until, now + min(pause, cap))
            self.stats.inc_value("nutch/fetch/backoff/429")
        else:
            queue.backoff = 0

    # --- reading --------------------------------------------------------------------------------

    def _maybe_read(self) -> None:
        frontier = self._frontier
        if self._reading or self._stopped or frontier is None:
            return
        budget = self._capacity - self._queued
        if budget <= 0 or not frontier.wants(self._queued):
            return
        self._reading = True
        self._read_call = d = deferred_from_coro(frontier.read(budget, self._room))
        d.addCallbacks(self._read_done, self._read_failed)

    def _read_done(self, items: list[tuple[str, FetchEntry]]) -> None:
        self._reading = False
        self._deliver(items)
        if self._starved:
            self._poke()
        self._maybe_read()
        if not self.has_pending_requests():
            self._nudge()

    def _nudge(self) -> None:
        """Make the engine look at the crawl now, which it otherwise does after a request ends
        or every 5 s: a frontier that found its batch done while nothing was in flight (a
        worker of a shared batch) ends it at once. Done through the engine's public door,
        with a request :meth:`enqueue_request` takes and drops."""
        if self._crawl is None:
            return
        with contextlib.suppress(RuntimeError):  # the engine is closing
            self._crawl(Request(_NUDGE_URL, meta={_META_NUDGE: True}, dont_filter=True))

    def _deliver(self, items: list[tuple[str, FetchEntry]]) -> None:
        """Put the rows a read brought in their queues."""
        self._summary.read += len(items)
        if self._stopped:
            return
        now = time.monotonic()
        touched: set[_Queue] = set()
        for queue_key, entry in items:
            queue = self._queue(queue_key)
            if self._push(queue, (entry, None)):
                touched.add(queue)
        for queue in touched:
            self._schedule(queue, now)
        self.stats.max_value("nutch/fetch/queues", len(self._queues))
        self.stats.max_value("nutch/fetch/queued_max", self._queued)

    def _read_failed(self, failure: Failure) -> None:
        self._reading = False
        self._stopped = True
        self._stop_reason = _READ_ERROR
        logger.error(
            "Cannot read the batch from the table: %(error)s; the fetch ends with the rows"
            " already read",
            {"error": failure.getErrorMessage()},
        )
        self.stats.inc_value("nutch/fetch/read_error")

    def _queue(self, key: str) -> _Queue:
        queue = self._queues.get(key)
        if queue is None:
            settings = self.settings
            queue = _Queue(key, settings.queue_delay, settings.threads_per_queue)
            self._queues[key] = queue
            if self._memory is not None:
                # Its last request in another process may oblige it to wait: read it first.
                queue.recalling = True
                self._to_recall.append(key)
                self._recall()
        return queue

    # --- the host memory ------------------------------------------------------------------------

    def _after_robots(self, queue: _Queue, request: Request, now: float) -> None:
        """The host's robots.txt was just requested for *request*, which robots.txt allows: its
        queue waits for its delay (a Crawl-delay now known) from now, as after any request."""
        self._apply_crawl_delay(queue, request)
        queue.ready_at = max(queue.ready_at, now + queue.delay)
        if self._slots is not None:
            self._slots.finished(queue.id, queue.delay, queue.threads)
        self._visited(queue)

    def _visited(self, queue: _Queue) -> None:
        """A request to *queue* ended now: the next process to fetch it owes it its delay."""
        if self._memory is not None:
            self._visits[queue.id] = Visit(_now_ms(), queue.delay)

    def _recall(self) -> None:
        """Read the last request of the queues just made from the host memory, in a thread,
        one read at a time; they release nothing until it is read."""
        memory = self._memory
        if self._recalling or not self._to_recall or memory is None:
            return
        keys, self._to_recall = self._to_recall, []
        self._recalling = True
        d = deferred_from_coro(run_in_thread(memory.visits, keys))
        d.addCallback(self._recalled, keys)
        d.addErrback(self._memory_failed, "read")
        d.addBoth(lambda _: self._recall_done(keys))

    def _recalled(self, visits: dict[str, Visit], keys: list[str]) -> None:
        now_ms = _now_ms()
        now = time.monotonic()
        for key in keys:
            visit = visits.get(key)
            queue = self._queues.get(key)
            if visit is None or queue is None:
                continue
            delay = max(visit.delay, queue.delay)
            # never longer than the delay itself: another machine's clock may run ahead
            wait = min((visit.at + round(delay * 1000) - now_ms) / 1000, delay)
            if wait > 0:
                # Held rather than ready later: its download slot does not exist yet, and could
                # not hold a request released early.
                queue.blocked_until = max(queue.blocked_until, now + wait)
                self.stats.inc_value("nutch/fetch/politeness/waited_for_earlier")

    def _recall_done(self, keys: list[str]) -> None:
        self._recalling = False
        now = time.monotonic()
        for key in keys:
            queue = self._queues.get(key)
            if queue is not None:
                queue.recalling = False
                self._schedule(queue, now)
        self._recall()
        if self._starved and not self._backlogged():
            self._poke()

    def _memory_failed(self, failure: Failure, what: str) -> None:
        self.stats.inc_value("nutch/fetch/politeness/memory_error")
        if not self._memory_logged:
            self._memory_logged = True
            logger.warning(
                "Cannot %(what)s the hosts' last requests in the host memory: %(error)s",
                {"what": what, "error": failure.getErrorMessage()},
            )

    def _flush_visits(self) -> None:
        self._write_visits()  # its errors are logged by its errback

    def _write_visits(self) -> Deferred[None] | None:
        """Write the last requests noted since the last write, in a thread."""
        memory = self._memory
        if memory is None or not self._visits:
            return None
        visits, self._visits = self._visits, {}
        d = deferred_from_coro(run_in_thread(memory.keep_visits, visits))
        d.addErrback(self._memory_failed, "write")
        return d

    def _lookup(self, request: Request) -> None:
        """Queue a followed redirect, once its target's row is read."""
        target, batch_id = request.meta[META_FOLLOW]
        chain = request.meta.get(META_CHAIN)
        frontier = self._frontier
        if frontier is None or self._stopped:
            return
        self._follows += 1
        d = deferred_from_coro(frontier.lookup(target, batch_id))

        def found(result: tuple[str | None, FetchEntry, bool]) -> None:
            self._follows -= 1
            queue_key, entry, new = result
            if queue_key is None or self._stopped:
                self.stats.inc_value("nutch/fetch/skipped/unresolved")
                return
            queue = self._queue(queue_key)
            if self._push(queue, (entry, {META_CHAIN: chain, META_NEW_ROW: new}), front=True):
                self._schedule(queue, time.monotonic())
            if self._starved:
                self._poke()

        def failed(failure: Failure) -> None:
            self._follows -= 1
            logger.warning("Cannot follow a redirect to %s: %s", target, failure.getErrorMessage())

        d.addCallbacks(found, failed)

    def _poke(self) -> None:
        """Wake the engine up after it found nothing to do: hand it a request of a queue that
        may start one (the engine gives it back through :meth:`enqueue_request`, then asks for
        the next request)."""
        if self._crawl is None:
            return
        now = time.monotonic()
        queue = self._next_queue(now)
        if queue is None:
            return
        entry, extra = queue.entries.popleft()
        self._queued -= 1
        meta: dict[str, Any] = {META_ENTRY: entry, META_QUEUE: queue.id}
        if extra:
            meta.update(extra)
        self._starved = False
        try:
            self._crawl(Request(entry.url, meta=meta, dont_filter=True))
        except (RuntimeError, ValueError):  # the engine is closing, or a URL Scrapy refuses
            queue.entries.appendleft((entry, extra))
            self._queued += 1
            self._schedule(queue, now)

    def gauges(self) -> dict[str, int]:
        """What the fetch holds now, for its metrics: queues known and busy, rows waiting in
        them, requests in flight."""
        busy = sum(1 for q in self._queues.values() if q.entries or q.inflight)
        return {
            "queues": len(self._queues),
            "busy_queues": busy,
            "queued": self._queued,
            "in_flight": len(self._released),
        }

    # --- what the frontier may ask -------------------------------------------------------------

    def wake(self) -> None:
        """The frontier may bring rows now: read, and wake the engine up if it found nothing
        to do."""
        self._maybe_read()
        if self._starved and not self._backlogged():
            self._poke()
        if not self.has_pending_requests():
            self._nudge()

    def forget(self, queue: str) -> None:
        """Drop the rows of *queue* held in memory: another worker fetches them now."""
        known = self._queues.get(queue)
        if known is None:
            return
        self._queued -= len(known.entries)
        known.entries.clear()

    # --- writing --------------------------------------------------------------------------------

    def _record(self, entry: FetchEntry, outcome: FetchOutcome, update: RowUpdate) -> None:
        summary = self._summary
        summary.outcomes += 1
        if self._progress is not None:
            self._progress.advance()
        name = outcome.status.name
        summary.statuses[name] = summary.statuses.get(name, 0) + 1
        stats = self.stats
        stats.inc_value(f"nutch/fetch/status/{name}")
        if outcome.http_code:
            stats.inc_value(f"nutch/fetch/http/{outcome.http_code}")
        if outcome.content is not None:
            stats.inc_value("nutch/fetch/bytes", len(outcome.content))
        if outcome.truncated:
            stats.inc_value("nutch/fetch/truncated")
        assert self._writer is not None
        self._writer.add(update, entry)

    def _backlogged(self) -> bool:
        return self._writer is not None and self._writer.backlogged()

    def _written(self, entries: Sequence[FetchEntry]) -> None:
        if self._frontier is not None:
            self._frontier.written(entries)
        if self._starved and not self._backlogged():
            self._poke()

    def _write_failed(self) -> None:
        if not self._stopped:
            # Every page fetched from now on would be fetched for nothing, and fetched again
            # by the resume: stop asking the hosts for more.
            self.stats.inc_value("nutch/fetch/stopped_by_write_error", self._queued)
            self._halt(_WRITE_ERROR)

    # --- lifecycle ------------------------------------------------------------------------------

    async def _open(self) -> None:
        assert self.job is not None
        table = await run_in_thread(self._open_checked)
        self._table = table
        self._frontier = self._make_frontier(table, self)
        self._rounds = self._make_rounds(table, self._frontier)
        self._writer = OutcomeWriter(
            table.write,
            flush_size=self.settings.flush_size,
            flush_interval=self.settings.flush_interval,
            stats=self.stats,
            written=self._written,
            failed=self._write_failed,
        )
        self._started = time.monotonic()
        if self._gc_threshold > 0:
            self._gc_before = gc.get_threshold()
            self._gc_set = (self._gc_threshold, *self._gc_before[1:])
            gc.set_threshold(*self._gc_set)
        if self._memory is not None:
            self._visits_loop = create_looping_call(self._flush_visits)
            self._visits_loop.start(self.settings.flush_interval, now=False)
        if self._time_limit is not None:
            self._deadline = self._started + self._time_limit * 60
            self._deadline_call = call_later(self._time_limit * 60, self._stop)
        self._writer.start()
        self._watchdog = create_looping_call(self._watch)
        self._watchdog.start(max(self.settings.timeout, 0.1), now=False)
        try:
            job = await self._rounds.first_batch(self.job)
            if job is None:
                self._phase = "done"  # the engine finds nothing to do and closes
                return
            if not await self._start_batch(job) and job.fixed:
                self._phase = "done"  # nothing to fetch of it (the frontier said why)
        except (ConfigError, FrontierUnavailable) as exc:
            # A bad argument for this frontier, or Redis down at start: one line, exit code 1,
            # and never a fallback to another frontier.
            self._writer.stop()
            self._watchdog.stop()
            await run_in_thread(table.close)
            self._table = None
            refuse_to_start(exc)

    async def _start_batch(self, job: FetchJob) -> bool:
        """Fetch *job*'s batch: a fresh frontier batch, and the first rows read; ``False``
        when there is nothing to fetch of it."""
        assert self._table is not None and self._frontier is not None
        self.job = job
        self._batches.append(job.batch_id)
        for queue in self._queues.values():
            queue.dropped = False
            queue.defers = 0
            queue.exceptions = 0
        logger.info(
            "Fetching batch %(batch)s%(part)s%(resume)s from %(table)s: queues %(mode)s, delay"
            " %(delay)s s, %(threads)d per queue, content limit %(limit)d",
            {
                "batch": job.batch_id,
                "part": ""
                if job.partition is None
                else f" partition {job.partition}/{job.partitions}",
                "resume": " (resume)" if self._resume else "",
                "table": self._table.name,
                "mode": self.settings.queue_mode,
                "delay": self.settings.queue_delay,
                "threads": self.settings.threads_per_queue,
                "limit": self.settings.content_limit,
            },
        )
        self._reading = True
        try:
            if not await self._frontier.start(job):
                return False
            items = await self._frontier.read(self._capacity, {})
            self._deliver(items)
        finally:
            self._reading = False
        return True

    # --- the end of a batch ---------------------------------------------------------------------

    def _spider_idle(self) -> None:
        """Every row of the batch has ended: wrap the batch up (see the module docstring)."""
        if self._phase == "done" or self._fallback is not None:
            return
        if self._phase == "fetching":
            self._phase = "wrapping"
            self._wrap_up_call = d = deferred_from_coro(self._wrap_up())
            d.addErrback(self._wrap_up_failed)
        raise DontCloseSpider

    async def _wrap_up(self) -> None:
        job = self.job
        assert job is not None and self._writer is not None and self._rounds is not None
        complete = not self._stopped and job.partition is None and not self._closing
        await self._writer.drain()
        visits = self._write_visits()
        if visits is not None:  # before another worker may take the hosts in the next round
            await maybe_deferred_to_future(visits)
        reason = await self._rounds.finish(job, complete=complete, why=self._why())
        if reason == "finished" and self._stop_reason in _STORE_FAILURES:
            # The crawl's finish reason says it, where scrapy crawl's exit code cannot (a
            # scrapyd job's log ends with it); nutchy crawl's fetch child exits with 1.
            reason = "nutch_store_error"
        ended_well = not self._stopped and not self._closing and reason == "finished"
        if ended_well and self._rounds.goes_on(job, complete=complete):
            next_job = await self._rounds.next_batch(job)
            if next_job is not None:
                await self._start_batch(next_job)
                self._phase = "fetching"
                if self._starved:
                    self._poke()
                return
        self._phase = "done"
        if self._close_spider is not None:
            self._close_spider(reason)

    def _why(self) -> str:
        """Why the batch under way is not fetched whole (when it is not)."""
        return "the crawl is closing" if self._closing else self._stop_reason

    def _wrap_up_failed(self, failure: Failure) -> None:
        logger.error(
            "Cannot finish batch %(batch)s: %(error)s",
            {"batch": self.job.batch_id if self.job else None, "error": failure.getErrorMessage()},
            exc_info=None if isinstance(failure.value, StoreError) else failure.value,
        )
        self._phase = "done"
        if self._close_spider is not None:
            self._close_spider("nutch_update_failed")

    def _open_checked(self) -> WebTable:
        table = self._open_table()
        try:
            if self._seeds is not None:
                self._seeds(table)
            if not table.exists():
                raise TableMissing(
                    f"table {table.name!r} does not exist ({table.store!r}); inject and generate"
                    " a batch first"
                )
            if self._open_memory is not None:
                self._memory = self._open_memory(table)
        except BaseException:
            table.close()
            raise
        return table

    async def _close(self, reason: str) -> None:
        self._closing = True
        if self._gc_before is not None:
            # Thresholds set meanwhile by another part of the process are theirs to keep.
            if gc.get_threshold() == self._gc_set:
                gc.set_threshold(*self._gc_before)
            self._gc_before = self._gc_set = None
        if self._progress is not None:
            self._progress.close()
        if self._writer is not None:
            self._writer.stop()
        if self._watchdog is not None and self._watchdog.running:
            self._watchdog.stop()
        if self._deadline_call is not None:
            self._deadline_call.cancel()
        if self._wake_call is not None:
            self._wake_call.cancel()
            self._wake_call = None
        if self._visits_loop is not None and self._visits_loop.running:
            self._visits_loop.stop()
        table = self._table
        if table is None:
            return
        assert self._writer is not None and self._frontier is not None
        if self._reading and self._read_call is not None:
            await maybe_deferred_to_future(self._read_call)  # errors are logged by its errback
        if self._phase == "wrapping" and self._wrap_up_call is not None:
            # Closed while a batch was being wrapped up (a shutdown): let it finish its writes.
            await maybe_deferred_to_future(self._wrap_up_call)
        # The outcomes the parse process has not said it wrote (its pipeline closed before this)
        self._writer.give_back()
        await self._writer.drain()
        visits = self._write_visits()
        if visits is not None:
            await maybe_deferred_to_future(visits)
        more = self._frontier.more()
        await self._frontier.close()
        memory, self._memory = self._memory, None
        if memory is not None:
            await run_in_thread(memory.close)
        await run_in_thread(table.close)
        if self._phase == "fetching" and self.job is not None and self._rounds is not None:
            # closed before the batch ended (a signal): no wrap-up did
            self._rounds.not_whole(self.job, self._why())
        self._log_summary(reason, more)

    def _log_summary(self, reason: str, more: bool) -> None:
        assert self.job is not None and self._writer is not None
        summary = self._summary
        writer = self._writer
        elapsed = max(time.monotonic() - self._started, 1e-9)
        statuses = ", ".join(f"{n} {k.lower()}" for k, n in sorted(summary.statuses.items()))
        left = self._queued + len(self._released)
        if not self._batches:
            batches = "no batch"
        elif len(self._batches) == 1:
            batches = f"batch {self._batches[0]}"
        else:
            batches = f"batches {', '.join(map(str, self._batches))}"
        logger.info(
            "Fetched %(batches)s (%(reason)s): %(outcomes)d rows in %(secs).1f s"
            " (%(rate).1f/s)%(statuses)s; %(written)d written%(lost)s%(left)s",
            {
                "batches": batches,
                "reason": reason,
                "outcomes": summary.outcomes,
                "secs": elapsed,
                "rate": summary.outcomes / elapsed,
                "statuses": f": {statuses}" if statuses else "",
                "written": writer.written,
                "lost": f", {writer.lost} NOT written" if writer.lost else "",
                "left": (
                    "; the rest is left for -a resume=true" if self._stopped or left or more else ""
                ),
            },
        )


def _no_table() -> WebTable:
    raise RuntimeError("this scheduler hands every call to Scrapy's scheduler")


def _now_ms() -> int:
    return int(time.time() * 1000)
