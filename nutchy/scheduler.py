"""The fetch's Scrapy scheduler: a batch of the web table, fetched politely, outcomes written.

:class:`NutchScheduler` is Nutch's ``FetcherReducer`` on Scrapy. It streams the rows of one batch
from the table, keeps them in one queue per host, domain or IP (``fetcher.queue.mode``), hands
the engine a request only when a queue may start one, and writes what each fetch gave.

Reading
    Rows are read in a thread, never on the reactor, a page at a time, and only the few columns a
    fetch needs (:data:`FETCH_COLUMNS`). Memory holds at most ``CONCURRENT_REQUESTS *
    fetcher.queue.depth.multiplier`` rows, and at most ``fetcher.threads.per.queue * …multiplier``
    of one queue, whatever the size of the batch. Rows come in key order, so all the rows of a host
    come together: when a host's queue is full, the reader notes where that host's rows resume
    and jumps past them, so the next hosts get their turn; the host is read again, from the noted
    key, when its queue runs low. (Nutch shuffles the whole batch in its MapReduce sort instead.)
    ``-a resume=true`` skips rows that have a fetch mark, ``-a partition=k/K`` keeps the rows
    generate put in partition *k* (``mtdt:_npt_``; computed from the host when a row has none).

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
    robots.txt answering 5xx holds the queue for ``http.robots.503.defer.visits.delay``.

Writing
    Each outcome's row update (built by :class:`~nutchy.middlewares.NutchFetchMiddleware`) is
    buffered and written in a thread every ``NUTCH_FETCHER_FLUSH_SIZE`` outcomes, at least every
    ``NUTCH_FETCHER_FLUSH_INTERVAL`` seconds, and on close. Requests stop being released while
    twice the flush size waits, so a crawl killed at any moment loses at most ``2 *
    NUTCH_FETCHER_FLUSH_SIZE + CONCURRENT_REQUESTS`` outcomes (those received but unwritten, and
    those in flight); their rows keep no fetch mark and ``-a resume=true`` fetches them again.

Time limit
    After ``fetcher.timelimit.mins`` (``-a timelimit=MIN``) no request is released any more; the
    requests in flight end and are written, and the rows not fetched keep their generate mark
    without a fetch mark, for a resumed fetch.

The end of a batch, and rounds
    When the crawl goes idle, every row of the batch has ended: the scheduler writes the last
    outcomes, then sends :data:`~nutchy._fetch.batch_fetched` and
    :data:`~nutchy._fetch.batch_parsed` and waits for their handlers (the parse pipeline writes
    what it holds; :class:`~nutchy.pipelines.NutchDbUpdatePipeline` runs updatedb on a complete
    batch). Without ``-a batch``, the scheduler generates its batches itself (``-a topN=M``) and
    goes on for ``-a rounds=N`` rounds, until generate selects nothing or a ``STOP`` file appears
    in ``NUTCH_CRAWL_DIR``; the fetch queues, and their politeness, carry over from one round to
    the next.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import call_later, create_looping_call, run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from nutchy._fetch import (
    ALL_BATCHES,
    META_CHAIN,
    META_CRAWL_DELAY,
    META_DEFER,
    META_ENTRY,
    META_FOLLOW,
    META_NEW_ROW,
    META_QUEUE,
    FetchJob,
    FetchSettings,
    batch_fetched,
    batch_parsed,
    fetch_finished,
)
from nutchy.core.fetch import (
    FetchEntry,
    FetchOutcome,
    entry_from_page,
    exception_status,
    fetch_change,
    queue_id,
)
from nutchy.core.generate import new_batch_id, partition_for
from nutchy.core.urls import InvalidURL, domain_of, host_of, reverse_url
from nutchy.exceptions import CellDecodeError, NutchError, StoreError
from nutchy.jobs import _settings
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.store import open_table
from nutchy.store.base import Scan, prefix_stop
from nutchy.store.schema import RowUpdate, build_update, decode_page

if TYPE_CHECKING:
    from typing import Self

    from scrapy.core.downloader import Downloader
    from scrapy.core.scheduler import BaseScheduler
    from scrapy.crawler import Crawler
    from scrapy.signalmanager import SignalManager
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from nutchy.store.table import WebTable

__all__ = ["FETCH_COLUMNS", "NutchScheduler"]

logger = logging.getLogger(__name__)

#: The columns the fetch reads of each row of the batch.
FETCH_COLUMNS: Final = (
    b"f:ts",
    b"f:mod",
    b"f:rpr",
    b"h:ETag",
    b"mk:_gnmrk_",
    b"mk:_ftcmrk_",
    b"mtdt:_npt_",
)
#: The WebPage fields those columns fill.
_FETCH_FIELDS: Final = ("fetch_time", "modified_time", "repr_url", "headers", "markers", "metadata")

_Item = tuple[FetchEntry, "dict[str, Any] | None"]


# --- queues --------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Queue:
    """One fetch queue: its rows in memory, its politeness, and where its rows resume."""

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
    #: key prefixes of hosts whose unread rows wait for room in this queue
    hosts: set[bytes] = field(default_factory=set)

    def can_release(self) -> bool:
        return bool(self.entries) and self.inflight < self.threads and not self.dropped


# --- reading, in a thread ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one read should bring: rows of the hosts in *hosts* (key prefix → the key their
    rows resume at, and the queue they waited for) first,
    then rows from the batch cursor *main* (``None``: none), at most *budget* rows in all and at
    most the *room* of each queue (*default_room* for a queue not in it)."""

    hosts: dict[bytes, tuple[bytes, str]]
    main: bytes | None
    budget: int
    room: dict[str, int]
    default_room: int
    dropped: frozenset[str]
    #: rows already fetched in this crawl as followed redirects (they joined the batch)
    followed: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Read:
    """What one read brought: *items* by queue, the batch cursor after it (``None``: the batch
    is read), where each host read resumes (``None``: the host is read; the queue it waits for
    otherwise), and what was skipped."""

    items: list[tuple[str, FetchEntry]] = field(default_factory=list)
    main: bytes | None = None
    hosts: dict[bytes, tuple[bytes, str] | None] = field(default_factory=dict)
    rows: int = 0
    resumed: int = 0
    other_partition: int = 0
    unresolved: int = 0
    undecodable: int = 0
    dropped: int = 0


class _Reader:
    """Reads the rows of a fetch job from the table. Its methods block and run in a thread, one
    at a time; they touch nothing the reactor uses."""

    def __init__(
        self,
        table: WebTable,
        job: FetchJob,
        settings: FetchSettings,
        *,
        resume: bool,
        partition_mode: str,
        partition_seed: int,
    ) -> None:
        self.table = table
        self.job = job
        self.settings = settings
        self.resume = resume
        self.partition_mode = partition_mode
        self.partition_seed = partition_seed
        self.marker = (
            None
            if job.batch_id in (None, ALL_BATCHES)
            else (b"_gnmrk_", job.batch_id.encode("utf-8"))
        )
        self.addresses: dict[str, str | None] = {}
        self.followed: frozenset[str] = frozenset()

    def read(self, plan: _Plan) -> _Read:
        result = _Read(main=plan.main)
        self.followed = plan.followed
        room = dict(plan.room)
        budget = plan.budget
        for prefix, record in plan.hosts.items():
            if budget <= 0:
                result.hosts[prefix] = record  # not read this time
                continue
            budget = self._scan(Scan(start=record[0], prefix=prefix), room, plan, budget, result)
        # The batch cursor: each scan ends at the budget, at the end of the batch, or at a host
        # whose queue is full, past which the next scan starts.
        while result.main is not None and budget > 0:
            budget = self._scan(Scan(start=result.main), room, plan, budget, result, main=True)
        return result

    def _scan(
        self,
        scan: Scan,
        room: dict[str, int],
        plan: _Plan,
        budget: int,
        result: _Read,
        *,
        main: bool = False,
    ) -> int:
        """Take rows of *scan* while the budget and the queues' room allow; return the budget
        left. For the main cursor, a full queue makes the scan jump past the row's host."""
        host_scan = not main
        rows = self.table.store.scan(
            Scan(
                start=scan.start,
                prefix=scan.prefix,
                columns=FETCH_COLUMNS,
                marker=self.marker,
            ),
            min(self.table.read_limit, max(budget, 16)),
        )
        try:
            for key, cells in rows:
                result.rows += 1
                entry, queue = self._entry(key, cells, result)
                if queue is None or entry is None:
                    if main:
                        result.main = key + b"\x00"
                    continue
                if queue in plan.dropped:
                    result.dropped += 1
                    if main:
                        result.main = key + b"\x00"
                    continue
                if room.get(queue, plan.default_room) <= 0:
                    prefix = key[: key.index(b":") + 1] if b":" in key else key
                    if host_scan:
                        result.hosts[scan.prefix] = (key, queue)
                    else:
                        # The host's queue is full: note where its rows resume, skip the rest.
                        result.hosts[prefix] = (key, queue)
                        result.main = prefix_stop(prefix)
                    return budget
                room[queue] = room.get(queue, plan.default_room) - 1
                result.items.append((queue, entry))
                budget -= 1
                if main:
                    result.main = key + b"\x00"
                if budget <= 0:
                    if host_scan:
                        result.hosts[scan.prefix] = (key + b"\x00", queue)
                    return budget
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        # The scan ran out: the host, or the batch, is read.
        if host_scan:
            result.hosts[scan.prefix] = None
        else:
            result.main = None
        return budget

    def _entry(
        self, key: bytes, cells: dict[bytes, bytes], result: _Read
    ) -> tuple[FetchEntry | None, str | None]:
        try:
            entry = entry_from_page(decode_page(key, cells, _FETCH_FIELDS))
        except (CellDecodeError, InvalidURL) as exc:
            result.undecodable += 1
            logger.warning("Skipped row %r: %s", key, exc)
            return None, None
        if entry is None:  # not generated: only with -all
            return None, None
        if entry.key in self.followed:
            return None, None
        if self.resume and entry.fetched:
            result.resumed += 1
            return None, None
        if self.job.partition is not None and self._partition(entry) != self.job.partition:
            result.other_partition += 1
            return None, None
        queue = self.queue_of(entry.url)
        if queue is None:
            result.unresolved += 1
        return entry, queue

    def _partition(self, entry: FetchEntry) -> int:
        if entry.partition is not None:
            return entry.partition
        # A row generated by Nutch carries no partition: compute it as generate does.
        try:
            key = domain_of(entry.url) if self.partition_mode == "byDomain" else host_of(entry.url)
        except InvalidURL:
            key = entry.url
        return partition_for(key, self.job.partitions, self.partition_seed)

    def queue_of(self, url: str) -> str | None:
        """The queue of *url*, or ``None`` when its host does not resolve (``byIP``), in which
        case Nutch drops the URL."""
        mode = self.settings.queue_mode
        try:
            if mode != "byIP":
                return queue_id(url, mode)
            host = host_of(url)
        except InvalidURL:
            return None
        if host not in self.addresses:
            try:
                info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                self.addresses[host] = str(info[0][4][0])
            except (OSError, UnicodeError):
                self.addresses[host] = None
        address = self.addresses[host]
        return None if address is None else queue_id(url, mode, address)

    def lookup(self, url: str, batch_id: str) -> tuple[str | None, FetchEntry, bool]:
        """The queue and entry of a followed redirect's target, and whether its row is new."""
        key = reverse_url(url)
        cells = self.table.store.get(key.encode("utf-8"), FETCH_COLUMNS)
        page = None if cells is None else decode_page(key.encode("utf-8"), cells, _FETCH_FIELDS)
        entry = FetchEntry(key, url, batch_id)
        if page is not None:
            entry = FetchEntry(
                key,
                url,
                batch_id,
                fetch_time=page.fetch_time,
                modified_time=page.modified_time,
                etag=page.headers.get("ETag") or None,
                repr_url=page.repr_url,
            )
        return self.queue_of(url), entry, page is None


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


# --- the scheduler -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Summary:
    read: int = 0
    released: int = 0
    outcomes: int = 0
    written: int = 0
    lost: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


class NutchScheduler:
    """Fetches one batch of the web table (see the module docstring).

    *job* says which rows (``None``: the spider is not nutchy's, and every call goes to
    *fallback*, Scrapy's own scheduler). *table* opens the web table (called in a thread when the
    spider opens). *downloader* gives access to the slots of the queues, *crawl* hands the engine a
    request (the engine then asks for more), and *stats* is the crawler's.
    """

    def __init__(
        self,
        job: FetchJob | None,
        settings: FetchSettings,
        *,
        table: Callable[[], WebTable],
        stats: StatsCollector,
        downloader: _DownloaderSlots | None = None,
        crawl: Callable[[Request], None] | None = None,
        partition_mode: str = "byHost",
        partition_seed: int = 0,
        fallback: BaseScheduler | None = None,
        signal_manager: SignalManager | None = None,
        close_spider: Callable[[str], object] | None = None,
        generate_options: GenerateOptions | None = None,
        stop_file: Path | None = None,
        updates: bool = True,
    ) -> None:
        self.job = job
        self.settings = settings
        self.stats = stats
        self._open_table = table
        self._slots = downloader
        self._crawl = crawl
        self._fallback = fallback
        self._partition_mode = partition_mode
        self._partition_seed = partition_seed
        self._resume = settings.resume if job is None or job.resume is None else job.resume
        limit = (
            settings.time_limit_mins if job is None or job.time_limit is None else job.time_limit
        )
        self._time_limit = limit if limit is not None and limit >= 0 else None
        self._table: WebTable | None = None
        self._reader: _Reader | None = None
        # queues
        self._queues: dict[str, _Queue] = {}
        self._ready: deque[_Queue] = deque()
        self._soft: list[tuple[float, int, _Queue]] = []
        self._hard: list[tuple[float, int, _Queue]] = []
        self._seq = itertools.count()
        self._queued = 0
        self._released: dict[int, tuple[FetchEntry, _Queue]] = {}
        self._other: deque[Request] = deque()
        self._per_queue = settings.threads_per_queue * settings.depth_multiplier
        self._capacity = max(settings.concurrency * settings.depth_multiplier, self._per_queue)
        # reading (no cursor until a batch starts)
        self._cursor: bytes | None = None
        self._hosts: dict[bytes, tuple[bytes, str]] = {}
        self._needy: set[_Queue] = set()
        self._reading = False
        self._follows = 0
        self._followed: set[str] = set()
        self._starved = False
        self._stopped = False
        self._deadline: float | None = None
        # writing
        self._pending: list[RowUpdate] = []
        self._flushing = 0
        self._flush_done: Deferred[None] | None = None
        self._flush_loop: Any = None
        self._read_call: Deferred[_Read] | None = None
        self._deadline_call: Any = None
        self._put_error_logged = False
        self._summary = _Summary()
        self._started = 0.0
        # the end of a batch, and rounds
        self._signals = signal_manager
        self._close_spider = close_spider
        self._generate_options = generate_options
        self._stop_file = stop_file
        # whether the crawl updates the batches it fetches whole (NUTCH_FETCHER_UPDATEDB)
        self._updates = updates
        self._phase = "fetching"  # then "wrapping" (the batch ended), "done" (nothing more)
        self._round = 0
        self._wrap_up_call: Deferred[None] | None = None
        self._closing = False
        self._stop_reason = ""

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
        generate_options = None
        if job.generates:
            generate_options = GenerateOptions.from_settings(settings, top_n=job.top_n)

        def close_spider(reason: str) -> object:
            return deferred_from_coro(engine.close_spider_async(reason=reason))

        scheduler = cls(
            job,
            FetchSettings.from_settings(settings),
            table=lambda: open_table(settings),
            stats=crawler.stats,
            downloader=_DownloaderSlots(engine.downloader),
            crawl=engine.crawl,
            partition_mode=_settings.get_choice(
                settings, "NUTCH_PARTITION_URL_MODE", ("byHost", "byDomain", "byIP")
            ),
            partition_seed=_settings.get_int(settings, "NUTCH_PARTITION_URL_SEED"),
            signal_manager=crawler.signals,
            close_spider=close_spider,
            generate_options=generate_options,
            stop_file=Path(settings.get("NUTCH_CRAWL_DIR") or ".") / "STOP",
            updates=_settings.get_bool(settings, "NUTCH_FETCHER_UPDATEDB"),
        )
        crawler.signals.connect(scheduler._fetch_finished, signal=fetch_finished)
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        if scheduler.settings.threads_per_queue > 1:
            # Several requests of a queue may wait in its slot: the slot must know the queue's
            # policy (a Crawl-delay just read) before it starts any of them.
            crawler.signals.connect(
                scheduler._reached_downloader, signal=signals.request_reached_downloader
            )
        return scheduler

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
            or (not self._stopped and (self._cursor is not None or self._hosts))
        )

    def enqueue_request(self, request: Request) -> bool:
        if self._fallback is not None:
            return self._fallback.enqueue_request(request)
        meta = request.meta
        if META_FOLLOW in meta:
            self._lookup(request)
            return True
        entry: FetchEntry | None = meta.get(META_ENTRY)
        if entry is None:
            self._other.append(request)
            return True
        # A request of a row coming back: a robots.txt deferral, a retry by another component,
        # or one the scheduler handed the engine itself.
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
        while self._soft:
            queue = heapq.heappop(self._soft)[2]
            queue.scheduled = False
            if queue.can_release() and queue.blocked_until <= now:
                return queue
            self._schedule(queue, now)
        return None

    def _take(self, queue: _Queue, now: float) -> Request | None:
        entry, extra = queue.entries.popleft()
        self._queued -= 1
        if len(queue.entries) * 2 < self._per_queue and queue.hosts:
            self._needy.add(queue)
        meta: dict[str, Any] = {META_ENTRY: entry, META_QUEUE: queue.id, "download_slot": queue.id}
        if extra:
            meta.update(extra)
        try:
            request = Request(entry.url, meta=meta, dont_filter=True)
        except ValueError as exc:  # a URL Scrapy refuses: recorded like a failed fetch
            outcome = FetchOutcome(exception_status("invalid url", str(exc)))
            change = fetch_change(entry, outcome, now=_now_ms())
            self._record(outcome, build_update(entry.key, *change))
            self._schedule(queue, now)
            return None
        queue.inflight += 1
        self._released[id(entry)] = (entry, queue)
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
        for prefix in queue.hosts:
            self._hosts.pop(prefix, None)
        queue.hosts.clear()
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
            queue.hosts.clear()
        self._queued = 0
        self._hosts.clear()
        self._cursor = None
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
        released = self._released.pop(id(entry), None) if entry is not None else None
        now = time.monotonic()
        if released is not None:
            queue = released[1]
            queue.inflight -= 1
            self._apply_crawl_delay(queue, request)
            # Nutch's finishFetchItem: the next request after the delay, at once after a page
            # that needed no request (a robots.txt denial).
            queue.ready_at = now + (queue.delay if requested else 0.0)
            if requested and self._slots is not None:
                self._slots.finished(request.meta["download_slot"], queue.delay, queue.threads)
            self._throttle(queue, now, retry_after, throttled)
            self._schedule(queue, now)
        if outcome is not None and update is not None:
            self._record(outcome, update)
        elif outcome is None:
            self.stats.inc_value("nutch/fetch/dropped_by_other")

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
        if self._reading or self._stopped or self._reader is None:
            return
        budget = self._capacity - self._queued
        if budget <= 0:
            return
        hosts: dict[bytes, tuple[bytes, str]] = {}
        for queue in list(self._needy):
            self._needy.discard(queue)
            if queue.dropped or len(queue.entries) * 2 >= self._per_queue:
                continue
            for prefix in list(queue.hosts):
                record = self._hosts.pop(prefix, None)
                queue.hosts.discard(prefix)
                if record is not None:
                    hosts[prefix] = record
        main = self._cursor if self._queued * 2 < self._capacity else None
        if not hosts and main is None:
            return
        plan = _Plan(
            hosts=hosts,
            main=main,
            budget=budget,
            room={q.id: self._per_queue - len(q.entries) for q in self._queues.values()},
            default_room=self._per_queue,
            dropped=frozenset(q.id for q in self._queues.values() if q.dropped),
            followed=frozenset(self._followed),
        )
        self._reading = True
        self._read_call = d = deferred_from_coro(run_in_thread(self._reader.read, plan))
        d.addCallbacks(self._read_done, self._read_failed, callbackArgs=(plan,))

    def _read_done(self, result: _Read, plan: _Plan) -> None:
        self._reading = False
        now = time.monotonic()
        summary = self._summary
        summary.read += len(result.items)
        stats = self.stats
        stats.inc_value("nutch/fetch/rows_read", result.rows)
        for name in ("resumed", "other_partition", "unresolved", "undecodable", "dropped"):
            count = getattr(result, name)
            if count:
                stats.inc_value(f"nutch/fetch/skipped/{name}", count)
        if self._stopped:
            return
        touched: set[_Queue] = set()
        for queue_key, entry in result.items:
            queue = self._queue(queue_key)
            if self._push(queue, (entry, None)):
                touched.add(queue)
        if plan.main is not None:
            self._cursor = result.main
        for prefix, record in result.hosts.items():
            if record is None:
                continue
            start, queue_key = record
            queue = self._queue(queue_key)
            if queue.dropped:
                continue
            self._hosts[prefix] = (start, queue_key)
            queue.hosts.add(prefix)
            if len(queue.entries) * 2 < self._per_queue:
                self._needy.add(queue)
        for queue in touched:
            self._schedule(queue, now)
        stats.max_value("nutch/fetch/queues", len(self._queues))
        stats.max_value("nutch/fetch/queued_max", self._queued)
        if self._starved:
            self._poke()
        self._maybe_read()

    def _read_failed(self, failure: Failure) -> None:
        self._reading = False
        self._stopped = True
        self._stop_reason = "a read error"
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
        return queue

    def _lookup(self, request: Request) -> None:
        """Queue a followed redirect, once its target's row is read."""
        target, batch_id = request.meta[META_FOLLOW]
        chain = request.meta.get(META_CHAIN)
        if self._reader is None or self._stopped:
            return
        self._follows += 1
        # Its row joins the batch: the batch cursor must not fetch it a second time.
        self._followed.add(reverse_url(target))
        d = deferred_from_coro(run_in_thread(self._reader.lookup, target, batch_id))

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

    # --- writing --------------------------------------------------------------------------------

    def _record(self, outcome: FetchOutcome, update: RowUpdate) -> None:
        summary = self._summary
        summary.outcomes += 1
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
        self._pending.append(update)
        if len(self._pending) >= self.settings.flush_size:
            self._flush()

    def _backlogged(self) -> bool:
        return len(self._pending) + self._flushing >= 2 * self.settings.flush_size

    def _flush(self) -> None:
        if self._flushing or not self._pending or self._table is None:
            return
        batch, self._pending = self._pending, []
        self._flushing = len(batch)
        d = deferred_from_coro(run_in_thread(self._table.write, batch))
        d.addCallbacks(
            self._flushed,
            self._flush_failed,
            callbackArgs=(len(batch),),
            errbackArgs=(len(batch),),
        )

    def _flushed(self, _: object, count: int) -> None:
        self._flushing = 0
        self._summary.written += count
        self.stats.inc_value("nutch/fetch/written", count)
        self._after_flush()

    def _flush_failed(self, failure: Failure, count: int) -> None:
        self._flushing = 0
        self._summary.lost += count
        self.stats.inc_value("nutch/store/put_error", count)
        if not self._put_error_logged:
            self._put_error_logged = True
            logger.error(
                "Cannot write %(n)d fetch outcomes (their rows are left for -a resume=true):"
                " %(error)s; the fetch stops taking URLs",
                {"n": count, "error": failure.getErrorMessage()},
                # a store's error names what failed; a traceback is for anything else
                exc_info=None if isinstance(failure.value, StoreError) else failure.value,
            )
        if not self._stopped:
            # Every page fetched from now on would be fetched for nothing, and fetched again
            # by the resume: stop asking the hosts for more.
            self.stats.inc_value("nutch/fetch/stopped_by_write_error", self._queued)
            self._halt("a write error")
        self._after_flush()

    def _after_flush(self) -> None:
        done, self._flush_done = self._flush_done, None
        if len(self._pending) >= self.settings.flush_size:
            self._flush()
        if done is not None:
            done.callback(None)
        if self._starved and not self._backlogged():
            self._poke()

    # --- lifecycle ------------------------------------------------------------------------------

    async def _open(self) -> None:
        assert self.job is not None
        table = await run_in_thread(self._open_checked)
        self._table = table
        self._started = time.monotonic()
        if self._time_limit is not None:
            self._deadline = self._started + self._time_limit * 60
            self._deadline_call = call_later(self._time_limit * 60, self._stop)
        self._flush_loop = create_looping_call(self._flush)
        self._flush_loop.start(self.settings.flush_interval, now=False)
        if self.job.generates:
            if not await self._generate_next():
                self._phase = "done"  # the engine finds nothing to do and closes
            return
        await self._start_batch(self.job)

    async def _start_batch(self, job: FetchJob) -> None:
        """Fetch *job*'s batch: a fresh cursor, and the first rows read."""
        assert self._table is not None
        self.job = job
        self._reader = _Reader(
            self._table,
            job,
            self.settings,
            resume=self._resume,
            partition_mode=self._partition_mode,
            partition_seed=self._partition_seed,
        )
        self._cursor = b""
        self._hosts = {}
        self._needy = set()
        self._followed = set()
        for queue in self._queues.values():
            queue.dropped = False
            queue.defers = 0
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
        plan = _Plan({}, b"", self._capacity, {}, self._per_queue, frozenset())
        self._reading = True
        result = await run_in_thread(self._reader.read, plan)
        self._read_done(result, plan)

    async def _generate_next(self) -> bool:
        """Generate the next round's batch and start fetching it; False when there is none."""
        assert self.job is not None and self._table is not None
        job = self.job
        if self._round >= job.rounds:
            logger.info("%(n)d rounds done", {"n": job.rounds})
            return False
        if self._stop_file is not None and self._stop_file.exists():
            logger.info("%(stop)s found: no more rounds", {"stop": self._stop_file})
            return False
        assert self._generate_options is not None
        now = _now_ms()
        batch_id = new_batch_id(now, secrets.randbelow(2**31))
        result = await run_in_thread(
            generate,
            self._table,
            self._generate_options,
            now=now,
            batch_id=batch_id,
            add_days=job.add_days,
        )
        if result.selected == 0:
            logger.info("Generate selected no URL: nothing left to fetch")
            return False
        self._round += 1
        self.stats.inc_value("nutch/rounds")
        logger.info(
            "Round %(round)d of %(rounds)d: batch %(batch)s, %(n)d URLs",
            {"round": self._round, "rounds": job.rounds, "batch": batch_id, "n": result.selected},
        )
        await self._start_batch(dataclasses.replace(job, batch_id=batch_id))
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
        assert job is not None
        complete = not self._stopped and job.partition is None and not self._closing
        await self._write_pending()
        reason = "finished"
        if self._signals is not None:
            args = {"batch_id": job.batch_id, "complete": complete}
            # A store's error is logged by the handler with what to do, not by Scrapy with a
            # traceback; it still fails the batch.
            await self._signals.send_catch_log_async(batch_fetched, dont_log=StoreError, **args)
            results = await self._signals.send_catch_log_async(
                batch_parsed, dont_log=StoreError, **args
            )
            if any(isinstance(result, BaseException) for _, result in results):
                reason = "nutch_update_failed"
        if not complete:
            self._not_whole(job)
        if complete and reason == "finished" and job.generates and await self._generate_next():
            self._phase = "fetching"
            if self._starved:
                self._poke()
            return
        self._phase = "done"
        if self._close_spider is not None:
            self._close_spider(reason)

    def _not_whole(self, job: FetchJob) -> None:
        """Say that *job*'s batch was not fetched whole, and what updates it."""
        if not self._updates and job.partition is not None:
            # a partition fetched without the updatedb pipeline, as nutchy crawl -numFetchers
            # does, is the part that was asked for: nothing to say
            return
        why = (
            f"partition {job.partition}/{job.partitions}"
            if job.partition is not None
            else "the crawl is closing"
            if self._closing
            else self._stop_reason
        )
        logger.info(
            "Batch %(batch)s was not fetched whole (%(why)s): run nutchy updatedb %(batch)s"
            " once the rest is fetched",
            {"batch": job.batch_id, "why": why},
        )

    def _wrap_up_failed(self, failure: Failure) -> None:
        logger.error(
            "Cannot finish batch %(batch)s: %(error)s",
            {"batch": self.job.batch_id if self.job else None, "error": failure.getErrorMessage()},
            exc_info=None if isinstance(failure.value, StoreError) else failure.value,
        )
        self._phase = "done"
        if self._close_spider is not None:
            self._close_spider("nutch_update_failed")

    async def _write_pending(self) -> None:
        """Wait for the flush under way, then write what is left."""
        table = self._table
        assert table is not None
        while self._flushing:
            self._flush_done = done = self._flush_done or _new_deferred()
            await maybe_deferred_to_future(done)
        if self._pending:
            batch, self._pending = self._pending, []
            try:
                await run_in_thread(table.write, batch)
                self._summary.written += len(batch)
                self.stats.inc_value("nutch/fetch/written", len(batch))
            except StoreError as exc:
                self._summary.lost += len(batch)
                self.stats.inc_value("nutch/store/put_error", len(batch))
                logger.error("Cannot write the last %d fetch outcomes: %s", len(batch), exc)

    def _open_checked(self) -> WebTable:
        table = self._open_table()
        try:
            if not table.exists():
                raise NutchError(
                    f"table {table.name!r} does not exist; inject and generate a batch first"
                )
        except BaseException:
            table.close()
            raise
        return table

    async def _close(self, reason: str) -> None:
        self._closing = True
        if self._flush_loop is not None and self._flush_loop.running:
            self._flush_loop.stop()
        if self._deadline_call is not None:
            self._deadline_call.cancel()
        table = self._table
        if table is None:
            return
        if self._reading and self._read_call is not None:
            await maybe_deferred_to_future(self._read_call)  # errors are logged by its errback
        if self._phase == "wrapping" and self._wrap_up_call is not None:
            # Closed while a batch was being wrapped up (a shutdown): let it finish its writes.
            await maybe_deferred_to_future(self._wrap_up_call)
        await self._write_pending()
        await run_in_thread(table.close)
        if self._phase == "fetching" and self.job is not None:
            self._not_whole(self.job)  # closed before the batch ended (a signal): no wrap-up did
        self._log_summary(reason)

    def _log_summary(self, reason: str) -> None:
        assert self.job is not None
        summary = self._summary
        elapsed = max(time.monotonic() - self._started, 1e-9)
        statuses = ", ".join(f"{n} {k.lower()}" for k, n in sorted(summary.statuses.items()))
        left = self._queued + len(self._released)
        logger.info(
            "Fetched batch %(batch)s (%(reason)s): %(outcomes)d rows in %(secs).1f s"
            " (%(rate).1f/s)%(statuses)s; %(written)d written%(lost)s%(left)s",
            {
                "batch": self.job.batch_id,
                "reason": reason,
                "outcomes": summary.outcomes,
                "secs": elapsed,
                "rate": summary.outcomes / elapsed,
                "statuses": f": {statuses}" if statuses else "",
                "written": summary.written,
                "lost": f", {summary.lost} NOT written" if summary.lost else "",
                "left": (
                    "; the rest is left for -a resume=true"
                    if self._stopped or left or self._cursor is not None or self._hosts
                    else ""
                ),
            },
        )


def _no_table() -> WebTable:
    raise RuntimeError("this scheduler hands every call to Scrapy's scheduler")


def _new_deferred() -> Deferred[None]:
    from twisted.internet.defer import Deferred

    return Deferred()


def _now_ms() -> int:
    return int(time.time() * 1000)
