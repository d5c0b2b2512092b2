"""The updatedb merge: what one row becomes after a round (Nutch's ``DbUpdateReducer``).

updatedb works in two halves. For every page of the batch, :func:`outlink_inlinks` turns its
outlinks into inlinks of their targets, each carrying a share of the page's OPIC cash (the
mapper). Then, for every row that is a page of the batch or the target of such an inlink,
:func:`update_row` computes the columns to write (the reducer): status transitions and the next
fetch time for the pages of the batch, and inlinks, distance and score for every row.

Nothing here touches the table: the result is a :class:`~nutchy.core.fetch.RowChange`, the
arguments of :func:`nutchy.store.schema.build_update`, and the caller passes *now*.

>>> from nutchy.core.schedule import DefaultFetchSchedule
>>> from nutchy.core.scoring import OPICScoring
>>> config = UpdateConfig(schedule=DefaultFetchSchedule(), scoring=OPICScoring())
>>> change = update_row(None, "com.example:http/new", [Inlink("http://example.com/", "hi", 0.25, 0)],
...     now=1000, config=config)
>>> change.fields["status"], change.fields["fetch_time"], change.fields["score"]
(<CrawlStatus.UNFETCHED: 1>, 1000, 0.25)
>>> change.entries["inlinks"], change.entries["markers"]
({'http://example.com/': 'hi'}, {'dist': '1'})
"""

from __future__ import annotations

import email.utils
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from nutchy.core.fetch import RowChange
from nutchy.core.java import f32
from nutchy.core.schedule import ChangeState, DefaultFetchSchedule, FetchSchedule, Schedule
from nutchy.core.scoring import OPICScoring, cash_bytes, read_cash
from nutchy.core.status import CrawlStatus, Mark, Metadata
from nutchy.core.webpage import WebPage

__all__ = [
    "Inlink",
    "UpdateConfig",
    "given_cash",
    "in_batch",
    "outlink_inlinks",
    "share_cash",
    "update_row",
]

#: The fields :func:`update_row` reads from a page of the batch.
BATCH_FIELDS = (
    "status",
    "fetch_time",
    "prev_fetch_time",
    "fetch_interval",
    "retries_since_fetch",
    "modified_time",
    "prev_modified_time",
    "signature",
    "prev_signature",
    "headers",
    "outlinks",
    "metadata",
    "markers",
    "score",
)
#: The fields :func:`update_row` reads from a page of the batch when it is told what the page gave
#: its outlinks (``given``): everything but the outlinks.
BATCH_UPDATE_FIELDS = tuple(f for f in BATCH_FIELDS if f != "outlinks")
#: The fields :func:`share_cash` reads from a page of the batch (what updatedb's first pass reads).
SHARE_FIELDS = ("status", "outlinks", "metadata", "markers")
#: The fields :func:`update_row` reads from a row that is only the target of inlinks.
TARGET_FIELDS = ("score", "metadata", "markers")

_score = operator.attrgetter("score")

_RESCHEDULED = frozenset(
    {CrawlStatus.FETCHED, CrawlStatus.REDIR_TEMP, CrawlStatus.REDIR_PERM, CrawlStatus.NOTMODIFIED}
)


class Inlink(NamedTuple):
    """An inlink on its way to its target: the *source* URL, its *anchor*, the OPIC *score* it
    carries and the source's *distance* from the seeds (``None`` when unknown). *stored* says
    that an existing target holds it already: its source was not modified since the updatedb
    that wrote it (see :func:`share_cash`)."""

    source: str
    anchor: str
    score: float
    distance: int | None
    stored: bool = False


@dataclass(frozen=True, slots=True)
class UpdateConfig:
    """The settings of updatedb.

    *retry_max* is ``db.fetch.retry.max``, *max_inlinks* ``db.update.max.inlinks`` and
    *additions_allowed* ``db.update.additions.allowed``; *batch_id* is the batch being updated
    (``None`` for ``-all``). The schedule's ``max_interval`` is ``db.fetch.interval.max``.
    """

    schedule: FetchSchedule = field(default_factory=DefaultFetchSchedule)
    scoring: OPICScoring = field(default_factory=OPICScoring)
    retry_max: int = 3
    max_inlinks: int = 10000
    additions_allowed: bool = True
    batch_id: str | None = None

    def __post_init__(self) -> None:
        if self.retry_max < 0:
            raise ValueError(f"'retry_max' must be >= 0, got {self.retry_max!r}")
        if self.max_inlinks < 0:
            raise ValueError(f"'max_inlinks' must be >= 0, got {self.max_inlinks!r}")


def in_batch(page: WebPage, batch_id: str | None) -> bool:
    """Whether *page* belongs to the batch updated (any generated batch for ``None``).

    >>> p = WebPage("com.a:http/", markers={"_gnmrk_": "b1"})
    >>> in_batch(p, "b1"), in_batch(p, "b2"), in_batch(p, None), in_batch(WebPage("k"), None)
    (True, False, True, False)
    """
    mark = page.markers.get(Mark.GENERATE)
    return mark is not None and (batch_id is None or mark == batch_id)


def _distance(page: WebPage) -> int | None:
    raw = page.markers.get(Mark.DISTANCE)
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


def share_cash(page: WebPage, config: UpdateConfig) -> tuple[list[tuple[str, Inlink]], float]:
    """What a page of the batch gives its outlink targets: the inlinks, as (target URL, inlink),
    and the cash they carry in all (what the page gives away).

    Each inlink carries the page's cash shared out by OPIC, the anchor, and the page's distance.
    The inlinks of a page that was NOTMODIFIED are *stored*: its outlinks are those of its last
    parse, and the updatedb after that parse wrote them into their targets (inlinks are never
    removed), so only their score needs writing.

    >>> page = WebPage("a:http/", outlinks={"http://a/x": "X", "http://b/": ""},
    ...     metadata={"_csh_": cash_bytes(1)}, markers={"dist": "2"})
    >>> inlinks, given = share_cash(page, UpdateConfig())
    >>> inlinks[0], given
    (('http://a/x', Inlink(source='http://a/', anchor='X', score=0.5, distance=2, stored=False)), 1.0)
    """
    cash = read_cash(page.metadata)
    if not page.outlinks:
        return [], 0.0
    targets = list(page.outlinks)
    source = page.url
    shares = config.scoring.distribute_score_to_outlinks(source, cash, targets)
    distance = _distance(page)
    anchors = page.outlinks
    scores = shares.scores
    stored = page.status == CrawlStatus.NOTMODIFIED
    # tuple.__new__ builds each Inlink without the Python call of its __new__ (a page gives
    # tens of inlinks).
    make = tuple.__new__
    inlinks = [
        (t, make(Inlink, (source, anchors[t], scores[t], distance, stored))) for t in targets
    ]
    return inlinks, cash - shares.cash


def outlink_inlinks(page: WebPage, config: UpdateConfig) -> list[tuple[str, Inlink]]:
    """The inlinks a page of the batch gives its outlink targets (see :func:`share_cash`).

    >>> page = WebPage("a:http/", outlinks={"http://a/x": "X", "http://b/": ""},
    ...     metadata={"_csh_": b"?\\x80\\x00\\x00"}, markers={"dist": "2"})
    >>> outlink_inlinks(page, UpdateConfig())
    [('http://a/x', Inlink(source='http://a/', anchor='X', score=0.5, distance=2, stored=False)), ('http://b/', Inlink(source='http://a/', anchor='', score=0.5, distance=2, stored=False))]
    """
    return share_cash(page, config)[0]


def given_cash(page: WebPage, config: UpdateConfig) -> float:
    """The cash a page of the batch gives its outlinks (see :func:`share_cash`).

    >>> page = WebPage("a:http/", outlinks={"http://b/": ""}, metadata={"_csh_": cash_bytes(1)})
    >>> given_cash(page, UpdateConfig()), given_cash(WebPage("a:http/"), UpdateConfig())
    (1.0, 0.0)
    """
    return share_cash(page, config)[1]


def _modified_state(page: WebPage) -> ChangeState:
    if page.status == CrawlStatus.NOTMODIFIED:
        # A 304 is not modified, whatever older signatures say (Nutch 2.x: MODIFIED, §12 #11).
        return ChangeState.NOTMODIFIED
    if page.signature is not None and page.prev_signature is not None:
        if page.signature != page.prev_signature:
            return ChangeState.MODIFIED
        return ChangeState.NOTMODIFIED
    return ChangeState.UNKNOWN


@functools.lru_cache(maxsize=1024)  # the pages of a site built at once share their dates
def _http_date(value: str | None) -> int | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return int(parsed.timestamp() * 1000)


def _last_modified(headers: dict[str, str]) -> str | None:
    for name, value in headers.items():
        if name.lower() == "last-modified":
            return value
    return None


def _schedule_batch_page(page: WebPage, config: UpdateConfig, fields: dict[str, object]) -> None:
    """The status and schedule of a page of the batch, after its fetch outcome (reference §8)."""
    schedule = config.schedule
    current = Schedule(
        page.fetch_time,
        page.fetch_interval,
        page.retries_since_fetch,
        page.modified_time,
        page.prev_modified_time,
    )
    status = CrawlStatus(page.status) if page.status in CrawlStatus._value2member_map_ else None
    if status in _RESCHEDULED:
        modified_time, prev_modified_time = page.modified_time, page.prev_modified_time
        http_modified = _http_date(_last_modified(page.headers))
        if http_modified is not None:
            modified_time, prev_modified_time = http_modified, page.modified_time
        new = schedule.set_fetch_schedule(
            current,
            prev_fetch_time=page.prev_fetch_time,
            prev_modified_time=prev_modified_time,
            fetch_time=page.fetch_time,
            modified_time=modified_time,
            state=_modified_state(page),
        )
        if new.fetch_interval > schedule.max_interval:
            new = schedule.force_refetch(new, now=page.fetch_time, asap=False)
            fields["status"] = CrawlStatus.UNFETCHED
    elif status == CrawlStatus.RETRY:
        new = schedule.set_page_retry_schedule(current, fetch_time=page.fetch_time)
        fields["status"] = (
            CrawlStatus.UNFETCHED
            if new.retries_since_fetch < config.retry_max
            else CrawlStatus.GONE
        )
    elif status == CrawlStatus.GONE:
        new = schedule.set_page_gone_schedule(current, fetch_time=page.fetch_time)
    else:
        return  # generated but not fetched: only the marks go, so it can be generated again
    for name in Schedule.__slots__:
        value = getattr(new, name)
        if value != getattr(page, name):
            fields[name] = value


def _duplicate_after_fetch(
    page: WebPage, fields: dict[str, object], metadata: dict[str, object]
) -> None:
    """A duplicate (a page with ``mtdt:_dup_``, see :mod:`nutchy.core.dedup`) stays one after
    a fetch that left its content as it was (a 304, or the same signature), and stops being one
    when its content changed, or its fetch did not find it (gone, redirected, to retry): its
    status is then the fetch's and ``mtdt:_dup_`` goes. The next ``nutchy dedup`` compares it
    again either way.

    >>> page = WebPage("a:http/", status=CrawlStatus.FETCHED, signature=b"1",
    ...     prev_signature=b"1", metadata={Metadata.DUPLICATE_OF: b"http://a/"})
    >>> fields, metadata = {}, {}
    >>> _duplicate_after_fetch(page, fields, metadata)
    >>> fields, metadata
    ({'status': <CrawlStatus.DUPLICATE: 7>}, {})
    >>> page.signature = b"2"
    >>> _duplicate_after_fetch(page, fields := {}, metadata)
    >>> fields, metadata
    ({}, {'_dup_': None})
    """
    if Metadata.DUPLICATE_OF not in page.metadata:
        return
    status = fields.get("status", page.status)
    if status == CrawlStatus.DUPLICATE:
        return  # generated but not fetched: nothing is known of its content
    unchanged = _modified_state(page) != ChangeState.MODIFIED
    if status in (CrawlStatus.FETCHED, CrawlStatus.NOTMODIFIED) and unchanged:
        fields["status"] = CrawlStatus.DUPLICATE
    else:
        metadata[Metadata.DUPLICATE_OF] = None


def update_row(
    page: WebPage | None,
    key: str,
    inlinks: Sequence[Inlink],
    *,
    now: int,
    config: UpdateConfig,
    given: float | None = None,
) -> RowChange | None:
    """The change of row *key* (*page*, or ``None`` for a new URL) that receives *inlinks*.

    A page of the batch (see :func:`in_batch`) gets its status transition and next fetch time
    (a duplicate whose content did not change stays a duplicate), gives away its cash (see :func:`outlink_inlinks`) and loses its generate, fetch and parse
    marks. Any other existing row changes only in inlinks, distance, score and cash: its marks
    may belong to another crawl working on the same table. A new URL becomes an UNFETCHED row
    due at *now*, unless additions are not allowed (then the result is ``None``).

    Inlinks are written entry by entry (the *max_inlinks* best of *inlinks*, less those an
    existing row holds already), never by replacing the family, so inlinks of earlier rounds and
    of other writers stay.

    *given* is the cash a page of the batch gave its outlinks when its inlinks were computed
    from an earlier read of it (see :func:`given_cash`): the page keeps what it holds now minus
    that, so cash another writer added in between is not lost. ``None`` shares out what *page*
    holds now.
    """
    fields: dict[str, object] = {}
    entries: dict[str, dict[str, object]] = {}
    markers: dict[str, object] = {}
    metadata: dict[str, object] = {}
    batch = page is not None and in_batch(page, config.batch_id)
    if page is None:
        if not config.additions_allowed:
            return None
        initial = config.schedule.initialize(now)
        score, cash = config.scoring.initial_score()
        fields.update(
            status=CrawlStatus.UNFETCHED,
            fetch_time=initial.fetch_time,
            fetch_interval=initial.fetch_interval,
            retries_since_fetch=0,
        )
        old_distance: int | None = None
    else:
        score, cash = page.score, read_cash(page.metadata)
        old_distance = _distance(page)
        if batch:
            _schedule_batch_page(page, config, fields)
            _duplicate_after_fetch(page, fields, metadata)
            if given is not None:
                cash = f32(cash - given)
            elif page.outlinks:
                cash = config.scoring.distribute_score_to_outlinks(
                    page.url, cash, list(page.outlinks)
                ).cash
            if Metadata.REDIRECT_DISCOVERED in page.metadata:
                metadata[Metadata.REDIRECT_DISCOVERED] = None
            for mark in (Mark.GENERATE, Mark.FETCH):
                if mark in page.markers:
                    markers[mark] = None
            if Mark.PARSE in page.markers:
                markers[Mark.UPDATEDB] = page.markers[Mark.PARSE]
                markers[Mark.PARSE] = None
    # Best scores first, ties in arrival order (a reversed sort stays stable).
    kept = sorted(inlinks, key=_score, reverse=True)[: config.max_inlinks]
    if kept:
        # One comprehension each, with no test per inlink where none is needed: a row
        # receives tens of inlinks.
        written: dict[str, object]
        if page is None:
            written = {i.source: i.anchor for i in kept}
        else:
            written = {i.source: i.anchor for i in kept if not i.stored}
        if written:
            entries["inlinks"] = written
        distances = [i.distance for i in kept]
        known = (
            [d for d in distances if d is not None]
            if None in distances  # a source of unknown distance
            else cast("list[int]", distances)
        )
        if known:
            new_distance = min(known) + 1
            if old_distance is None or new_distance < old_distance:
                markers[Mark.DISTANCE] = str(new_distance)
    new_score, new_cash = config.scoring.update_score(score, cash, [i.score for i in kept])
    if page is None or new_score != page.score:
        fields["score"] = new_score
    if page is None or new_cash != read_cash(page.metadata):
        metadata[Metadata.CASH] = cash_bytes(new_cash)
    if markers:
        entries["markers"] = markers
    if metadata:
        entries["metadata"] = metadata
    return RowChange(fields, entries, {})
