"""What the ``nutch`` spider needs of the Scrapy components around it, checked at start.

A project can set any Scrapy setting, and a few would leave the ``nutch`` spider running with
nothing to do or recording nothing: another ``SCHEDULER`` (the spider has no start requests:
its batch is read by nutchy's scheduler, so another one crawls nothing and ends with exit code
0), nutchy's fetch middleware turned off or placed inside one of Scrapy's own downloader
middlewares, or a pipeline turned off while the setting that relies on it is on. The add-on
calls :func:`check_components` once the settings are final, for the ``nutch`` spider only; what
it finds is a :exc:`~nutchy.exceptions.ConfigError` naming both components, and the crawl does
not start (:func:`refuse_to_start`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.misc import load_object

from nutchy.exceptions import ConfigError, NutchError, TableMissing

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy._fetch import FetchJob

__all__ = [
    "NUTCH_SCHEDULER",
    "check_components",
    "check_settings",
    "check_table",
    "refuse_to_start",
]

logger = logging.getLogger(__name__)

#: The scheduler the add-on sets (``SCHEDULER``).
NUTCH_SCHEDULER = "nutchy.scheduler.NutchScheduler"

_SCRAPY_REDIS = "scrapy_redis."


def check_components(settings: BaseSettings) -> str:
    """Raise :exc:`~nutchy.exceptions.ConfigError` when *settings* (final, add-ons applied) give
    the ``nutch`` spider a scheduler, downloader middlewares or pipelines it cannot work with, or
    a web table it cannot place (:func:`nutchy.config.crawl_dir`); return where the table is
    (:func:`nutchy.store.describe_table`)."""
    from nutchy.store import describe_table

    _check_scheduler(settings)
    _check_fetch_middleware(settings)
    _check_pipelines(settings)
    check_settings(settings)
    return describe_table(settings)


def check_settings(settings: BaseSettings) -> None:
    """Raise :exc:`~nutchy.exceptions.ConfigError`, naming the setting, for the first value the
    fetch, parse or updatedb of a round could not use (type and range): read before anything is
    written, so that a bad value never leaves a batch generated and not fetched. The add-on
    checks them for the ``nutch`` spider at start; ``nutchy crawl`` before its inject and
    ``nutchy generate`` before it marks a batch.

    The fetch's settings are those :meth:`~nutchy._fetch.FetchSettings.from_settings` reads
    (delays, timeout, content limit, threads per queue, queue mode and depth, concurrency,
    redirects, robots.txt deferrals, flushes, time limit, read limit), its progress interval and
    frontier (with the Redis frontier's lease and hold times); then the configuration of parse
    and updatedb (:mod:`nutchy.jobs._cycle`), the address guard's
    (:func:`nutchy.resolver.check_address_guard`), and the User-Agent's name
    (:func:`nutchy.agent.agent_name`).
    """
    from nutchy._fetch import FetchSettings
    from nutchy.agent import agent_name
    from nutchy.jobs import _settings
    from nutchy.jobs._cycle import parse_config, signature, update_config
    from nutchy.resolver import check_address_guard

    FetchSettings.from_settings(settings)
    if _settings.get_float(settings, "NUTCH_FETCHER_PROGRESS_LOG_INTERVAL") < 0:
        raise ConfigError(
            "NUTCH_FETCHER_PROGRESS_LOG_INTERVAL must be >= 0,"
            f" got {settings.get('NUTCH_FETCHER_PROGRESS_LOG_INTERVAL')!r}"
        )
    if _settings.get_choice(settings, "NUTCH_FRONTIER", ("local", "redis")) == "redis":
        for name in ("NUTCH_FRONTIER_LEASE_TIMEOUT", "NUTCH_FRONTIER_QUEUE_HOLD"):
            if _settings.get_float(settings, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {settings.get(name)!r}")
    for name in ("NUTCH_FETCHER_PARSE", "NUTCH_FETCHER_UPDATEDB", "NUTCH_PARSER_SKIP_TRUNCATED"):
        _settings.get_bool(settings, name)
    _settings.get_float(settings, "NUTCH_PARSER_TIMEOUT")
    _settings.get_int(settings, "NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS", 0)
    parse_config(settings)
    signature(settings)
    update_config(settings, None)
    check_address_guard(settings)
    agent_name(settings)


def check_table(settings: BaseSettings, job: FetchJob) -> None:
    """Refuse to start, before the engine opens, a crawl of a table that does not exist (unless
    ``-a seeds`` injects into it first) or of a batch id no row of the table knows: the crawl
    would fetch nothing and end with exit code 0. Scrapy cannot stop a crawl whose scheduler
    fails to open without logging tracebacks of its own, so the add-on calls this once the
    settings are final, before the crawl starts, as :func:`~nutchy.workers.check_redis` is
    called: an open and an exists() call, and
    for ``-a batch=ID`` a scan that stops at the first row of the batch (a whole table's scan,
    filtered by the store, only when the batch is unknown)."""
    from nutchy.jobs._batches import ALL_BATCHES, require_batch
    from nutchy.store import open_table

    if job.seeds is not None:
        return  # injected into, and created if need be, when the crawl opens
    with open_table(settings) as table:
        if not table.exists():
            raise TableMissing(
                f"table {table.name!r} does not exist ({table.store!r}); inject and generate a"
                " batch first"
            )
        if job.fixed and job.batch_id not in (None, ALL_BATCHES):
            require_batch(table, job.batch_id)


def _check_scheduler(settings: BaseSettings) -> None:
    value = settings.get("SCHEDULER")
    ours = load_object(NUTCH_SCHEDULER)
    try:
        scheduler = load_object(value)
    except (ImportError, NameError, ValueError) as exc:
        raise ConfigError(f"SCHEDULER: cannot load {value!r}: {exc}") from None
    if isinstance(scheduler, type) and issubclass(scheduler, ours):
        return
    name = _name(value)
    message = (
        f"SCHEDULER is {name} ({_where(settings, 'SCHEDULER')}), but the nutch spider needs"
        f" {NUTCH_SCHEDULER}, which reads its batch from the web table: with {name} it would"
        " crawl nothing. Leave SCHEDULER to nutchy's add-on for the nutch spider (set another"
        " scheduler in the custom_settings of the spiders that need it)"
    )
    if name.startswith(_SCRAPY_REDIS):
        message += (
            ". To share a crawl through Redis, choose nutchy's Redis frontier with NUTCH_FRONTIER"
            ' = "redis" (docs/distributed.md)'
        )
    raise ConfigError(message)


def _check_fetch_middleware(settings: BaseSettings) -> None:
    from nutchy.middlewares import NutchFetchMiddleware

    orders = _orders(settings, "DOWNLOADER_MIDDLEWARES")
    fetch = [c for c in orders if _is(c, NutchFetchMiddleware)]
    if not fetch:
        raise ConfigError(
            f"DOWNLOADER_MIDDLEWARES turns off {_name(NutchFetchMiddleware)}"
            f" ({_where(settings, 'DOWNLOADER_MIDDLEWARES')}): the nutch spider records every"
            " fetch through it, and would fetch its batch without writing anything"
        )
    order = orders[fetch[0]]
    # Scrapy's own middlewares come after it: it sees each request of a row before they do
    # (its conditional headers and meta: no robots.txt check by RobotsTxtMiddleware, no
    # timeout of DownloadTimeoutMiddleware's) and the final response after them (decoded by
    # HttpCompressionMiddleware).
    base = {load_object(c) for c in settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")}
    for component, other in sorted(orders.items(), key=lambda item: item[1]):
        cls = load_object(component)
        if cls in base and other <= order:
            raise ConfigError(
                f"DOWNLOADER_MIDDLEWARES puts {_name(NutchFetchMiddleware)} at {order}, after"
                f" Scrapy's {_name(cls)} at {other}: nutchy's must come first"
                " (default 40), to see each request of a row before Scrapy's middlewares do and"
                " its response after them"
            )


def _check_pipelines(settings: BaseSettings) -> None:
    from nutchy.pipelines import NutchDbUpdatePipeline, NutchParsePipeline

    orders = _orders(settings, "ITEM_PIPELINES")
    for pipeline, setting, does in (
        (NutchParsePipeline, "NUTCH_FETCHER_PARSE", "parses the pages as they are fetched"),
        (NutchDbUpdatePipeline, "NUTCH_FETCHER_UPDATEDB", "updates each batch fetched whole"),
    ):
        if settings.getbool(setting) and not any(_is(c, pipeline) for c in orders):
            raise ConfigError(
                f"ITEM_PIPELINES turns off {_name(pipeline)}"
                f" ({_where(settings, 'ITEM_PIPELINES')}), which {does} when {setting} is True:"
                f" set {setting} = False instead"
            )


def _orders(settings: BaseSettings, name: str) -> dict[Any, int]:
    """The enabled components of the component priority dict *name* (with its ``_BASE``)."""
    return {c: o for c, o in settings.getwithbase(name).items() if o is not None}


def _is(component: Any, cls: type) -> bool:
    try:
        loaded = load_object(component)
    except (ImportError, NameError, ValueError):
        return False
    return isinstance(loaded, type) and issubclass(loaded, cls)


def _name(value: object) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


def _where(settings: BaseSettings, name: str) -> str:
    """Who set *name*, in Scrapy's words: ``set at priority 'project'``."""
    priority = settings.getpriority(name)
    names = [n for n, p in SETTINGS_PRIORITIES.items() if p == priority]
    return f"set at priority {names[0] if names else priority!r}"


class _Reported(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" record of an error already said."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is self.error:
            logging.getLogger("asyncio").removeFilter(self)
            return False
        return True


def refuse_to_start(error: NutchError) -> NoReturn:
    """Say *error* in one line of the crawl's log and raise it, which stops the crawl before it
    starts (``scrapy crawl`` exits with 1). Scrapy lets asyncio log the crawl's exception with
    its traceback; the error is said already, so that record is dropped."""
    logger.error("The nutch spider cannot start: %(error)s", {"error": error})
    logging.getLogger("asyncio").addFilter(_Reported(error))
    raise error
