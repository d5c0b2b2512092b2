"""What the fetch's Scrapy components share: their settings, the job a crawl was started for, the
request meta keys they pass each other, and the signal that carries each fetched row.

The components (:class:`~nutchy.scheduler.NutchScheduler`,
:class:`~nutchy.middlewares.NutchFetchMiddleware`,
:class:`~nutchy.robots.NutchRobotsMiddleware`) never call each other; they speak through request
meta and :data:`fetch_finished`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nutchy.core.fetch import QUEUE_MODES
from nutchy.exceptions import ConfigError
from nutchy.jobs import _settings
from nutchy.seeds import Seeds

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Sent by :class:`~nutchy.middlewares.NutchFetchMiddleware` once for every request of a row that
#: ends, on the reactor thread. Arguments: ``request``; ``outcome``, the
#: :class:`~nutchy.core.fetch.FetchOutcome` (``None`` when the request ended without one: another
#: component dropped it); ``update``, the :class:`~nutchy.store.schema.RowUpdate` to write
#: (``None`` with no outcome); ``retry_after``, the seconds a 429 or 503 asked to wait (or
#: ``None``); ``requested``, whether a request went out (False for a robots.txt denial);
#: ``response``, the answer (``None`` when none came: an exception, a robots.txt denial).
fetch_finished: Final = object()

#: Sent by a component that keeps a record of every fetch when it no longer can (the WARC writer
#: of :mod:`nutchy.warc`, its disk full): the scheduler stops taking URLs, as when the table
#: cannot be written. Argument: ``reason``.
fetch_halted: Final = object()

#: Sent by the metrics extension (:mod:`nutchy.metrics`) to ask what the fetch holds now; the
#: scheduler answers a dict: ``queues``, ``busy_queues``, ``queued`` (rows waiting),
#: ``in_flight``. No arguments.
fetch_gauges: Final = object()

#: Sent by :class:`~nutchy.scheduler.NutchScheduler` when every row of a batch has ended and its
#: fetch outcome is written; handlers may be asynchronous and are awaited.
#: :class:`~nutchy.pipelines.NutchParsePipeline` writes the pages it still holds. Arguments:
#: ``batch_id``; ``complete``, whether every row of the batch was fetched by this crawl (not when
#: a time limit or a read error stopped it, nor for one partition of a batch).
batch_fetched: Final = object()

#: Sent after :data:`batch_fetched`, once its handlers are done: the batch is fetched and parsed.
#: :class:`~nutchy.pipelines.NutchDbUpdatePipeline` runs updatedb on it when it is complete.
#: Same arguments; handlers may be asynchronous and are awaited.
batch_parsed: Final = object()

#: Sent after :data:`batch_parsed` when its handlers succeeded on a batch the crawl fetched whole
#: and the updatedb pipeline is on: the batch is updated.
#: :class:`~nutchy.index.pipeline.NutchIndexPipeline` indexes it. Argument: ``batch_id``;
#: handlers may be asynchronous and are awaited.
batch_updated: Final = object()

#: Sent by :class:`~nutchy.pipelines.NutchParsePipeline` once a batch is fetched and its parses
#: written, when something in the process listens and a parse process parsed the pages: the
#: shares of the batch's parsed pages that the parse process kept for updatedb
#: (:class:`~nutchy.jobs.updatedb.ParsedShares`; :func:`~nutchy.jobs.updatedb.parsed_ahead`
#: makes them updatedb's read ahead). :class:`~nutchy.pipelines.NutchDbUpdatePipeline` and the
#: fetch thread of ``nutchy crawl`` keep them. Arguments: ``batch_id``, ``shares``.
batch_shares: Final = object()


#: Request meta: the :class:`~nutchy.core.fetch.FetchEntry` of the row a request fetches.
META_ENTRY: Final = "nutch_entry"
#: Request meta: the fetch queue of the request (also its ``download_slot``).
META_QUEUE: Final = "nutch_queue"
#: Response meta: the :class:`~nutchy.core.fetch.FetchOutcome` recorded for the response.
META_OUTCOME: Final = "nutch_outcome"
#: Response meta: when the response's outcome was recorded, in ms since the epoch (its ``f:ts``).
META_FETCH_TIME: Final = "nutch_fetch_time"
#: Response meta: the scheduler's outcome writer and the entry, for a page fetched with success
#: whose outcome waits in its buffer (the parse pipeline may take it: :mod:`nutchy.outcomes`).
META_HANDOVER: Final = "_nutch_handover"
#: Request meta: the URLs fetched so far in this redirect chain (followed redirects only).
META_CHAIN: Final = "nutch_redirects"
#: Request meta: the row of a followed redirect's target did not exist before this fetch.
META_NEW_ROW: Final = "nutch_new_row"
#: Request meta of a request sent back to the scheduler: wait this many seconds before fetching
#: anything more of its queue (a robots.txt that answered 5xx).
META_DEFER: Final = "nutch_defer"
#: Request meta of a request sent back to the scheduler to follow a redirect: the target URL.
META_FOLLOW: Final = "nutch_follow"
#: Request meta: the robots.txt ``Crawl-delay`` (s) of the request's host, once known.
META_CRAWL_DELAY: Final = "nutch_crawl_delay"
#: Request meta that marks the robots.txt requests of :mod:`nutchy.robots`.
META_ROBOTS: Final = "nutch_robots"
#: Request meta set by the scheduler's watchdog on a request whose row it recorded as failed:
#: an answer that still comes for it is dropped.
META_EXPIRED: Final = "nutch_expired"
#: Request meta of a request whose host's robots.txt was just requested for it: the host is owed
#: its delay from now (the request goes back to the scheduler when robots.txt allows it).
META_AFTER_ROBOTS: Final = "nutch_after_robots"

#: The longest a robots.txt answer may be used (s): RFC 9309 §2.4.
ROBOTS_EXPIRY_MAX: Final = 86400.0


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The fetch's settings, read and checked once (see docs/settings.md for each)."""

    queue_mode: str = "byHost"
    threads_per_queue: int = 1
    server_delay: float = 5.0
    server_min_delay: float = 0.0
    min_crawl_delay: float = 5.0
    max_crawl_delay: float = 30.0
    max_exceptions_per_queue: int = -1
    depth_multiplier: int = 50
    concurrency: int = 16
    content_limit: int = 1048576
    timeout: float = 10.0
    redirect_max: int = 0
    store_content: bool = True
    store_response_time: bool = True
    store_ip: bool = False
    robots_403_allow: bool = True
    robots_defer: bool = True
    robots_defer_delay: float = 300.0
    robots_defer_retries: int = 3
    robots_max_size: int = 512000
    robots_expiry: float = ROBOTS_EXPIRY_MAX
    ignore_external_links: bool = False
    fetch_interval_default: int = 2592000
    flush_size: int = 100
    flush_interval: float = 2.0
    resume: bool = False
    time_limit_mins: float = -1.0
    read_limit: int = 1000

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FetchSettings:
        """Read the ``NUTCH_*`` settings (and Scrapy's ``CONCURRENT_REQUESTS``);
        :exc:`~nutchy.exceptions.ConfigError` names the first one with an unusable value."""
        server_delay = _non_negative(settings, "NUTCH_FETCHER_SERVER_DELAY")
        min_crawl_delay = _settings.get_float(settings, "NUTCH_FETCHER_MIN_CRAWL_DELAY")
        return cls(
            queue_mode=_settings.get_choice(settings, "NUTCH_FETCHER_QUEUE_MODE", QUEUE_MODES),
            threads_per_queue=_settings.get_int(settings, "NUTCH_FETCHER_THREADS_PER_QUEUE", 1),
            server_delay=server_delay,
            server_min_delay=_non_negative(settings, "NUTCH_FETCHER_SERVER_MIN_DELAY"),
            min_crawl_delay=server_delay if min_crawl_delay < 0 else min_crawl_delay,
            max_crawl_delay=_settings.get_float(settings, "NUTCH_FETCHER_MAX_CRAWL_DELAY"),
            max_exceptions_per_queue=_settings.get_int(
                settings, "NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE", -1
            ),
            depth_multiplier=_settings.get_int(settings, "NUTCH_FETCHER_QUEUE_DEPTH_MULTIPLIER", 1),
            concurrency=_settings.get_int(settings, "CONCURRENT_REQUESTS", 1),
            content_limit=_settings.get_int(settings, "NUTCH_HTTP_CONTENT_LIMIT", -1),
            timeout=_positive(settings, "NUTCH_HTTP_TIMEOUT") / 1000,
            redirect_max=_settings.get_int(settings, "NUTCH_HTTP_REDIRECT_MAX", 0),
            store_content=_settings.get_bool(settings, "NUTCH_FETCHER_STORE_CONTENT"),
            store_response_time=_settings.get_bool(settings, "NUTCH_HTTP_STORE_RESPONSETIME"),
            store_ip=_settings.get_bool(settings, "NUTCH_STORE_IP_ADDRESS"),
            robots_403_allow=_settings.get_bool(settings, "NUTCH_HTTP_ROBOTS_403_ALLOW"),
            robots_defer=_settings.get_bool(settings, "NUTCH_HTTP_ROBOTS_503_DEFER_VISITS"),
            robots_defer_delay=_non_negative(settings, "NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_DELAY")
            / 1000,
            robots_defer_retries=_settings.get_int(
                settings, "NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_RETRIES", 0
            ),
            robots_max_size=_settings.get_int(settings, "NUTCH_HTTP_ROBOTS_MAX_SIZE", -1),
            robots_expiry=_robots_expiry(settings),
            ignore_external_links=_settings.get_bool(settings, "NUTCH_DB_IGNORE_EXTERNAL_LINKS"),
            fetch_interval_default=_settings.get_int(
                settings, "NUTCH_DB_FETCH_INTERVAL_DEFAULT", 1
            ),
            flush_size=_settings.get_int(settings, "NUTCH_FETCHER_FLUSH_SIZE", 1),
            flush_interval=_positive(settings, "NUTCH_FETCHER_FLUSH_INTERVAL"),
            resume=_settings.get_bool(settings, "NUTCH_FETCHER_JOB_RESUME"),
            time_limit_mins=_settings.get_float(settings, "NUTCH_FETCHER_TIMELIMIT_MINS"),
            read_limit=_settings.get_int(settings, "NUTCH_GORA_BUFFER_READ_LIMIT", 1),
        )

    @property
    def queue_delay(self) -> float:
        """The delay of a queue without a Crawl-delay: Nutch's ``fetcher.server.delay`` for one
        thread per queue, ``fetcher.server.min.delay`` for more."""
        return self.server_delay if self.threads_per_queue == 1 else self.server_min_delay

    @property
    def queue_room(self) -> int:
        """How many rows of one queue the fetch holds in memory at most:
        ``fetcher.threads.per.queue * fetcher.queue.depth.multiplier``."""
        return self.threads_per_queue * self.depth_multiplier

    @property
    def capacity(self) -> int:
        """How many rows the fetch holds in memory at most (Nutch's feeder capacity):
        ``CONCURRENT_REQUESTS * fetcher.queue.depth.multiplier``, at least one queue's room."""
        return max(self.concurrency * self.depth_multiplier, self.queue_room)

    def crawl_delay(self, robots_delay: float) -> float:
        """The delay of a queue whose robots.txt asks for *robots_delay* seconds: at least
        ``fetcher.min.crawl.delay``."""
        return max(robots_delay, self.min_crawl_delay)


def _non_negative(settings: BaseSettings, name: str) -> float:
    value = _settings.get_float(settings, name)
    if value < 0:
        raise ConfigError(f"{name} must be >= 0, got {value!r}")
    return value


def _robots_expiry(settings: BaseSettings) -> float:
    value = _non_negative(settings, "NUTCH_HTTP_ROBOTS_EXPIRY")
    if value > ROBOTS_EXPIRY_MAX:
        raise ConfigError(
            f"NUTCH_HTTP_ROBOTS_EXPIRY must be at most {ROBOTS_EXPIRY_MAX:.0f} s (24 hours,"
            f" RFC 9309), got {value!r}"
        )
    return value


def _positive(settings: BaseSettings, name: str) -> float:
    value = _settings.get_float(settings, name)
    if value <= 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class FetchJob:
    """What one ``scrapy crawl nutch`` fetches: the rows of *batch_id* (``"-all"``: every
    generated row), optionally only partition *partition* of *partitions*, skipping rows already
    fetched when *resume* (``None``: ``NUTCH_FETCHER_JOB_RESUME`` decides), for at most
    *time_limit* minutes (``None``: ``NUTCH_FETCHER_TIMELIMIT_MINS`` decides).

    Without a batch (*batch_id* ``None``) the crawl generates its own: up to *rounds* rounds of
    generate (*top_n* URLs at most, due *add_days* days from now), fetch, parse and updatedb.
    """

    batch_id: str | None
    partition: int | None = None
    partitions: int = 1
    resume: bool | None = None
    time_limit: float | None = None
    rounds: int = 1
    top_n: int | None = None
    add_days: int = 0
    #: Seeds injected before the first generate (``-a seeds``), only without a batch.
    seeds: Seeds | None = None

    #: Whether the batch was given (``-a batch``); ``False``: the crawl generates its batches.
    fixed: bool = True

    @property
    def generates(self) -> bool:
        """Whether the crawl generates its own batches (no ``-a batch``)."""
        return not self.fixed

    @classmethod
    def from_args(
        cls,
        batch: str | None,
        *,
        resume: str | None = None,
        partition: str | None = None,
        timelimit: str | None = None,
        rounds: str | None = None,
        top_n: str | None = None,
        add_days: str | None = None,
        seeds: str | None = None,
    ) -> FetchJob:
        """Parse the spider arguments ``-a batch=ID -a resume=true -a partition=k/K
        -a timelimit=MIN`` or ``-a rounds=N -a topN=M -a adddays=D -a seeds=SEEDS``;
        :exc:`~nutchy.exceptions.ConfigError` explains a bad one.

        >>> FetchJob.from_args("b1", resume="true", partition="1/4", timelimit="0.5")
        FetchJob(batch_id='b1', partition=1, partitions=4, resume=True, time_limit=0.5, rounds=1, top_n=None, add_days=0, seeds=None, fixed=True)
        >>> FetchJob.from_args(None, rounds="3", top_n="1000").generates
        True
        """
        if batch is not None and not batch.strip():
            # -a batch= (an unset shell variable): not "no batch", which would generate a new one
            raise ConfigError(
                f"batch is empty ({batch!r}): give -a batch=ID (or -a batch=-all), or leave"
                " -a batch out to generate batches"
            )
        part: int | None = None
        parts = 1
        if partition:
            if not batch:
                raise ConfigError("-a partition=k/K fetches part of a batch: give -a batch=ID too")
            try:
                k, _, n = partition.partition("/")
                part, parts = int(k), int(n)
            except ValueError:
                raise ConfigError(f"partition must be k/K, got {partition!r}") from None
            if not 0 <= part < parts:
                raise ConfigError(f"partition k/K needs 0 <= k < K, got {partition!r}")
        limit: float | None = None
        if timelimit is not None:
            try:
                limit = float(timelimit)
            except ValueError:
                raise ConfigError(f"timelimit must be minutes, got {timelimit!r}") from None
        if batch and (rounds is not None or top_n is not None or add_days is not None):
            raise ConfigError(
                "-a rounds, -a topN and -a adddays generate batches: leave out -a batch, or fetch"
                " the batch alone"
            )
        if batch and seeds is not None:
            raise ConfigError(
                "-a seeds injects seeds before the crawl generates its batches: leave out -a"
                " batch, or inject them first with nutchy inject"
            )
        number = _int_arg("rounds", rounds, 1) if rounds is not None else 1
        top = _int_arg("topN", top_n, 1) if top_n is not None else None
        days = _int_arg("adddays", add_days, 0) if add_days is not None else 0
        return cls(
            batch or None,
            part,
            parts,
            _bool_arg("resume", resume),
            limit,
            rounds=number,
            top_n=top,
            add_days=days,
            seeds=Seeds.from_arg(seeds) if seeds is not None else None,
            fixed=bool(batch),
        )


def _int_arg(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value!r}")
    return number


def _bool_arg(name: str, value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on", ""):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")
