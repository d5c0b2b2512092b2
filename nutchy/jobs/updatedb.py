"""The updatedb job: fold a fetched (and parsed) batch back into the web table.

``nutchy updatedb ID`` runs the same merge as the updatedb pipeline
(:mod:`nutchy.core.update`). It reads the batch twice: once to gather the inlinks every page
gives its outlink targets, then to write, first the target rows outside the batch, then the
pages of the batch themselves (whose generate mark is removed last).

Running it twice changes nothing the second time: the pages of a finished batch no longer carry
its generate mark, and every row that received this batch's score records the batch id in
``mtdt:_nub_`` (with the ids of the last batches before it) in the same row write, so a run that
resumes after a crash does not add the same contributions twice, even when other crawls' batches
updated the row in between.

Every row is read and rewritten with :meth:`~nutchy.store.table.WebTable.modify`, so when several
processes update the same rows at once (two crawls sharing one table), each adds its score and
cash to what the row holds at that moment: no contribution is lost (see docs/updatedb.md; no
row is locked: HBase leases buckets of rows).

The first read can be done ahead, while the batch is being fetched (:func:`read_ahead`, which
``nutchy crawl`` runs while its fetch child works): the pages the fetch answered with 304 keep
the outlinks, cash and distance read then, and only the others are read again.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from nutchy.core.status import CrawlStatus, Mark
from nutchy.core.update import (
    BATCH_UPDATE_FIELDS,
    SHARE_FIELDS,
    TARGET_FIELDS,
    Inlink,
    UpdateConfig,
    in_batch,
    share_cash,
    update_row,
)
from nutchy.core.urls import InvalidURL, reverse_url
from nutchy.core.webpage import WebPage
from nutchy.jobs._regions import Tasks, run
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

#: ``mtdt`` key (nutchy only) of the last batches whose score contributions a row received: their
#: ids, newest first, separated by spaces (batch ids have none).
UPDATED_BY_KEY = "_nub_"
#: How many batch ids ``mtdt:_nub_`` keeps: enough for the batches of other crawls that can
#: update a row between a crashed run and its re-run.
UPDATED_BY_KEPT = 8


def updated_by(value: bytes | None, batch_id: str) -> bytes:
    """``mtdt:_nub_`` once *batch_id* has added to a row whose ``mtdt:_nub_`` was *value*.

    >>> updated_by(None, "b1"), updated_by(b"b2 b1", "b3"), updated_by(b"b2 b1", "b1")
    (b'b1', b'b3 b2 b1', b'b1 b2')
    """
    mine = batch_id.encode()
    older = [] if value is None else [b for b in value.split(b" ") if b and b != mine]
    return b" ".join([mine, *older[: UPDATED_BY_KEPT - 1]])


@dataclass
class UpdateCounts:
    """What one run of the updatedb job did."""

    batch_pages: int = 0
    existing_targets: int = 0
    new_rows: int = 0
    not_added: int = 0
    invalid_targets: int = 0
    already_counted: int = 0
    #: pages whose shares were read ahead, during the fetch (by the process that runs updatedb,
    #: or by the parse process as it wrote their parses), and not read again
    read_ahead: int = 0


def _change(
    page: WebPage | None,
    key: str,
    inlinks: list[Inlink],
    *,
    now: int,
    config: UpdateConfig,
    given: float | None = None,
) -> tuple[RowUpdate | None, bool]:
    """The update of row *key*, and whether it already had this batch's contributions."""
    batch_id = config.batch_id
    again = (
        batch_id is not None
        and page is not None
        and batch_id.encode() in page.metadata.get(UPDATED_BY_KEY, b"").split(b" ")
    )
    if again:
        # A run of this batch already added these scores (a re-run after a crash).
        inlinks = [i._replace(score=0.0) for i in inlinks]
    change = update_row(page, key, inlinks, now=now, config=config, given=given)
    if change is None:
        return None, again
    entries = change.entries
    if batch_id is not None and inlinks:
        previous = None if page is None else page.metadata.get(UPDATED_BY_KEY)
        entries.setdefault("metadata", {})[UPDATED_BY_KEY] = updated_by(previous, batch_id)
    return build_update(key, change.fields, entries, change.replace), again


class _Keys(dict[str, str | None]):
    """The row key of each target URL met (``None`` for one that is no valid URL), computed the
    first time it is asked for: a target has many sources."""

    def __missing__(self, url: str) -> str | None:
        try:
            key: str | None = reverse_url(url)
        except InvalidURL:
            key = None
        self[url] = key
        return key


#: A page's share of the batch: its inlinks as (target row key, or ``None`` for a target that is
#: no valid URL; inlink), and the cash they carry in all.
_Share = tuple[list[tuple[str | None, Inlink]], float]


@dataclass
class ReadAhead:
    """updatedb's first read of a batch, done before or during its fetch (see :func:`read_ahead`).

    *shares* holds each page's share as if the fetch answers it with 304 (its outlinks are those
    of its last parse, so its inlinks are stored); *keys* the row key of every target URL met.
    """

    batch_id: str
    shares: dict[str, _Share] = field(default_factory=dict)
    keys: _Keys = field(default_factory=_Keys)
    #: the share of each page the fetch answered with 200 and the parse process parsed, as if
    #: its status is FETCHED, kept once its parse was written (:class:`ParsedShares`)
    parsed: dict[str, _Share] = field(default_factory=dict)


def read_ahead(
    table: WebTable, batch_id: str, config: UpdateConfig, *, max_outlinks: int | None = None
) -> ReadAhead:
    """Read what the pages of *batch_id* give their outlinks, for :func:`updatedb` to use after the
    fetch for every page the fetch answered with 304; stop before holding more than
    *max_outlinks* outlinks (the pages left are read after the fetch).

    Such a page's outlinks are unchanged by the fetch (a 304 is neither parsed nor a redirect), as
    are its distance and the cash it gives: the cash read here is what it shares out, and the
    page keeps whatever it received since (updatedb subtracts what it gave, see
    :func:`~nutchy.core.update.update_row`), as when the first read comes right before the
    writes. Only pages with outlinks are kept: a batch of pages never fetched before (a first
    crawl's) leaves nothing, and updatedb then reads the batch as it does without a read ahead.
    """
    ahead = ReadAhead(batch_id)
    room = max_outlinks
    for page in table.scan(SHARE_FIELDS, marker=(Mark.GENERATE, batch_id), skip_errors=True):
        if page.outlinks and in_batch(page, batch_id):  # one without is cheap to read again
            if room is not None:
                room -= len(page.outlinks)
                if room < 0:
                    break
            as_304 = replace(page, status=CrawlStatus.NOTMODIFIED)
            ahead.shares[page.key] = _resolve(share_cash(as_304, config), ahead.keys)
    return ahead


#: A page's share as :class:`ParsedShares` keeps it: (row key, cash given, source URL, distance,
#: target row keys, anchors, scores); its inlinks all carry the page's URL and distance, and
#: none is stored (the page is FETCHED). Plain values, in a third of the memory of the inlinks.
_KeptShare = tuple[str, float, str, "int | None", list["str | None"], list[str], "array[float]"]


class ParsedShares:
    """updatedb's first read of the pages a batch's fetch parses, done as their parses are
    written, by the process that writes them (the parse process, :mod:`nutchy._parsework`, on
    another core while the fetch goes on) rather than after the fetch by the one that runs
    updatedb, which reads the batch's outlinks back from the table then, with the fetch and the
    parse process idle (reading and sharing them out was 45% of updatedb's time in a first
    crawl). The parse process has the outlinks at hand: it reads nothing more than the cash and
    marks of the rows, with what it reads of them for the parse.

    :meth:`add` keeps the share of each page whose parse was just written, as if its status is
    FETCHED, what a page parsed during the fetch becomes, in plain values (:data:`_KeptShare`); :meth:`take` gives a batch's shares, and
    :func:`parsed_ahead` makes them a :class:`ReadAhead` for :func:`updatedb`, which uses a page's
    share only if the page is still FETCHED and in the batch then (its outlinks are the parse's;
    its cash and distance are those the page shares out: see :func:`read_ahead`). It stops
    keeping a batch's shares before they hold more than *max_outlinks* outlinks: the pages left
    are read after the fetch.
    """

    def __init__(self, config: UpdateConfig, max_outlinks: int) -> None:
        self.config = config
        self.max_outlinks = max_outlinks
        self._shares: dict[str, list[_KeptShare]] = {}
        self._keys: dict[str, _Keys] = {}
        self._room: dict[str, int] = {}

    def add(self, batch_id: str, pages: Iterable[WebPage]) -> None:
        """Keep the shares of *pages* of *batch_id*, whose parses were just written: each with
        the outlinks its parse wrote, and the cash and marks its row held (read before the parse:
        neither the parse nor the fetch's outcome changes them)."""
        room = self._room.setdefault(batch_id, self.max_outlinks)
        if room < 0:
            return
        shares = self._shares.setdefault(batch_id, [])
        resolved = self._keys.setdefault(batch_id, _Keys())
        config = self.config
        for page in pages:
            if not in_batch(page, batch_id):
                continue
            room -= len(page.outlinks)
            if room < 0:
                break
            page.status = CrawlStatus.FETCHED
            inlinks, given = share_cash(page, config)
            # every inlink of a page carries its URL and distance
            first = inlinks[0][1] if inlinks else None
            shares.append(
                (
                    page.key,
                    given,
                    "" if first is None else first.source,
                    None if first is None else first.distance,
                    [resolved[target] for target, _ in inlinks],
                    [inlink.anchor for _, inlink in inlinks],
                    array("d", [inlink.score for _, inlink in inlinks]),
                )
            )
        self._room[batch_id] = room

    def take(self, batch_id: str) -> list[_KeptShare]:
        """The shares kept of *batch_id*'s pages, forgotten here (with those of every other
        batch: a batch's shares are taken once it is fetched)."""
        shares = self._shares.pop(batch_id, [])
        self._shares.clear()
        self._keys.clear()
        self._room.clear()
        return shares


def parsed_ahead(
    batch_id: str, taken: Iterable[_KeptShare], ahead: ReadAhead | None = None
) -> ReadAhead:
    """*ahead* (a new :class:`ReadAhead` of *batch_id* when ``None``) with the shares *taken*
    from a :class:`ParsedShares`."""
    if ahead is None or ahead.batch_id != batch_id:
        ahead = ReadAhead(batch_id)
    make = tuple.__new__
    parsed = ahead.parsed
    for key, given, source, distance, targets, anchors, scores in taken:
        parsed[key] = (
            [
                (target, make(Inlink, (source, anchor, score, distance, False)))
                for target, anchor, score in zip(targets, anchors, scores, strict=True)
            ],
            given,
        )
    return ahead


def _resolve(share: tuple[list[tuple[str, Inlink]], float], keys: _Keys) -> _Share:
    """*share* with each target URL replaced by its row key (``None`` for an invalid one)."""
    inlinks, given = share
    return [(keys[target], inlink) for target, inlink in inlinks], given


def _shares(
    table: WebTable,
    batch_id: str | None,
    config: UpdateConfig,
    ahead: ReadAhead | None,
    counts: UpdateCounts,
    tasks: Tasks | None = None,
) -> Iterable[tuple[str, _Share, bool]]:
    """Each page of the batch with its share and whether its fetch answered 304 (status
    NOTMODIFIED when read), in key order: from *ahead* for pages the fetch answered with 304
    and those still FETCHED that the parse process kept, read now for the others (range
    by range in *tasks* without *ahead*)."""
    marker = None if batch_id is None else (Mark.GENERATE, batch_id)
    if ahead is None or ahead.batch_id != batch_id or not (ahead.shares or ahead.parsed):
        if tasks is not None and tasks.count > 1:
            work = partial(_range_shares, batch_id=batch_id, config=config)
            for part in run(table, tasks, work):
                yield from part
            return
        keys = _Keys()
        for page in table.scan(SHARE_FIELDS, marker=marker, skip_errors=True):
            if in_batch(page, batch_id):
                unchanged = page.status == CrawlStatus.NOTMODIFIED
                yield page.key, _resolve(share_cash(page, config), keys), unchanged
        return
    # Which pages are still in the batch, and how their fetch ended: a cheap read.
    found: list[tuple[str, _Share | None, bool]] = []
    stale: list[str] = []
    for page in table.scan(_STATUS_FIELDS, marker=marker, skip_errors=True):
        if not in_batch(page, batch_id):
            continue
        unchanged = page.status == CrawlStatus.NOTMODIFIED
        if unchanged:
            share = ahead.shares.get(page.key)
        elif page.status == CrawlStatus.FETCHED:
            share = ahead.parsed.get(page.key)
        else:
            share = None
        if share is None:
            stale.append(page.key)
        found.append((page.key, share, unchanged))
    # what was not kept is not needed any more: free it before reading
    ahead.shares.clear()
    ahead.parsed.clear()
    fresh: dict[str, _Share] = {}
    for start in range(0, len(stale), table.read_limit):
        chunk = stale[start : start + table.read_limit]
        for page in table.get_many(chunk, SHARE_FIELDS, skip_errors=True).values():
            if in_batch(page, batch_id):
                fresh[page.key] = _resolve(share_cash(page, config), ahead.keys)
    for key, share, unchanged in found:
        if share is None:
            share = fresh.get(key)
            if share is None:
                continue  # deleted meanwhile
        else:
            counts.read_ahead += 1
        yield key, share, unchanged


def _range_shares(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    batch_id: str | None,
    config: UpdateConfig,
) -> list[tuple[str, _Share, bool]]:
    """Each page of the batch from *start* to *stop* with its share and whether it was answered
    with 304, in key order (one task of ``updatedb -numTasks K``)."""
    marker = None if batch_id is None else (Mark.GENERATE, batch_id)
    keys = _Keys()
    return [
        (
            page.key,
            _resolve(share_cash(page, config), keys),
            page.status == CrawlStatus.NOTMODIFIED,
        )
        for page in table.scan(
            SHARE_FIELDS, start=start, stop=stop, marker=marker, skip_errors=True
        )
        if in_batch(page, batch_id)
    ]


#: What the read after the fetch needs to know of every page when the first read was done ahead.
_STATUS_FIELDS = ("status", "markers")
#: The signatures of a page: its parse record is read for them, with the page's text.
_SIGNATURES = ("signature", "prev_signature")
#: What updatedb reads of a page of the batch that was answered with 304: all but the
#: signatures, which a 304's status transition and schedule do not look at (see
#: :func:`~nutchy.core.update.update_row`), and whose parse record holds the page's text.
_NOT_MODIFIED_FIELDS = tuple(f for f in BATCH_UPDATE_FIELDS if f not in _SIGNATURES)


def updatedb(
    table: WebTable,
    batch_id: str | None,
    *,
    now: int,
    config: UpdateConfig,
    ahead: ReadAhead | None = None,
    tasks: Tasks | None = None,
    progress: Callable[..., Progress] | None = None,
) -> UpdateCounts:
    """Update the table with the batch *batch_id* (every generated row for ``None``) at *now*.

    *config*'s ``batch_id`` is set from *batch_id*. The inlinks of the batch are held in memory
    until they are written (one entry per outlink of the batch). *ahead*, read by
    :func:`read_ahead` for this batch, saves reading again the pages the fetch answered with 304
    (it is used up: its shares are emptied). Without it, *tasks* reads the pages of the batch and
    their shares range by range in ``tasks.count`` processes (*config* must pickle); the rows
    are then written from here. *progress*, given, makes a :class:`~nutchy.progress.Progress`
    from a label and keywords: one counts the pages of the batch read, then one the rows written.

    Python's cyclic garbage collector is off while it runs (:func:`_no_cyclic_collection`).
    """
    with _no_cyclic_collection():
        return _updatedb(
            table, batch_id, now=now, config=config, ahead=ahead, tasks=tasks, progress=progress
        )


@contextlib.contextmanager
def _no_cyclic_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off (if it was on), then on again.

    updatedb makes no reference cycles (its pages, inlinks, cells and updates are dicts, tuples,
    strings and dataclasses that refer to none of their holders): a collection finds nothing to
    free, yet the collector ran one every 700 allocations, and every tenth of them looked again
    at what the batch's inlinks had piled up, and every hundredth at every object of the process
    (Scrapy's too, in ``nutchy crawl``): 148 collections, 0.08-0.13 s of CPU, 10-16% of the
    updatedb of a re-crawl of 2,000 pages. Reference counting still frees all it drops at once.
    What other threads of the process leave in cycles meanwhile is collected after.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _updatedb(
    table: WebTable,
    batch_id: str | None,
    *,
    now: int,
    config: UpdateConfig,
    ahead: ReadAhead | None,
    tasks: Tasks | None,
    progress: Callable[..., Progress] | None,
) -> UpdateCounts:
    """:func:`updatedb`, with the collector off."""
    if config.batch_id != batch_id:
        config = UpdateConfig(
            schedule=config.schedule,
            scoring=config.scoring,
            retry_max=config.retry_max,
            max_inlinks=config.max_inlinks,
            additions_allowed=config.additions_allowed,
            batch_id=batch_id,
        )
    counts = UpdateCounts()
    given: dict[str, float] = {}
    #: pages of the batch answered with 304 when first read
    unchanged: set[str] = set()
    contributions: dict[str, list[Inlink]] = {}
    # The loop below runs once per outlink of the batch (40 a page is common) and builds no list
    # it does not keep.
    received = contributions.get
    invalid = 0
    reading = None if progress is None else progress("updatedb: batch pages read", unit="pages")
    try:
        for source, (inlinks, gave), not_modified in _shares(
            table, batch_id, config, ahead, counts, tasks
        ):
            given[source] = gave
            if not_modified:
                unchanged.add(source)
            for key, inlink in inlinks:
                if key is None:
                    invalid += 1
                    continue
                found = received(key)
                if found is None:
                    contributions[key] = [inlink]
                else:
                    found.append(inlink)
            if reading is not None:
                reading.advance()
    finally:
        if reading is not None:
            reading.close()
    counts.invalid_targets = invalid
    del received
    targets = sorted(k for k in contributions if k not in given)

    # What happened to each row, from the last call of its change (modify may call it twice).
    outcome: dict[str, tuple[str, bool]] = {}

    writing = None
    if progress is not None:
        writing = progress("updatedb: rows written", total=len(targets) + len(given))

    def change_target(key: str, page: WebPage | None) -> RowUpdate | None:
        if writing is not None and key not in outcome:
            writing.advance()
        update, again = _change(page, key, contributions[key], now=now, config=config)
        kind = "existing" if page is not None else "new" if update is not None else "not_added"
        outcome[key] = (kind, again)
        return update

    def change_batch_page(key: str, page: WebPage | None) -> RowUpdate | None:
        if writing is not None and key not in outcome:
            writing.advance()
        if page is None or not in_batch(page, batch_id):
            outcome.pop(key, None)
            return None  # deleted, or updated by another run meanwhile
        if "signature" not in page.loaded and page.status != CrawlStatus.NOTMODIFIED:
            # Read as a 304, fetched again meanwhile (a resumed fetch of the batch): its
            # signatures count now. Read in the same write (the row cannot change meanwhile).
            signed = table.get_key(key, _SIGNATURES)
            if signed is not None:
                page.signature, page.prev_signature = signed.signature, signed.prev_signature
        update, again = _change(
            page, key, contributions.get(key, []), now=now, config=config, given=given[key]
        )
        outcome[key] = ("batch", again)
        return update

    try:
        table.modify(targets, TARGET_FIELDS, change_target)
        # Pages answered with 304 are read without their signatures (nor the text beside them).
        table.modify(
            [k for k in given if k not in unchanged], BATCH_UPDATE_FIELDS, change_batch_page
        )
        table.modify([k for k in given if k in unchanged], _NOT_MODIFIED_FIELDS, change_batch_page)
    finally:
        if writing is not None:
            writing.close()
    for kind, again in outcome.values():
        if kind == "existing":
            counts.existing_targets += 1
        elif kind == "new":
            counts.new_rows += 1
        elif kind == "not_added":
            counts.not_added += 1
        else:
            counts.batch_pages += 1
        counts.already_counted += again
    return counts
