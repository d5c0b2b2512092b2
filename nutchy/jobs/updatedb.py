"""The updatedb job: fold a fetched (and parsed) batch back into the web table.

``nutchy updatedb ID`` runs the same merge as the updatedb pipeline
(:mod:`nutchy.core.update`). It reads the batch twice: once to gather the inlinks every page
gives its outlink targets, then to write, first the target rows outside the batch, then the
pages of the batch themselves (whose generate mark is removed last).

Running it twice changes nothing the second time: the pages of a finished batch no longer carry
its generate mark, and every row that received this batch's score records the batch id in
``mtdt:_nub_`` in the same row write, so a run that resumes after a crash does not add the same
contributions twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from nutchy.core.status import Mark
from nutchy.core.update import (
    BATCH_FIELDS,
    TARGET_FIELDS,
    Inlink,
    UpdateConfig,
    in_batch,
    outlink_inlinks,
    update_row,
)
from nutchy.core.urls import InvalidURL, reverse_url
from nutchy.core.webpage import WebPage
from nutchy.store.schema import build_update
from nutchy.store.table import TableWriter, WebTable

logger = logging.getLogger(__name__)

#: ``mtdt`` key (nutchy only) of the last batch whose score contributions a row received.
UPDATED_BY_KEY = "_nub_"


@dataclass
class UpdateCounts:
    """What one run of the updatedb job did."""

    batch_pages: int = 0
    existing_targets: int = 0
    new_rows: int = 0
    not_added: int = 0
    invalid_targets: int = 0
    already_counted: int = 0


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _write(
    writer: TableWriter,
    page: WebPage | None,
    key: str,
    inlinks: list[Inlink],
    *,
    now: int,
    config: UpdateConfig,
    counts: UpdateCounts,
) -> bool:
    batch_id = config.batch_id
    if (
        batch_id is not None
        and page is not None
        and page.metadata.get(UPDATED_BY_KEY) == batch_id.encode()
    ):
        # A run of this batch already added these scores (a re-run after a crash).
        inlinks = [i._replace(score=0.0) for i in inlinks]
        counts.already_counted += 1
    change = update_row(page, key, inlinks, now=now, config=config)
    if change is None:
        return False
    entries = change.entries
    if batch_id is not None and inlinks:
        entries.setdefault("metadata", {})[UPDATED_BY_KEY] = batch_id.encode()
    writer.add(build_update(key, change.fields, entries, change.replace))
    return True


def updatedb(
    table: WebTable, batch_id: str | None, *, now: int, config: UpdateConfig
) -> UpdateCounts:
    """Update the table with the batch *batch_id* (every generated row for ``None``) at *now*.

    *config*'s ``batch_id`` is set from *batch_id*. The inlinks of the batch are held in memory
    until they are written (one entry per outlink of the batch).
    """
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
    marker = None if batch_id is None else (Mark.GENERATE, batch_id)
    batch_keys: list[str] = []
    contributions: dict[str, list[Inlink]] = {}
    for page in table.scan(BATCH_FIELDS, marker=marker, skip_errors=True):
        if not in_batch(page, batch_id):
            continue
        batch_keys.append(page.key)
        for target, inlink in outlink_inlinks(page, config):
            try:
                key = reverse_url(target)
            except InvalidURL:
                counts.invalid_targets += 1
                continue
            contributions.setdefault(key, []).append(inlink)
    batch_set = set(batch_keys)
    targets = sorted(k for k in contributions if k not in batch_set)
    with table.writer() as writer:
        for chunk in _chunks(targets, table.read_limit):
            found = table.get_many(chunk, TARGET_FIELDS)
            for key in chunk:
                row = found.get(key)
                written = _write(
                    writer, row, key, contributions[key], now=now, config=config, counts=counts
                )
                if row is not None:
                    counts.existing_targets += 1
                elif written:
                    counts.new_rows += 1
                else:
                    counts.not_added += 1
        writer.flush()
        for chunk in _chunks(batch_keys, table.read_limit):
            found = table.get_many(chunk, BATCH_FIELDS)
            for key in chunk:
                row = found.get(key)
                if row is None or not in_batch(row, batch_id):
                    continue  # deleted, or updated by another run meanwhile
                _write(
                    writer,
                    row,
                    key,
                    contributions.get(key, []),
                    now=now,
                    config=config,
                    counts=counts,
                )
                counts.batch_pages += 1
    return counts
