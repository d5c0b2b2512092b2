"""The ``nutch`` spider: ``scrapy crawl nutch`` runs rounds of the crawl cycle on the web table.

The spider itself has no start URLs: :class:`~nutchy.scheduler.NutchScheduler` reads the batch
from the web table and :class:`~nutchy.middlewares.NutchFetchMiddleware` records every outcome.
The spider's arguments say what to fetch:

- no ``-a batch``: generate a batch of the URLs due, fetch, parse and update it, for
  ``-a rounds=N`` rounds (1 by default) of at most ``-a topN=M`` URLs each (due ``-a adddays=D``
  days from now), stopping early when generate selects nothing or a ``STOP`` file appears in
  ``NUTCH_CRAWL_DIR``; ``-a seeds=SEEDS`` injects seeds first (a seed file or directory, or
  URLs separated by commas or newlines: :mod:`nutchy.seeds`);
- ``-a batch=ID``: the rows generated into batch *ID* (``-a batch=-all``: every generated row);
- ``-a resume=true``: skip the rows of the batch that already have a fetch mark
  (``fetcher.job.resume``);
- ``-a partition=k/K``: only partition *k* of the *K* that ``nutchy generate -numFetchers K``
  made, so that *K* processes can share a batch;
- ``-a timelimit=MIN``: stop taking new URLs after *MIN* minutes (``fetcher.timelimit.mins``);
  the rest of the batch is left for a resumed fetch.

Each page fetched with success (each answer, with ``nutch_every_response``) reaches
:meth:`NutchSpider.parse` with its recorded outcome in ``response.meta["nutch_outcome"]``.
Fetching writes everything the fetch step of Nutch writes; with ``NUTCH_FETCHER_PARSE`` on (the
default), ``parse`` passes each successful fetch on to
:class:`~nutchy.pipelines.NutchParsePipeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from scrapy import Spider
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from nutchy._checks import refuse_to_start
from nutchy._fetch import META_ENTRY, META_FETCH_TIME, META_HANDOVER, META_OUTCOME, FetchJob
from nutchy.core.status import CrawlStatus
from nutchy.exceptions import ConfigError, FrontierUnavailable
from nutchy.pipelines import FetchedPage

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

__all__ = [
    "COOKIES_MIDDLEWARE",
    "SPIDER_ARGUMENTS",
    "SPIDER_DEFAULTS",
    "UNUSED_EXTENSIONS",
    "UNUSED_MIDDLEWARES",
    "NutchSpider",
    "leave_out_unused_components",
]

#: Scrapy settings the ``nutch`` spider changes, unless the project or the command line sets them.
SPIDER_DEFAULTS: dict[str, object] = {
    # At most one item comes of a response, and Scrapy starts CONCURRENT_ITEMS tasks for the
    # output of every response: with its default of 100, starting and ending them cost a third
    # of the fetch's CPU time.
    "CONCURRENT_ITEMS": 1,
    # Nutch sends no cookies (its http protocol plugins keep none from one fetch to the next).
    "COOKIES_ENABLED": False,
    # The downloader/* stats: nutchy counts every outcome in its own nutch/fetch/* stats, and
    # measuring each request's size as Scrapy does costs as much as building the request.
    "DOWNLOADER_STATS": False,
}

#: Scrapy components that have nothing to do for the ``nutch`` spider, which leaves them out
#: unless the project lists them in the setting (with an order): each would still cost a call
#: per request or response. Its requests are all ``dont_filter`` (Offsite), carry their
#: ``download_timeout`` (DownloadTimeout), ``dont_retry`` (Retry) and, for the rows,
#: ``dont_redirect`` (MetaRefresh: nutchy records redirects and follows them itself, robots.txt
#: redirects included; RedirectMiddleware stays); the spider yields
#: no requests (Depth, UrlLength, MetaCopyDetection) and every status is an outcome (HttpError).
#: RefererMiddleware stays: RedirectMiddleware looks for it and warns on every crawl without it
#: (it sets no Referer on the fetch's requests, which no response produced).
UNUSED_MIDDLEWARES: dict[str, tuple[str, ...]] = {
    "DOWNLOADER_MIDDLEWARES": (
        "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware",
        "scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware",
        "scrapy.downloadermiddlewares.retry.RetryMiddleware",
        "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware",
    ),
    "SPIDER_MIDDLEWARES": (
        "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware",
        "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware",
        "scrapy.spidermiddlewares.depth.DepthMiddleware",
        "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware",
    ),
}

#: Scrapy extensions the ``nutch`` spider takes out of ``EXTENSIONS_BASE``, so that they are not
#: even imported unless the project lists them in ``EXTENSIONS`` (with an order): RemoteControl,
#: an HTTP server that runs Python code sent to it (for Scrapy's MCP server). Its module imports
#: aiohttp, which costs a Scrapy process 0.15-0.2 s of CPU at its start whether the extension is
#: enabled or not (an entry of ``EXTENSIONS`` set to None is imported all the same, by Scrapy's
#: settings), and enabled it starts a server and writes a job file on every crawl.
UNUSED_EXTENSIONS: tuple[str, ...] = ("scrapy.extensions.remote_control.RemoteControl",)

#: Scrapy's cookies middleware, which the ``nutch`` spider (and the ``nutch_sitemap`` spider) take
#: out of ``DOWNLOADER_MIDDLEWARES_BASE`` while ``COOKIES_ENABLED`` is off (its default for the
#: spider: Nutch sends no cookies), unless the project lists it in ``DOWNLOADER_MIDDLEWARES``.
#: Off, it does nothing, but its module was imported all the same, and with it tldextract: some
#: 60 ms of CPU at every start of the spider, 0.11 s at the sitemap spider's start in the fetch's
#: process (which has not imported tldextract's own imports either).
COOKIES_MIDDLEWARE: Final = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"


class NutchSpider(Spider):
    """Fetches one batch of the web table; see the module docstring for its arguments."""

    name = "nutch"

    #: Whether :meth:`parse` is called with every answer. It passes on only the pages fetched
    #: with success (FETCHED), so by default :class:`~nutchy.middlewares.NutchFetchMiddleware`
    #: drops the other answers (304, 404, a redirect recorded...) once their outcome is recorded,
    #: as it drops failed fetches: handing a response to the spider and its middlewares is a good
    #: part of Scrapy's work for a 304. A subclass that wants every answer sets this to True.
    nutch_every_response = False

    def __init__(
        self,
        batch: str | None = None,
        resume: str | None = None,
        partition: str | None = None,
        timelimit: str | None = None,
        rounds: str | None = None,
        topN: str | None = None,
        adddays: str | None = None,
        seeds: str | None = None,
        **kwargs: Any,
    ) -> None:
        _check_arguments(type(self), kwargs)
        super().__init__(**kwargs)
        #: What this crawl fetches, read by the scheduler.
        self.fetch_job = FetchJob.from_args(
            batch,
            resume=resume,
            partition=partition,
            timelimit=timelimit,
            rounds=rounds,
            top_n=topN,
            add_days=adddays,
            seeds=seeds,
        )
        self._parse_enabled: bool | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        try:
            if not _addon_enabled(crawler.settings):
                # Without it, Scrapy's scheduler has nothing to crawl and the crawl would end
                # at once with exit code 0.
                raise ConfigError(
                    'the nutch spider needs nutchy\'s add-on: ADDONS = {"nutchy.NutchAddon": 0}'
                    " in the project's settings"
                )
            spider: Self = super().from_crawler(crawler, *args, **kwargs)
            if crawler.settings.get("NUTCH_FRONTIER") == "redis":
                from nutchy.workers import check_redis

                check_redis(crawler.settings)  # Redis down: the crawl does not start
        except (ConfigError, FrontierUnavailable) as exc:
            refuse_to_start(exc)
        return spider

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        for name, value in SPIDER_DEFAULTS.items():
            if settings.getpriority(name) == SETTINGS_PRIORITIES["default"]:
                settings.set(name, value, priority="spider")
        for setting, paths in UNUSED_MIDDLEWARES.items():
            components = settings.getdict(setting)
            listed = {load_object(c) for c in components}
            off = {path: None for path in paths if load_object(path) not in listed}
            if off:
                # Named as in Scrapy's *_BASE setting, and at least at the project's priority
                # (at which getwithbase() reads that setting), so that None turns its entry off.
                priority = max(settings.getpriority(setting) or 0, SETTINGS_PRIORITIES["spider"])
                settings.set(setting, {**components, **off}, priority)
        leave_out_unused_components(settings)

    async def start(self) -> AsyncIterator[Any]:
        """No start requests: the scheduler streams the batch from the table."""
        return
        yield  # an async generator that yields nothing

    def parse(self, response: Response, **kwargs: Any) -> Any:
        """Called with the pages of the batch fetched with success (every answer with
        :attr:`nutch_every_response`); the fetch is already recorded.

        With ``NUTCH_FETCHER_PARSE`` on, a successful fetch is passed on as a
        :class:`~nutchy.pipelines.FetchedPage` item, which
        :class:`~nutchy.pipelines.NutchParsePipeline` turns into a
        :class:`~nutchy.items.PageItem`.
        """
        if self._parse_enabled is None:
            self._parse_enabled = self.settings.getbool("NUTCH_FETCHER_PARSE")
        if not self._parse_enabled:
            return None
        entry = response.meta.get(META_ENTRY)
        outcome = response.meta.get(META_OUTCOME)
        if entry is None or outcome is None or outcome.crawl_status != CrawlStatus.FETCHED:
            return None
        page = FetchedPage(
            key=entry.key,
            url=entry.url,
            batch_id=entry.batch_id,
            base_url=outcome.base_url or entry.url,
            content_type=outcome.content_type,
            headers=dict(outcome.headers or {}),
            content=outcome.content or b"",
            truncated=outcome.truncated,
            http_status=outcome.http_code,
            fetch_time=response.meta.get(META_FETCH_TIME, 0),
        )
        page.handover = response.meta.get(META_HANDOVER)
        return page


def leave_out_unused_components(settings: BaseSettings) -> None:
    """Take :data:`UNUSED_EXTENSIONS` out of *settings*' ``EXTENSIONS_BASE``, and
    :data:`COOKIES_MIDDLEWARE` out of their ``DOWNLOADER_MIDDLEWARES_BASE`` while
    ``COOKIES_ENABLED`` is off (a spider's ``update_settings``: the ``nutch`` spider's and the
    ``nutch_sitemap`` spider's)."""
    _leave_out_of_base(settings, "EXTENSIONS_BASE", UNUSED_EXTENSIONS)
    if not settings.getbool("COOKIES_ENABLED"):
        _leave_out_of_base(settings, "DOWNLOADER_MIDDLEWARES_BASE", (COOKIES_MIDDLEWARE,))


def _leave_out_of_base(settings: BaseSettings, name: str, paths: tuple[str, ...]) -> None:
    """Take *paths* out of Scrapy's component setting *name* (``EXTENSIONS_BASE``...), so that
    Scrapy does not even import them; an entry of the project's setting (``EXTENSIONS``...)
    still turns one on, as ``getwithbase`` merges the two."""
    base = settings.getdict(name)
    kept = {path: order for path, order in base.items() if path not in paths}
    if len(kept) < len(base):
        priority = max(settings.getpriority(name) or 0, SETTINGS_PRIORITIES["spider"])
        settings.set(name, kept, priority)


#: The spider's own arguments (``-a NAME=VALUE``).
SPIDER_ARGUMENTS = (
    "batch",
    "resume",
    "partition",
    "timelimit",
    "rounds",
    "topN",
    "adddays",
    "seeds",
)


def _check_arguments(spidercls: type[Spider], kwargs: dict[str, Any]) -> None:
    """Refuse a ``-a NAME=VALUE`` the spider does not know (``-a topn=3`` would otherwise be
    ignored), naming the ones it knows. Scrapy sets any argument as an attribute of the spider;
    the names a subclass declares as attributes, and the ones beginning with ``_`` (scrapyd's
    ``_job``), are let through."""
    unknown = [name for name in kwargs if not name.startswith("_") and not hasattr(spidercls, name)]
    if not unknown:
        return
    name = unknown[0]
    close = [known for known in SPIDER_ARGUMENTS if known.lower() == name.lower()]
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(
        f"unknown spider argument -a {name}={kwargs[name]}{hint}; the {spidercls.name} spider"
        f" takes -a {', -a '.join(SPIDER_ARGUMENTS)}"
    )


def _addon_enabled(settings: BaseSettings) -> bool:
    from nutchy.addon import NutchAddon

    for addon in build_component_list(settings.getdict("ADDONS")):
        try:
            cls = load_object(addon)
        except (ImportError, NameError, ValueError):
            continue  # Scrapy says so when it loads the add-ons
        if isinstance(cls, type) and issubclass(cls, NutchAddon):
            return True
    return False
