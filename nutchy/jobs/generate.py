"""The generate job: select a batch on the web table and mark it.

:func:`generate` streams the rows that are due (the embedded store reads them from its fetch-time
index, the HBase store filters them on the server), feeds them to
:class:`~nutchy.core.generate.Selector`, gives each selected URL a partition, and writes the
batch marks through a buffered writer. It reads only the fields selection needs, and holds no
more than *topN* rows and the hosts they belong to, whatever the size of the table.

Each selected row gets these cells, and no other cell of the row changes:

- ``mk:_gnmrk_`` and ``f:bid`` = the batch id (what Nutch's GeneratorJob writes);
- ``mtdt:_npt_`` = the row's partition, a 4-byte big-endian int from 0 to ``numFetchers`` - 1
  (nutchy only: the fetcher of one partition reads it; Nutch ignores it);
- ``mtdt:_ngt_`` = the generate time, an 8-byte big-endian time in ms, only when the batch id
  does not carry the time itself (nutchy only; used to expire the mark after ``crawl.gen.delay``);
- ``f:fi``, only when :func:`~nutchy.core.schedule.should_fetch` cut an interval longer than
  ``db.fetch.interval.max``.
"""

from __future__ import annotations

import logging
import math
import socket
import struct
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from nutchy.core.generate import (
    COUNT_MODES,
    GENERATE_TIME_KEY,
    PARTITION_KEY,
    GenerateConfig,
    GenerateCounts,
    ScoredRow,
    Selected,
    Selector,
    batch_time,
    generator_sort_value,
    merge_selections,
    partition_for,
    select_in_score_order,
)
from nutchy.core.status import Mark
from nutchy.core.urls import InvalidURL, domain_of, host_of
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError
from nutchy.jobs import _settings
from nutchy.jobs._regions import Tasks, run
from nutchy.jobs.hostdb import host_gate, suspended_hosts
from nutchy.store import open_host_store
from nutchy.store.base import Scan
from nutchy.store.schema import (
    Cells,
    RowUpdate,
    build_update,
    encode_cell,
    field_named,
    marker_column,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import WebTable

__all__ = [
    "PARTITION_MODES",
    "GenerateOptions",
    "GenerateResult",
    "generate",
    "resolve_hosts",
]

logger = logging.getLogger(__name__)

#: Valid values of ``partition.url.mode``.
PARTITION_MODES: Final = ("byHost", "byDomain", "byIP")
#: The columns generate reads of each due row: the fields selection needs, and of the ``mk``
#: and ``mtdt`` maps only the entries it looks at (the generate mark, the distance, and the
#: generate time of a mark whose batch id carries none). Asking for these columns alone lets a
#: store answer from an index (the embedded store's due index).
GENERATE_COLUMNS: Final = (
    field_named("fetch_time").column,
    field_named("fetch_interval").column,
    field_named("score").column,
    marker_column(Mark.GENERATE),
    marker_column(Mark.DISTANCE),
    b"mtdt:" + GENERATE_TIME_KEY.encode(),
)
#: The fields of the pages built from them that were read whole.
_LOADED: Final = frozenset(("fetch_time", "fetch_interval", "score"))
_DAY_MS: Final = 86_400_000

Resolver = Callable[[Collection[str], float], dict[str, str]]


def resolve_hosts(hosts: Collection[str], timeout: float) -> dict[str, str]:
    """Resolve *hosts* to IP addresses in parallel; return those that resolved in time.

    Each host gets about *timeout* seconds (the lookups run 32 at a time under one deadline
    sized for the whole list). A host that fails or is too slow is left out of the answer.
    """
    if not hosts:
        return {}
    workers = min(32, len(hosts))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nutchy-resolve")
    try:
        futures = {host: pool.submit(_resolve, host) for host in hosts}
        deadline = time.monotonic() + timeout * math.ceil(len(hosts) / workers)
        found: dict[str, str] = {}
        for host, future in futures.items():
            address = _result(future, deadline)
            if address is not None:
                found[host] = address
            else:
                logger.debug("Cannot resolve %s", host)
        return found
    finally:
        # Do not wait for lookups that are still hanging; they end on their own.
        pool.shutdown(wait=False, cancel_futures=True)


def _result(future: Future[str], deadline: float) -> str | None:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except (OSError, UnicodeError, FutureTimeout):
        return None


def _resolve(host: str) -> str:
    return str(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    """The settings generate runs with: the selection *config*, and how to partition the batch.

    *num_fetchers* partitions by *partition_mode* (``partition.url.mode``: ``byHost``,
    ``byDomain`` or ``byIP``) with *partition_seed* (``partition.url.seed``); *resolve_timeout*
    is the time (s) allowed to resolve one host in ``byIP`` mode. *suspended_hosts*, when given,
    is called with the generate time (ms) at each generate and returns the hosts to leave out
    (the host database's, :func:`nutchy.jobs.hostdb.suspended_hosts`).
    """

    config: GenerateConfig
    num_fetchers: int = 1
    partition_mode: str = "byHost"
    partition_seed: int = 0
    resolve_timeout: float = 5.0
    suspended_hosts: Callable[[int], frozenset[str]] | None = None

    def __post_init__(self) -> None:
        if self.num_fetchers < 1:
            raise ValueError(f"'num_fetchers' must be >= 1, got {self.num_fetchers!r}")
        if self.partition_mode not in PARTITION_MODES:
            raise ValueError(
                f"'partition_mode' must be one of {', '.join(PARTITION_MODES)},"
                f" got {self.partition_mode!r}"
            )

    @classmethod
    def from_settings(
        cls,
        settings: BaseSettings,
        *,
        top_n: int | None = None,
        num_fetchers: int = 1,
        filter_urls: bool = True,
        normalize: bool = True,
    ) -> GenerateOptions:
        """Options from nutchy's settings; *filter_urls* and *normalize* False are ``-noFilter``
        and ``-noNorm``, which turn the check off whatever the settings say."""
        filtering = filter_urls and _settings.get_bool(settings, "NUTCH_GENERATE_FILTER")
        config = GenerateConfig(
            top_n=top_n,
            max_count=_settings.get_int(settings, "NUTCH_GENERATE_MAX_COUNT", -1),
            count_mode=_settings.get_choice(settings, "NUTCH_GENERATE_COUNT_MODE", COUNT_MODES),
            min_score=_settings.get_float(settings, "NUTCH_GENERATE_MIN_SCORE"),
            max_distance=_settings.get_int(settings, "NUTCH_GENERATE_MAX_DISTANCE", -1),
            gen_delay=_settings.get_int(settings, "NUTCH_CRAWL_GEN_DELAY", -1),
            max_interval=_settings.get_int(settings, "NUTCH_DB_FETCH_INTERVAL_MAX", 1),
            normalize=normalize and _settings.get_bool(settings, "NUTCH_GENERATE_NORMALISE"),
            url_filter=_settings.url_filter(settings) if filtering else None,
        )
        timeout = _settings.get_float(settings, "NUTCH_PARTITION_RESOLVE_TIMEOUT")
        if timeout <= 0:
            raise ConfigError(f"NUTCH_PARTITION_RESOLVE_TIMEOUT must be > 0, got {timeout!r}")
        return cls(
            config=config,
            num_fetchers=num_fetchers,
            partition_mode=_settings.get_choice(
                settings, "NUTCH_PARTITION_URL_MODE", PARTITION_MODES
            ),
            partition_seed=_settings.get_int(settings, "NUTCH_PARTITION_URL_SEED"),
            resolve_timeout=timeout,
            suspended_hosts=_suspended_hosts(settings),
        )


@dataclass(slots=True)
class GenerateResult:
    """What generate did: the batch id, what happened to the rows it read (*counts*), the number
    of URLs in each partition, the hosts that did not resolve in ``byIP`` mode (partitioned by
    host instead), and the rows skipped because a cell did not decode."""

    batch_id: str
    cur_time: int
    counts: GenerateCounts
    partitions: list[int] = field(default_factory=list)
    unresolved: int = 0
    undecodable: int = 0
    #: Seconds spent reading and selecting, then partitioning and writing the marks.
    select_seconds: float = 0.0
    write_seconds: float = 0.0

    @property
    def selected(self) -> int:
        return self.counts.selected


def generate(
    table: WebTable,
    options: GenerateOptions,
    *,
    now: int,
    batch_id: str,
    add_days: int = 0,
    resolver: Resolver = resolve_hosts,
    progress: Progress | None = None,
    tasks: Tasks | None = None,
) -> GenerateResult:
    """Select a batch due at *now* (ms) plus *add_days* days, and mark it *batch_id*.

    *resolver* turns host names into IP addresses in ``byIP`` mode (:func:`resolve_hosts` by
    default). Nothing is written when nothing is selected. With *tasks*, the due rows are read
    and selected range by range in ``tasks.count`` processes and the ranges' batches merged
    into the one a single selection gives (*options* must pickle); the embedded store's read
    of the due rows best first, which stops when the batch is full, is one task whatever
    *tasks* says.

    It holds the table's ``generate`` lock (:meth:`~nutchy.store.base.Store.exclusive`) from the
    first read to the last mark written, so generates of one table run one after the other and
    each skips the rows those before it marked: two batches never share a row.
    """
    with table.store.exclusive("generate") as still_held:
        return _generate(
            table,
            options,
            now=now,
            batch_id=batch_id,
            add_days=add_days,
            resolver=resolver,
            progress=progress,
            still_held=still_held,
            tasks=tasks or Tasks(),
        )


def _generate(
    table: WebTable,
    options: GenerateOptions,
    *,
    now: int,
    batch_id: str,
    add_days: int,
    resolver: Resolver,
    progress: Progress | None,
    still_held: Callable[[], None],
    tasks: Tasks,
) -> GenerateResult:
    """:func:`generate`, under the generate lock; *still_held* raises if the lock was lost."""
    started = time.perf_counter()
    cur_time = now + add_days * _DAY_MS
    undecodable = 0
    config = options.config
    if options.suspended_hosts is not None:
        skip = options.suspended_hosts(cur_time)
        if skip:
            logger.info("The host database suspends %d hosts: left out", len(skip))
            config = replace(config, skip_hosts=config.skip_hosts | skip)
    found = _select_by_score(table, config, cur_time, progress)
    if found is not None:
        batch, counts = found
    else:
        batch, counts, undecodable = _select_due(table, config, cur_time, progress, tasks)
    selected_at = time.perf_counter()
    result = GenerateResult(
        batch_id,
        cur_time,
        counts,
        undecodable=undecodable,
        select_seconds=selected_at - started,
    )
    if not batch:
        return result
    # Written in key order: neighbouring rows share storage pages (and HBase regions).
    batch.sort(key=lambda selected: selected.key)
    partitions, result.unresolved = _partitions(batch, options, resolver)
    result.partitions = [0] * options.num_fetchers
    for partition in partitions:
        result.partitions[partition] += 1
    still_held()
    with table.writer() as writer:
        for update in _mark_updates(batch, partitions, batch_id, now):
            writer.add(update)
    result.write_seconds = time.perf_counter() - selected_at
    logger.info(
        "Generated batch %(batch)s: %(n)d URLs (%(select).2f s selecting, %(write).2f s writing)",
        {
            "batch": batch_id,
            "n": len(batch),
            "select": result.select_seconds,
            "write": result.write_seconds,
        },
    )
    return result


def _suspended_hosts(settings: BaseSettings) -> Callable[[int], frozenset[str]] | None:
    """What :attr:`GenerateOptions.suspended_hosts` calls with the settings' host database
    rules; ``None`` when they are off."""
    gate = host_gate(settings)
    if not gate.enabled:
        return None

    def read(now: int) -> frozenset[str]:
        hosts = open_host_store(settings)
        try:
            return suspended_hosts(hosts, gate, now=now)
        finally:
            hosts.close()

    return read


class _NotInOrder(Exception):
    """A due row that :func:`_select_by_score` cannot take: the general path must select."""


def _select_by_score(
    table: WebTable, config: GenerateConfig, cur_time: int, progress: Progress | None
) -> tuple[list[Selected], GenerateCounts] | None:
    """The batch and counts, from due rows read best score first, when the store can read them
    so (the embedded store) and the selection ranks by score (the default scoring); ``None``
    when the general path must select instead.

    Rows come sorted by the bytes of their score, which is the order of the scores while none
    is negative or not a number. A row that breaks that, or has a cell that does not decode (a
    row the general path skips and reports), ends this path: the general one then selects, so
    that the batch is always the one :class:`~nutchy.core.generate.Selector` gives.
    """
    scan = getattr(table.store, "scan_due_by_score", None)
    if scan is None or config.sort_value is not generator_sort_value:
        return None
    rows = scan(cur_time, table.read_limit)
    try:
        return select_in_score_order(_scored_rows(rows, progress), config, cur_time)
    except (_NotInOrder, ValueError) as exc:
        logger.info("Selecting with the general path: %s", exc)
        return None
    finally:
        rows.close()


def _scored_rows(rows: Iterator[tuple[Any, ...]], progress: Progress | None) -> Iterator[ScoredRow]:
    decode_score = _SCORE[1]
    for score_cell, key, mark, distance, generate_time, fetch_time, interval in rows:
        if progress is not None:
            progress.advance()
        if (
            (score_cell is not None and len(score_cell) != 4)
            or (fetch_time is not None and len(fetch_time) != 8)
            or (interval is not None and len(interval) != 4)
        ):
            raise _NotInOrder(f"row {key!r}: a cell does not decode")
        yield ScoredRow(
            0.0 if score_cell is None else decode_score(score_cell),
            key.decode(),
            None if mark is None else mark.decode(),
            None if distance is None else distance.decode(),
            generate_time,
        )


def _select_due(
    table: WebTable,
    config: GenerateConfig,
    cur_time: int,
    progress: Progress | None,
    tasks: Tasks,
) -> tuple[list[Selected], GenerateCounts, int]:
    """The batch, the counts and the undecodable rows, from the due rows of each key range of
    *table* selected in *tasks* (the whole table in one range with one task), the ranges'
    batches merged by :func:`~nutchy.core.generate.merge_selections`."""
    parts = run(
        table,
        tasks,
        partial(_select_range, config=config, cur_time=cur_time),
        local=partial(_select_range, config=config, cur_time=cur_time, progress=progress),
        on_result=None if progress is None else lambda part: progress.advance(part[1].seen),
    )
    if len(parts) == 1:
        return parts[0]
    counts = GenerateCounts()
    for _, part_counts, _ in parts:
        for name, value in part_counts.as_dict().items():
            setattr(counts, name, getattr(counts, name) + value)
    batch = merge_selections((part[0] for part in parts), config)
    counts.limited += counts.selected - len(batch)
    counts.selected = len(batch)
    return batch, counts, sum(part[2] for part in parts)


def _select_range(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    config: GenerateConfig,
    cur_time: int,
    progress: Progress | None = None,
) -> tuple[list[Selected], GenerateCounts, int]:
    """The batch of the due rows from *start* to *stop*, the counts, and the rows that did not
    decode."""
    # The URL checks (normalization, the URL filter) cost more than everything else selection
    # does; they are made on the batch alone, and only if the batch holds a URL they reject is
    # the batch selected again with the checks on every candidate (see nutchy.core.generate).
    selector = Selector(config, cur_time, defer_url_checks=True)
    undecodable = _select(table, selector, progress, start, stop)
    batch = selector.result()
    if not selector.exact:
        logger.info(
            "The best due rows include URLs that normalization or the URL filter rejects;"
            " selecting again with the checks on every candidate"
        )
        selector = Selector(config, cur_time)
        undecodable = _select(table, selector, progress, start, stop)
        batch = selector.result()
    return batch, selector.counts, undecodable


def _select(
    table: WebTable,
    selector: Selector,
    progress: Progress | None,
    start: bytes = b"",
    stop: bytes | None = None,
) -> int:
    """Feed the due rows of *table* from *start* to *stop* to *selector*; return the rows whose
    cells did not decode."""
    undecodable = 0
    scan = Scan(start=start, stop=stop, columns=GENERATE_COLUMNS, due_before=selector.cur_time)
    for key, cells in table.store.scan(scan, table.read_limit):
        if progress is not None:
            progress.advance()
        try:
            page = _due_page(key, cells)
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            undecodable += 1
            logger.warning("Skipped row %r: a cell does not decode: %s", key, exc)
            continue
        selector.add(page)
    return undecodable


# The columns and decoders of _due_page, looked up once.
_TS: Final = (field_named("fetch_time").column, field_named("fetch_time").codec.decode)
_FI: Final = (field_named("fetch_interval").column, field_named("fetch_interval").codec.decode)
_SCORE: Final = (field_named("score").column, field_named("score").codec.decode)
_MARK_CELLS: Final = (
    (Mark.GENERATE, marker_column(Mark.GENERATE)),
    (Mark.DISTANCE, marker_column(Mark.DISTANCE)),
)
_GENERATE_TIME: Final = b"mtdt:" + GENERATE_TIME_KEY.encode()


def _due_page(key: bytes, cells: Cells) -> WebPage:
    """The page of one due row, with what generate reads (:data:`GENERATE_COLUMNS`), decoded
    with the schema's codecs.

    This is :func:`~nutchy.store.schema.decode_page` for those columns, several times faster: at
    a million rows the decoding of the due rows is a good part of generate's time. A cell that
    does not decode raises ``ValueError``, ``struct.error`` or ``UnicodeDecodeError``.
    """
    get = cells.get
    raw = get(_TS[0])
    fetch_time = 0 if raw is None else _TS[1](raw)
    raw = get(_FI[0])
    fetch_interval = 0 if raw is None else _FI[1](raw)
    raw = get(_SCORE[0])
    score = 0.0 if raw is None else _SCORE[1](raw)
    markers: dict[str, str] = {}
    for name, column in _MARK_CELLS:
        raw = get(column)
        if raw is not None:
            markers[name] = raw.decode()
    raw = get(_GENERATE_TIME)
    return WebPage(
        key.decode(),
        fetch_time=fetch_time,
        fetch_interval=fetch_interval,
        score=score,
        markers=markers,
        metadata={} if raw is None else {GENERATE_TIME_KEY: raw},
        loaded=_LOADED,
    )


def _partitions(
    batch: list[Selected], options: GenerateOptions, resolver: Resolver
) -> tuple[list[int], int]:
    """The partition of each selected URL, and how many hosts did not resolve (``byIP``)."""
    if options.num_fetchers == 1:
        return [0] * len(batch), 0
    hosts = [_host(s.url) for s in batch]
    unresolved = 0
    if options.partition_mode == "byHost":
        keys = hosts
    elif options.partition_mode == "byDomain":
        keys = [_domain(s.url, host) for s, host in zip(batch, hosts, strict=True)]
    else:
        distinct = set(hosts)
        addresses = resolver(distinct, options.resolve_timeout)
        missing = distinct - addresses.keys()
        unresolved = len(missing)
        if missing:
            logger.warning(
                "%(n)d of %(total)d hosts did not resolve within %(timeout)s s; their URLs are"
                " partitioned by host name (first: %(first)s)",
                {
                    "n": unresolved,
                    "total": len(distinct),
                    "timeout": options.resolve_timeout,
                    "first": min(missing),
                },
            )
        keys = [addresses.get(host, host) for host in hosts]
    memo: dict[str, int] = {}
    partitions = []
    for key in keys:
        partition = memo.get(key)
        if partition is None:
            partition = memo[key] = partition_for(key, options.num_fetchers, options.partition_seed)
        partitions.append(partition)
    return partitions, unresolved


def _host(url: str) -> str:
    try:
        return host_of(url)
    except InvalidURL:  # the selector checked the URL already; hash the URL as Nutch does
        return url


def _domain(url: str, host: str) -> str:
    try:
        return domain_of(url)
    except InvalidURL:
        return host


def _mark_updates(
    batch: Iterable[Selected], partitions: Iterable[int], batch_id: str, now: int
) -> Iterable[RowUpdate]:
    """The cells written on each selected row (see the module docstring)."""
    metadata: dict[str, bytes] = {}
    if batch_time(batch_id) is None:
        metadata[GENERATE_TIME_KEY] = now.to_bytes(8, "big", signed=True)
    # Encoded once through the schema, then copied for every row.
    template = build_update(
        "", {"batch_id": batch_id}, {"markers": {Mark.GENERATE: batch_id}, "metadata": metadata}
    ).puts
    partition_column = b"mtdt:" + PARTITION_KEY.encode()
    interval_column = field_named("fetch_interval").column
    # Rows of one partition (with no interval to correct) share one mapping of cells: no store
    # modifies the cells of an update, and the embedded store sorts shared cells out once.
    shared: dict[tuple[int, int | None], Cells] = {}
    for selected, partition in zip(batch, partitions, strict=True):
        puts = shared.get((partition, selected.fetch_interval))
        if puts is None:
            puts = dict(template)
            puts[partition_column] = partition.to_bytes(4, "big", signed=True)
            if selected.fetch_interval is not None:
                puts[interval_column] = encode_cell("fetch_interval", selected.fetch_interval)
            shared[partition, selected.fetch_interval] = puts
        yield RowUpdate(selected.key.encode(), puts)
