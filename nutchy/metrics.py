"""Prometheus metrics of the fetch (``NUTCH_METRICS_PORT``), with prometheus-client.

Once a second (``NUTCH_METRICS_INTERVAL``) :class:`NutchMetricsExtension` takes a *snapshot* of
the fetch on the reactor thread: the crawler's ``nutch/…`` stats (pages by fetch status and HTTP
code, bytes, rows read, outcomes written, store writes and their seconds, WARC records) and what
the scheduler holds now (queues, rows waiting, requests in flight; :data:`~nutchy._fetch.fetch_gauges`).
A snapshot is a small dict of numbers; the exporter's HTTP thread only reads the last one, so a
scrape costs the fetch nothing and never meets a half-updated value. Nothing is counted on the
fetch's path that the stats did not count already.

Where the metrics are served:

- ``scrapy crawl nutch`` (``nutchy fetch``): the crawl serves them itself on
  ``NUTCH_METRICS_ADDRESS:NUTCH_METRICS_PORT`` (127.0.0.1 by default). The port is bound when the
  crawler is built: a port in use stops the crawl before it starts, in one line.
- ``nutchy crawl``: the crawl's own process serves them for the whole crawl, and each round's
  fetch child (one, or ``-numFetchers K``) writes its snapshot to a file of a folder the parent
  names (environment variable ``NUTCHY_METRICS_DIR``) instead of serving. The parent sums the
  children's counters (those of finished children included, so counters never go back) and
  their gauges (live children only), and adds the round's: its number, the URLs its batch holds,
  the phase. One port, one scrape target, whatever the number of processes; prometheus-client's
  multiprocess mode was not used because it needs its environment set before the library is
  imported and keeps a file per metric and process, where a snapshot per child is enough here.

prometheus-client is an optional dependency (``pip install 'nutchy[metrics]'``), imported only
when the metrics are on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from nutchy.exceptions import ConfigError, NutchError

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

__all__ = [
    "DIR_ENV",
    "CrawlMetrics",
    "MetricsServer",
    "NutchMetricsExtension",
    "metric_families",
    "take_snapshot",
]

logger = logging.getLogger(__name__)

#: The environment variable that names the folder where a fetch child of ``nutchy crawl`` writes
#: its snapshots (instead of serving them).
DIR_ENV: Final = "NUTCHY_METRICS_DIR"

#: Stats summed into counters: snapshot key -> (stats key, metric name, help).
_COUNTERS: Final = {
    "bytes": ("nutch/fetch/bytes", "nutchy_fetch_bytes", "Bytes of content fetched."),
    "rows_read": (
        "nutch/fetch/rows_read",
        "nutchy_fetch_rows_read",
        "Rows of the batch read from the table (batch progress).",
    ),
    "written": (
        "nutch/fetch/written",
        "nutchy_fetch_outcomes_written",
        "Fetch outcomes written to the table (batch progress).",
    ),
    "store_put_errors": (
        "nutch/store/put_error",
        "nutchy_store_put_errors",
        "Row updates that could not be written.",
    ),
    "warc_captures": (
        "nutch/warc/captures",
        "nutchy_warc_answers",
        "Answers written to WARC files (counted when the fetch ends).",
    ),
}
_STATUS_PREFIX: Final = "nutch/fetch/status/"
_HTTP_PREFIX: Final = "nutch/fetch/http/"


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigError(
            f"metrics need prometheus-client ({exc}): pip install 'nutchy[metrics]'"
        ) from exc
    return prometheus_client


def take_snapshot(
    stats: Mapping[str, Any],
    gauges: Mapping[str, float],
    *,
    previous: Mapping[str, Any] | None,
    now: float,
    final: bool = False,
) -> dict[str, Any]:
    """A snapshot of the fetch from its *stats* and the scheduler's *gauges*; pages/s is over
    the time since the *previous* snapshot (at *now*, ``time.time()``).

    >>> first = take_snapshot({"nutch/fetch/status/SUCCESS": 4}, {"queues": 2}, previous=None, now=10.0)
    >>> first["status"], first["gauges"]
    ({'SUCCESS': 4}, {'queues': 2})
    >>> later = take_snapshot({"nutch/fetch/status/SUCCESS": 10}, {}, previous=first, now=12.0)
    >>> later["pages_per_s"]
    3.0
    """
    status: dict[str, int] = {}
    http: dict[str, int] = {}
    counters: dict[str, float] = {}
    for key, value in list(stats.items()):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.startswith(_STATUS_PREFIX):
            status[key[len(_STATUS_PREFIX) :]] = int(value)
        elif key.startswith(_HTTP_PREFIX):
            http[key[len(_HTTP_PREFIX) :]] = int(value)
    for name, (key, _, _) in _COUNTERS.items():
        value = stats.get(key, 0)
        counters[name] = float(value) if isinstance(value, (int, float)) else 0.0
    pages = sum(status.values())
    rate = 0.0
    if previous is not None and now > previous["time"]:
        rate = max(pages - previous["pages"], 0) / (now - previous["time"])
    return {
        "pid": os.getpid(),
        "time": now,
        "final": final,
        "pages": pages,
        "pages_per_s": round(rate, 3),
        "status": status,
        "http": http,
        "counters": counters,
        "store_writes": int(stats.get("nutch/store/writes", 0) or 0),
        "store_write_seconds": int(stats.get("nutch/store/write_us", 0) or 0) / 1e6,
        "gauges": dict(gauges),
    }


#: The scheduler's gauges: snapshot key -> (metric name, help).
_GAUGES: Final = {
    "queues": (
        "nutchy_fetch_queues",
        "Fetch queues known (hosts, with fetcher.queue.mode byHost).",
    ),
    "busy_queues": (
        "nutchy_fetch_queues_busy",
        "Fetch queues with rows waiting or a request in flight.",
    ),
    "queued": ("nutchy_fetch_rows_queued", "Rows read and waiting in the fetch queues."),
    "in_flight": ("nutchy_fetch_in_flight", "Requests released and not ended."),
}


def metric_families(
    snapshots: list[dict[str, Any]], crawl: Mapping[str, float] | None = None
) -> Iterator[Any]:
    """The Prometheus metric families of *snapshots* (several: the fetch children of a crawl;
    counters summed, gauges summed over those not *final*) and of the *crawl*'s own gauges."""
    core = _prometheus().metrics_core
    pages = core.CounterMetricFamily(
        "nutchy_fetch_pages", "Rows fetched, by Nutch fetch status.", labels=["status"]
    )
    http = core.CounterMetricFamily(
        "nutchy_fetch_http_responses", "Answers, by HTTP status code.", labels=["code"]
    )
    by_status: dict[str, int] = {}
    by_code: dict[str, int] = {}
    for snapshot in snapshots:
        for name, n in snapshot["status"].items():
            by_status[name] = by_status.get(name, 0) + n
        for code, n in snapshot["http"].items():
            by_code[code] = by_code.get(code, 0) + n
    for name, n in sorted(by_status.items()):
        pages.add_metric([name], n)
    for code, n in sorted(by_code.items()):
        http.add_metric([code], n)
    yield pages
    yield http
    for key, (_, name, text) in _COUNTERS.items():
        yield core.CounterMetricFamily(
            name, text, value=sum(s["counters"].get(key, 0.0) for s in snapshots)
        )
    yield core.SummaryMetricFamily(
        "nutchy_store_write_seconds",
        "Seconds of each write of fetch outcomes to the table (one write: a batch of rows).",
        count_value=sum(s["store_writes"] for s in snapshots),
        sum_value=sum(s["store_write_seconds"] for s in snapshots),
    )
    live = [s for s in snapshots if not s["final"]]
    yield core.GaugeMetricFamily(
        "nutchy_fetch_pages_per_second",
        "Rows fetched per second over the last interval.",
        value=sum(s["pages_per_s"] for s in live),
    )
    for key, (name, text) in _GAUGES.items():
        yield core.GaugeMetricFamily(name, text, value=sum(s["gauges"].get(key, 0) for s in live))
    yield core.GaugeMetricFamily(
        "nutchy_fetch_processes", "Fetch processes running.", value=len(live)
    )
    for name, value in (crawl or {}).items():
        yield core.GaugeMetricFamily(
            f"nutchy_crawl_{name}", _CRAWL_HELP.get(name, name), value=value
        )


_CRAWL_HELP: Final = {
    "round": "The round nutchy crawl is in (0 before the first).",
    "batch_urls": "URLs generate put in the round's batch.",
    "phase": "1 while a round fetches, parses and updates its batch; 0 between rounds.",
    "rounds_done": "Rounds nutchy crawl finished.",
}


class MetricsServer:
    """prometheus-client's HTTP server on *address*:*port* for *collect*, a function that
    returns the metric families; a port that cannot be bound is a
    :exc:`~nutchy.exceptions.ConfigError` naming it."""

    def __init__(self, collect: Callable[[], Iterator[Any]], *, address: str, port: int) -> None:
        prometheus = _prometheus()

        class _Collector:
            def collect(self) -> Iterator[Any]:
                return collect()

        registry = prometheus.CollectorRegistry(auto_describe=False)
        registry.register(_Collector())
        try:
            self._server, self._thread = prometheus.start_http_server(
                port, addr=address, registry=registry
            )
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else "not available"
            raise ConfigError(
                f"NUTCH_METRICS_PORT: cannot serve metrics on {address}:{port}, the port is {why}"
                f" ({exc.strerror or exc}); choose another port, or -1 to turn the metrics off"
            ) from exc
        self.port: int = self._server.server_port
        self.address = address

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def metrics_port(settings: BaseSettings) -> int:
    """``NUTCH_METRICS_PORT`` (-1: off), checked."""
    from nutchy.jobs._settings import get_int

    port = get_int(settings, "NUTCH_METRICS_PORT")
    if not -1 <= port <= 65535:
        raise ConfigError(f"NUTCH_METRICS_PORT must be a port (0 for any), or -1, got {port}")
    return port


def read_snapshots(folder: Path) -> list[dict[str, Any]]:
    """The last snapshot of every fetch child that wrote one in *folder*."""
    found = []
    for path in sorted(folder.glob("fetch-*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):  # being replaced: the next scrape reads it
            continue
    return found


def write_snapshot(folder: Path, snapshot: Mapping[str, Any]) -> None:
    """Write *snapshot* as ``fetch-<pid>.json`` in *folder*, whole or not at all (a temporary
    file renamed over the last one)."""
    target = folder / f"fetch-{snapshot['pid']}.json"
    handle, name = tempfile.mkstemp(dir=folder, prefix=".fetch-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(snapshot, out)
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


class CrawlMetrics:
    """The metrics of ``nutchy crawl`` (see the module docstring): the server, the folder its
    fetch children write to, and the round's gauges (:attr:`crawl`, set by the crawl)."""

    def __init__(self, *, address: str, port: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="nutchy-metrics-"))
        self.crawl: dict[str, float] = {"round": 0, "batch_urls": 0, "phase": 0, "rounds_done": 0}
        try:
            self.server = MetricsServer(self._collect, address=address, port=port)
        except BaseException:
            self._remove_folder()
            raise
        self._environ = os.environ.get(DIR_ENV)
        os.environ[DIR_ENV] = str(self.folder)  # the fetch children inherit it

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> CrawlMetrics | None:
        """The crawl's metrics, or ``None`` when ``NUTCH_METRICS_PORT`` is -1."""
        port = metrics_port(settings)
        if port < 0:
            return None
        return cls(address=settings.get("NUTCH_METRICS_ADDRESS") or "127.0.0.1", port=port)

    def _collect(self) -> Iterator[Any]:
        return metric_families(read_snapshots(self.folder), dict(self.crawl))

    def close(self) -> None:
        self.server.close()
        if self._environ is None:
            os.environ.pop(DIR_ENV, None)
        else:
            os.environ[DIR_ENV] = self._environ
        self._remove_folder()

    def _remove_folder(self) -> None:
        for path in self.folder.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()


class NutchMetricsExtension:
    """Takes the fetch's snapshots and serves them, or writes them for ``nutchy crawl`` (see the
    module docstring). *stats* is the crawler's; *gauges* asks the scheduler for its gauges;
    *server* is the running :class:`MetricsServer`, or ``None`` when *folder* gets the
    snapshots; *interval* is in seconds."""

    def __init__(
        self,
        *,
        stats: StatsCollector,
        gauges: Callable[[], Mapping[str, float]],
        interval: float,
        server: MetricsServer | None = None,
        folder: Path | None = None,
    ) -> None:
        self.stats = stats
        self._gauges = gauges
        self.interval = interval
        self.server = server
        self.folder = folder
        self.snapshot: dict[str, Any] | None = None
        self._loop: Any = None
        self._pending: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy import signals
        from scrapy.exceptions import NotConfigured

        from nutchy._checks import refuse_to_start
        from nutchy._fetch import fetch_gauges
        from nutchy.jobs._settings import get_float

        settings = crawler.settings
        folder = os.environ.get(DIR_ENV)
        try:
            port = metrics_port(settings)
            if port < 0 and not folder:
                raise NotConfigured  # quietly: an argument would be logged as a warning
            interval = get_float(settings, "NUTCH_METRICS_INTERVAL")
            if interval <= 0:
                raise ConfigError(f"NUTCH_METRICS_INTERVAL must be > 0, got {interval!r}")
            server = None
            if not folder:
                extension: NutchMetricsExtension | None = None

                def collect() -> Iterator[Any]:
                    snapshot = None if extension is None else extension.snapshot
                    return metric_families([snapshot] if snapshot else [])

                address = settings.get("NUTCH_METRICS_ADDRESS") or "127.0.0.1"
                server = MetricsServer(collect, address=address, port=port)
                logger.info(
                    "Serving metrics on http://%(address)s:%(port)d/metrics",
                    {"address": address, "port": server.port},
                )
        except NutchError as exc:
            refuse_to_start(exc)
        assert crawler.stats is not None

        def gauges() -> Mapping[str, float]:
            answers = crawler.signals.send_catch_log(fetch_gauges)
            merged: dict[str, float] = {}
            for _, answer in answers:
                if isinstance(answer, dict):
                    merged.update(answer)
            return merged

        extension = cls(
            stats=crawler.stats,
            gauges=gauges,
            interval=interval,
            server=server,
            folder=Path(folder) if folder else None,
        )
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        from scrapy.utils.asyncio import create_looping_call

        self._loop = create_looping_call(self.take)
        self._loop.start(self.interval, now=True)

    def take(self, final: bool = False) -> dict[str, Any]:
        """Take a snapshot now (on the reactor thread); hand it to the folder in a thread."""
        snapshot = take_snapshot(
            self.stats.get_stats(),
            self._gauges(),
            previous=self.snapshot,
            now=time.time(),
            final=final,
        )
        self.snapshot = snapshot
        if self.folder is not None and self._pending is None and not final:
            from scrapy.utils.asyncio import run_in_thread
            from scrapy.utils.defer import deferred_from_coro

            d = deferred_from_coro(run_in_thread(write_snapshot, self.folder, snapshot))
            d.addErrback(lambda failure: logger.debug("Snapshot not written: %s", failure.value))
            d.addBoth(self._written)
            if not d.called:
                self._pending = d
        return snapshot

    def _written(self, _: object) -> None:
        self._pending = None

    async def spider_closed(self) -> None:
        from scrapy.utils.asyncio import run_in_thread
        from scrapy.utils.defer import maybe_deferred_to_future

        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._pending is not None:  # the last write must be the final snapshot
            await maybe_deferred_to_future(self._pending)
        snapshot = self.take(final=True)
        if self.folder is not None:
            try:
                await run_in_thread(write_snapshot, self.folder, snapshot)
            except OSError as exc:
                logger.warning("Cannot write the last metrics snapshot: %s", exc)
        if self.server is not None:
            await run_in_thread(self.server.close)
