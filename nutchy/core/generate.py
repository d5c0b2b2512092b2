"""Generate: choose the next batch of URLs to fetch.

:class:`Selector` reads pages one at a time, in any order, and keeps the batch that Nutch's
GeneratorJob would select, exactly: due pages, by descending sort value (OPIC's score², then the
URL in ascending order), at most ``generate.max.count`` per host or per domain, at most *topN* in
all. Memory holds at most *topN* pages, plus one small heap per host that has pages among them.

>>> from nutchy.core.webpage import WebPage
>>> pages = [WebPage(f"aaa:http/{i:03d}", score=float(i)) for i in range(101)]
>>> selector = Selector(GenerateConfig(top_n=2), cur_time=0)
>>> selector.add_all(pages)
>>> [s.url for s in selector.result()]
['http://aaa/100', 'http://aaa/099']

The algorithm
-------------

Nutch sorts every candidate by sort value and walks the list from the top: a URL whose host
already has ``max.count`` selected URLs is skipped, and the walk stops after *topN* selected. A
URL is therefore selected exactly when (a) it is among the ``max.count`` best candidates of its
host, and (b) it is among the *topN* best of the URLs that satisfy (a). Call the URLs that satisfy
(a) the *eligible* ones.

The selector keeps the best *topN* eligible URLs seen so far, in a global min-heap (worst at the
top), and for each host a min-heap of that host's URLs among them. A new candidate:

1. is dropped if the global heap is full and the candidate is worse than its worst entry;
2. is dropped if its host heap holds ``max.count`` entries, all better than the candidate;
   otherwise, if the host heap is full, the candidate replaces the host's worst entry, which
   leaves both heaps (it is marked dead in the global heap and skipped when it surfaces);
3. is pushed on both heaps; if the global heap now holds more than *topN* live entries, the
   worst one is popped, and it is also the worst entry of its host heap, so it leaves that too.

Dropping is safe because the *topN*-th best eligible value only ever rises: a new candidate
either adds an eligible URL or replaces one by a better one. A candidate dropped in step 1 can
never come back into the best *topN*; a host entry popped in step 3 is worse than the new
threshold, so it can no longer stop a later URL of its host that could be selected (such a URL
would have to be better than the threshold, hence better than the popped entry). A host whose
heap empties is forgotten, so memory stays within *topN* entries and the hosts that own them.

Steps 1 and 2 only compare numbers, so the URL checks that cost more (normalization, the URL
filter) run after them, on the candidates still in the running. The selection is the same as if
every row had been checked; only the counters of filtered and unnormalized URLs are then counts
among the candidates that reached that stage.

With *defer_url_checks*, the URL checks wait until the end and run on the batch alone: the
selector first keeps the best eligible URLs as if every URL passed the checks, then checks the
batch. If every URL of it passes, the batch is exactly the one the checks would have given (a URL
that is eligible and among the best *topN* when nothing is rejected stays so when rejected URLs
are taken out, and a URL that only becomes eligible when a better URL of its host is rejected
would need that rejected URL in the batch). If one fails, :attr:`Selector.exact` is ``False``
and the caller selects again with the checks on. Rows usually arrive in no useful order, so
without deferral most due rows are checked (at *topN* = half the due rows, 85%); with it, only
the batch is.

Partitions (``-numFetchers``) do not take part in the selection: the batch is selected as a whole,
so *topN* is exact whatever the number of partitions (Nutch divides it among its reducers and
rounds down), and each selected URL is then given a partition by :func:`partition_for`.

Generate marks
--------------

A row that already carries a generate mark (``mk:_gnmrk_``) belongs to a batch that has not been
through updatedb yet and is skipped, unless that batch was generated more than ``crawl.gen.delay``
ms before *cur_time*: then the batch is taken as abandoned and the row can be selected again
(Nutch 1.x's rule; Nutch 2.x defines the setting but never reads it, so its marks never expire).
The generate time is read from the mark itself when the batch id has Nutch's ``<epoch
seconds>-<number>`` form (:func:`batch_time`), and otherwise from ``mtdt:_ngt_``, an 8-byte
big-endian time in ms that nutchy writes beside a batch id that carries no time (the key Nutch 1.x
uses for the same purpose; Nutch 2.x ignores it). A mark whose time cannot be known never expires.
"""

from __future__ import annotations

import heapq
import math
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Final, NamedTuple

from nutchy.core.schedule import should_fetch
from nutchy.core.status import Mark
from nutchy.core.urlfilter import RegexURLFilter
from nutchy.core.urls import (
    HOST_KEY_MODES,
    InvalidURL,
    host_key,
    host_of,
    normalize_url,
    unreverse_url,
)
from nutchy.core.webpage import WebPage

__all__ = [
    "COUNT_MODES",
    "GENERATE_TIME_KEY",
    "PARTITION_KEY",
    "GenerateConfig",
    "GenerateCounts",
    "OutOfOrder",
    "ScoredRow",
    "Selected",
    "Selector",
    "batch_time",
    "generator_sort_value",
    "java_string_hash",
    "merge_selections",
    "new_batch_id",
    "partition_for",
    "read_generate_time",
    "select_in_score_order",
]

#: ``mtdt`` key of the generate time (8-byte big-endian ms), written when the batch id has none.
GENERATE_TIME_KEY: Final = "_ngt_"
#: ``mtdt`` key of the partition of a generated row (4-byte big-endian int), for the fetcher.
PARTITION_KEY: Final = "_npt_"
#: Valid values of ``generate.count.mode``.
COUNT_MODES: Final = HOST_KEY_MODES

# "<epoch seconds>-<number>": the ids of GeneratorJob.randomBatchId and bin/crawl. Nine or more
# digits of seconds (after 1973) so that ids such as "1-1" are not read as times.
_TIMED_BATCH_ID: Final = re.compile(r"([1-9][0-9]{8,11})-[0-9]+")

# bytes.translate table turning ascending byte order into descending order.
_INVERT: Final = bytes(range(255, -1, -1))


def new_batch_id(now: int, nonce: int) -> str:
    """A batch id in Nutch's format, ``<epoch seconds>-<nonce>``, for a generate at *now* (ms).

    >>> new_batch_id(1_443_000_000_123, 1234567890)
    '1443000000-1234567890'
    """
    if nonce < 0:
        raise ValueError(f"'nonce' must be >= 0, got {nonce!r}")
    return f"{now // 1000}-{nonce}"


def batch_time(batch_id: str) -> int | None:
    """The generate time (ms) a batch id carries, or ``None`` if it does not have Nutch's form.

    >>> batch_time("1443000000-1234567890")
    1443000000000
    >>> batch_time("my-batch") is None, batch_time("1-1") is None
    (True, True)
    """
    match = _TIMED_BATCH_ID.fullmatch(batch_id)
    return None if match is None else int(match.group(1)) * 1000


def read_generate_time(page: WebPage) -> int | None:
    """When the batch in *page*'s generate mark was generated (ms), if that can be known.

    >>> read_generate_time(WebPage("k:http/", markers={"_gnmrk_": "1443000000-7"}))
    1443000000000
    >>> read_generate_time(WebPage("k:http/", markers={"_gnmrk_": "b"},
    ...                            metadata={"_ngt_": (5).to_bytes(8, "big")}))
    5
    """
    mark = page.markers.get(Mark.GENERATE)
    if mark is None:
        return None
    return _generate_time(mark, page.metadata.get(GENERATE_TIME_KEY))


def _generate_time(mark: str, raw: bytes | None) -> int | None:
    """The generate time of the batch *mark*, from the mark or else from *raw* (``_ngt_``)."""
    timed = batch_time(mark)
    if timed is not None:
        return timed
    if raw is None or len(raw) != 8:
        return None
    return int.from_bytes(raw, "big", signed=True)


def generator_sort_value(page: WebPage) -> float:
    """OPIC's ``generatorSortValue``: the score times the score the generator passes in.

    Ranking by score² is ranking by score for the usual non-negative scores; ``generate.min.score``
    is compared with this value, as in Nutch.

    >>> generator_sort_value(WebPage("k:http/", score=0.5))
    0.25
    """
    return page.score * page.score


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of *text*, a signed 32-bit int (over UTF-16 code units).

    >>> java_string_hash("www.example.com")
    -1878290138
    """
    data = text.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int, seed: int = 0) -> int:
    """The partition (0 to *partitions* - 1) of URLs whose host, domain or IP is *key*.

    The formula of Nutch's ``URLPartitioner``, ``((hashCode(key) ^ seed) & 0x7fffffff) %
    partitions`` with Java's ``String.hashCode``, so nutchy and Nutch give a host the same
    partition. It is stable across processes and machines (unlike Python's ``hash``).

    >>> partition_for("www.example.com", 2)
    0
    """
    if partitions < 1:
        raise ValueError(f"'partitions' must be >= 1, got {partitions!r}")
    if partitions == 1:
        return 0
    return ((java_string_hash(key) ^ seed) & 0x7FFFFFFF) % partitions


@dataclass(frozen=True, slots=True)
class GenerateConfig:
    """What generate selects; every value comes from a Nutch property or a generate option.

    *top_n* is ``-topN`` (``None``: no limit). *max_count* is ``generate.max.count``: at most this
    many URLs per host or domain (*count_mode*, ``generate.count.mode``); -1 or 0 means no limit,
    as in Nutch. *min_score* (``generate.min.score``) is compared with the sort value;
    *max_distance* (``generate.max.distance``, -1 for none) caps the ``dist`` marker.
    *gen_delay* (``crawl.gen.delay``, ms) is how long a generate mark locks a row; -1 means
    forever, as in Nutch 2.x. *max_interval* is ``db.fetch.interval.max`` (s). *normalize* skips
    rows whose URL is not normalized (``-noNorm`` turns the check off) and *url_filter*, when
    given, skips the URLs it rejects. *sort_value* is the scoring filter's sort value.
    *skip_hosts* are lower-cased hosts left out whole (the host database's suspended hosts,
    :class:`nutchy.core.hostdb.HostGate`).
    """

    top_n: int | None = None
    max_count: int = -1
    count_mode: str = "host"
    min_score: float = 0.0
    max_distance: int = -1
    gen_delay: int = 604_800_000
    max_interval: int = 7_776_000
    normalize: bool = True
    url_filter: RegexURLFilter | None = None
    sort_value: Callable[[WebPage], float] = generator_sort_value
    skip_hosts: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.top_n is not None and self.top_n < 1:
            raise ValueError(f"'top_n' must be >= 1 or None, got {self.top_n!r}")
        if self.max_count < -1:
            raise ValueError(f"'max_count' must be >= -1, got {self.max_count!r}")
        if self.count_mode not in COUNT_MODES:
            raise ValueError(
                f"'count_mode' must be one of {', '.join(COUNT_MODES)}, got {self.count_mode!r}"
            )
        if math.isnan(self.min_score):
            raise ValueError("'min_score' must be a number, got nan")
        if self.max_distance < -1:
            raise ValueError(f"'max_distance' must be >= -1, got {self.max_distance!r}")
        if self.gen_delay < -1:
            raise ValueError(f"'gen_delay' must be >= -1, got {self.gen_delay!r}")
        if self.max_interval < 1:
            raise ValueError(f"'max_interval' must be >= 1, got {self.max_interval!r}")


@dataclass(slots=True)
class GenerateCounts:
    """What happened to the rows a selector saw.

    *seen* = *generated* + *distance* + *not_due* + *min_score* + *malformed* + *unnormalized*
    + *filtered* + *suspended* + *limited* + *selected*. *expired* counts the rows among them whose old
    generate mark had expired (they went on to the other checks).
    """

    seen: int = 0
    generated: int = 0
    expired: int = 0
    distance: int = 0
    not_due: int = 0
    min_score: int = 0
    malformed: int = 0
    unnormalized: int = 0
    filtered: int = 0
    suspended: int = 0
    limited: int = 0
    selected: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Selected:
    """One selected row: its key and URL, its sort value, and the fetch interval to write back
    when :func:`~nutchy.core.schedule.should_fetch` corrected it (``None`` otherwise)."""

    key: str
    url: str
    sort_value: float
    fetch_interval: int | None = None


class _Slot:
    """The changing part of a heap entry: the row, its host key, and whether it is live."""

    __slots__ = ("alive", "host", "interval", "key", "url")

    def __init__(self, key: str, url: str, host: str, interval: int | None) -> None:
        self.key = key
        self.url = url
        self.host = host
        self.interval = interval
        self.alive = True


#: A heap entry, ordered worst first: ``(sort value, inverted URL, seq, slot)``. *inverted* is
#: the URL's bytes with every byte complemented, plus a terminator, so that ascending order of
#: *inverted* is descending order of the URL. *seq* makes entries unique, so that comparisons
#: never reach the slot. Plain tuples keep every comparison of the heaps in C.
_Entry = tuple[float, bytes, int, _Slot]
_SLOT: Final = 3


class Selector:
    """Keeps the batch of the pages it is given; see the module docstring for the algorithm.

    *config* says what to select and *cur_time* (ms) is the time a page must be due at (now,
    plus ``-adddays``). Feed pages with :meth:`add` or :meth:`add_all`, in any order, each row
    once; then :meth:`result` gives the batch and :attr:`counts` what happened to every row.

    A page must carry ``fetch_time``, ``fetch_interval``, ``score`` and ``markers`` (and
    ``metadata`` with ``_ngt_`` for marks whose batch id has no time).

    With *defer_url_checks*, normalization and the URL filter are checked on the batch alone,
    at :meth:`result`; when a URL of the batch fails them, :attr:`exact` becomes ``False`` and
    the batch must be selected again without deferral (see the module docstring).
    """

    def __init__(
        self, config: GenerateConfig, cur_time: int, *, defer_url_checks: bool = False
    ) -> None:
        self.config = config
        self.cur_time = cur_time
        self.counts = GenerateCounts()
        self._defer = defer_url_checks and (config.normalize or config.url_filter is not None)
        #: Whether :meth:`result` is the batch Nutch would select; ``False`` only when deferred
        #: URL checks rejected a URL of the batch.
        self.exact = True
        self._limit = config.top_n
        self._max_count = max(0, config.max_count)
        self._top: list[_Entry] = []
        self._live = 0
        self._seq = 0
        self._hosts: dict[str, list[_Entry]] = {}

    def add_all(self, pages: Iterable[WebPage]) -> None:
        for page in pages:
            self.add(page)

    def add(self, page: WebPage) -> None:
        """Consider one page."""
        config = self.config
        counts = self.counts
        counts.seen += 1
        markers = page.markers
        if Mark.GENERATE in markers:
            if not self._mark_expired(page):
                counts.generated += 1
                return
            counts.expired += 1
        if config.max_distance > -1:
            distance = _distance(markers.get(Mark.DISTANCE))
            if distance is not None and distance > config.max_distance:
                counts.distance += 1
                return
        # A row due by its fetch time keeps its interval (should_fetch's common case, inline).
        interval = None
        if page.fetch_time > self.cur_time:
            due = should_fetch(
                page.fetch_time, page.fetch_interval, self.cur_time, config.max_interval
            )
            if not due.due:
                counts.not_due += 1
                return
            if due.fetch_interval != page.fetch_interval:
                interval = due.fetch_interval
        sort_value = config.sort_value(page)
        if math.isnan(sort_value):  # ranks below everything
            sort_value = -math.inf
        if sort_value < config.min_score:
            counts.min_score += 1
            return
        # Steps 1 and 2 of the algorithm: cheap comparisons before the costly URL checks. The
        # sort value alone settles most candidates; the URL is needed only to break a tie.
        top = self._top
        full = self._limit is not None and self._live >= self._limit
        if full:
            self._drop_dead()
            if sort_value < top[0][0]:
                counts.limited += 1
                return
        try:
            url = page.url
            host = host_key(url, config.count_mode) if self._max_count else ""
            if config.skip_hosts and host_of(url) in config.skip_hosts:
                counts.suspended += 1
                return
        except InvalidURL:
            counts.malformed += 1
            return
        self._seq += 1
        probe = (sort_value, url.encode().translate(_INVERT) + b"\xff", self._seq)
        if full and probe < top[0]:
            counts.limited += 1
            return
        host_heap = self._hosts.get(host) if self._max_count else None
        if host_heap is not None and len(host_heap) >= self._max_count and probe < host_heap[0]:
            counts.limited += 1
            return
        if not self._defer:
            rejected = self._url_check(url)
            if rejected is not None:
                setattr(counts, rejected, getattr(counts, rejected) + 1)
                return
        self._admit((*probe, _Slot(page.key, url, host, interval)), host_heap)

    def _url_check(self, url: str) -> str | None:
        """``None`` if *url* passes normalization and the URL filter, else the counter to
        increment."""
        config = self.config
        if config.normalize:
            try:
                normalized = normalize_url(url)
            except InvalidURL:
                return "malformed"
            if normalized != url:
                return "unnormalized"
        if config.url_filter is not None and not config.url_filter.accepts(url):
            return "filtered"
        return None

    def _admit(self, entry: _Entry, host_heap: list[_Entry] | None) -> None:
        if self._max_count:
            if host_heap is None:
                self._hosts[entry[_SLOT].host] = [entry]
            elif len(host_heap) >= self._max_count:
                worst = heapq.heapreplace(host_heap, entry)
                worst[_SLOT].alive = False
                self._live -= 1
                self.counts.limited += 1
            else:
                heapq.heappush(host_heap, entry)
        heapq.heappush(self._top, entry)
        self._live += 1
        if self._limit is not None and self._live > self._limit:
            self._drop_dead()
            worst = heapq.heappop(self._top)
            worst[_SLOT].alive = False
            self._live -= 1
            self.counts.limited += 1
            if self._max_count:
                host = worst[_SLOT].host
                host_heap = self._hosts[host]
                # The global worst is the worst of its host too, so it is the host heap's root.
                popped = heapq.heappop(host_heap)
                assert popped is worst
                if not host_heap:
                    del self._hosts[host]
        if len(self._top) > 2 * self._live + 1024:
            self._top = [e for e in self._top if e[_SLOT].alive]
            heapq.heapify(self._top)

    def _drop_dead(self) -> None:
        top = self._top
        while top and not top[0][_SLOT].alive:
            heapq.heappop(top)

    def _mark_expired(self, page: WebPage) -> bool:
        delay = self.config.gen_delay
        if delay < 0:
            return False
        generated = read_generate_time(page)
        return generated is not None and generated + delay <= self.cur_time

    def result(self) -> list[Selected]:
        """The batch, best first (sort value descending, then URL ascending)."""
        entries = sorted((e for e in self._top if e[_SLOT].alive), reverse=True)
        if self._defer and any(self._url_check(e[_SLOT].url) is not None for e in entries):
            self.exact = False
        self.counts.selected = len(entries)
        return [Selected(e[_SLOT].key, e[_SLOT].url, e[0], e[_SLOT].interval) for e in entries]


def _url_of(key: str) -> str | None:
    try:
        return unreverse_url(key)
    except InvalidURL:
        return None


def _distance(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


class ScoredRow(NamedTuple):
    """What :func:`select_in_score_order` needs of one due row: its OPIC *score* (finite, not
    negative), its *key*, its generate mark and ``dist`` marker (``None`` when missing), and
    the raw ``mtdt:_ngt_`` cell."""

    score: float
    key: str
    generate_mark: str | None
    distance: str | None
    generate_time: bytes | None


class OutOfOrder(ValueError):
    """A row of :func:`select_in_score_order` came after a row of a lower score."""


def select_in_score_order(
    rows: Iterable[ScoredRow], config: GenerateConfig, cur_time: int
) -> tuple[list[Selected], GenerateCounts]:
    """The batch :class:`Selector` keeps, from due rows that come best score first.

    This is Nutch's own walk: the rows are already sorted, so URLs are taken from the top, a URL
    whose host (or domain) has ``max.count`` selected URLs is skipped, and the walk stops after
    *topN* are selected. Rows of equal score are walked by URL, ascending. No heap is needed,
    URLs are built only for the rows walked, and normalization and the URL filter run only on the
    rows that would otherwise be selected; the rows after the batch are only counted.

    It applies only to the default sort value, OPIC's score² (:func:`generator_sort_value`),
    which ranks non-negative scores as the scores themselves: *config* must have it, and every
    score must be finite and not negative (:class:`ValueError` otherwise, and
    :class:`OutOfOrder` for a row whose score is higher than the row before it). Every row must
    be due at *cur_time* by its fetch time.

    The batch is the one :class:`Selector` gives, in the same order. The counters that do not
    depend on the order rows arrive in (*seen*, *generated*, *expired*, *distance*, *not_due*,
    *min_score*, *selected*) are the same too; the rows skipped for their URL or their host are
    counted as the walk meets them.

    >>> rows = [ScoredRow(3.0, "com.a:http/x", None, None, None),
    ...         ScoredRow(2.0, "com.b:http/", None, None, None),
    ...         ScoredRow(2.0, "com.a:http/", None, None, None)]
    >>> batch, counts = select_in_score_order(rows, GenerateConfig(top_n=2), cur_time=0)
    >>> [(s.url, s.sort_value) for s in batch], counts.limited
    ([('http://a.com/x', 9.0), ('http://a.com/', 4.0)], 1)
    """
    if config.sort_value is not generator_sort_value:
        raise ValueError("select_in_score_order needs the default sort value (OPIC's score²)")
    walk = _Walk(config, cur_time)
    counts = walk.counts
    group: list[str] = []
    group_score = -1.0
    previous = math.inf
    gen_delay = config.gen_delay
    max_distance = config.max_distance
    min_score = config.min_score
    for score, key, mark, distance, generate_time in rows:
        if not score <= previous:  # also true for a NaN score
            if math.isnan(score):
                raise ValueError(f"row {key!r}: the score is not a number")
            raise OutOfOrder(f"row {key!r}: score {score!r} comes after {previous!r}")
        if score < 0.0 or (score == 0.0 and math.copysign(1.0, score) < 0):
            raise ValueError(f"row {key!r}: negative score {score!r}")
        previous = score
        counts.seen += 1
        if mark is not None:
            if gen_delay < 0:
                counts.generated += 1
                continue
            generated = _generate_time(mark, generate_time)
            if generated is None or generated + gen_delay > cur_time:
                counts.generated += 1
                continue
            counts.expired += 1
        if max_distance > -1:
            hops = _distance(distance)
            if hops is not None and hops > max_distance:
                counts.distance += 1
                continue
        if score * score < min_score:
            counts.min_score += 1
            continue
        if walk.full:
            counts.limited += 1
        elif score == group_score:
            group.append(key)
        else:
            walk.take(group, group_score)
            if walk.full:
                counts.limited += 1
                group = []
            else:
                group = [key]
                group_score = score
    walk.take(group, group_score)
    counts.selected = len(walk.batch)
    return walk.batch, counts


class _Walk:
    """The state of :func:`select_in_score_order`: the batch so far and the URLs per host."""

    def __init__(self, config: GenerateConfig, cur_time: int) -> None:
        self.config = config
        self.counts = GenerateCounts()
        self.batch: list[Selected] = []
        self.full = False
        self._checker = Selector(config, cur_time)
        self._per_host: dict[str, int] = {}

    def take(self, keys: list[str], score: float) -> None:
        """Walk the rows *keys*, all of one *score*, by URL; stop when the batch is full."""
        if not keys:
            return
        counts = self.counts
        config = self.config
        max_count = max(0, config.max_count)
        limit = config.top_n
        per_host = self._per_host
        url_check = self._checker._url_check
        checks = config.normalize or config.url_filter is not None
        urls = [(url, key) for key in keys if (url := _url_of(key)) is not None]
        counts.malformed += len(keys) - len(urls)
        urls.sort()
        sort_value = score * score
        batch = self.batch
        skip_hosts = config.skip_hosts
        for n, (url, key) in enumerate(urls):
            host = ""
            if skip_hosts:
                try:
                    suspended = host_of(url) in skip_hosts
                except InvalidURL:
                    counts.malformed += 1
                    continue
                if suspended:
                    counts.suspended += 1
                    continue
            if max_count:
                try:
                    host = host_key(url, config.count_mode)
                except InvalidURL:
                    counts.malformed += 1
                    continue
                if per_host.get(host, 0) >= max_count:
                    counts.limited += 1
                    continue
            if checks:
                rejected = url_check(url)
                if rejected is not None:
                    setattr(counts, rejected, getattr(counts, rejected) + 1)
                    continue
            batch.append(Selected(key, url, sort_value))
            if max_count:
                per_host[host] = per_host.get(host, 0) + 1
            if limit is not None and len(batch) >= limit:
                self.full = True
                counts.limited += len(urls) - n - 1
                return


def merge_selections(parts: Iterable[Iterable[Selected]], config: GenerateConfig) -> list[Selected]:
    """The batch of a whole table from the batches of its key ranges, each selected by a
    :class:`Selector` with *config* over one range (``nutchy generate -numTasks K``), best first.

    The candidates are walked as Nutch walks them, best first, at most ``max.count`` per host or
    domain and *topN* in all: the result is the batch one selector over the whole table gives,
    even when a host's rows lie in several ranges. Every URL of that batch is in its range's
    batch: of the URLs its range kept above it, those of hosts whose rows all lie in the range
    are above it in the whole table's batch too, and a host that spans ranges can put above it
    no more of its URLs than it has better URLs in other ranges, themselves above it in the
    whole batch, which holds fewer than *topN* URLs above it. The walk over the union then takes
    back exactly the whole batch: a candidate it keeps that the whole batch lacks would need its
    host's better URLs missing from the union, and they are in the whole batch.

    >>> config = GenerateConfig(top_n=2, max_count=1)
    >>> left = [Selected("com.a:http/1", "http://a.com/1", 3.0)]  # a.com/2 (2.0) was over max.count
    >>> right = [Selected("com.a:http/3", "http://a.com/3", 2.5), Selected("com.b:http/", "http://b.com/", 1.0)]
    >>> [s.url for s in merge_selections([left, right], config)]
    ['http://a.com/1', 'http://b.com/']
    """
    candidates = sorted(
        (selected for part in parts for selected in part),
        key=lambda selected: (-selected.sort_value, selected.url.encode()),
    )
    max_count = max(0, config.max_count)
    per_host: dict[str, int] = {}
    batch: list[Selected] = []
    for selected in candidates:
        if config.top_n is not None and len(batch) >= config.top_n:
            break
        if max_count:
            host = host_key(selected.url, config.count_mode)
            if per_host.get(host, 0) >= max_count:
                continue
            per_host[host] = per_host.get(host, 0) + 1
        batch.append(selected)
    return batch
