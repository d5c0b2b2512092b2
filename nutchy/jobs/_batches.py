"""What the web table knows of one batch: which of its marks some row still holds.

A batch exists only as marks on rows: generate writes its id in ``mk:_gnmrk_``, the fetch in
``mk:_ftcmrk_``, parse in ``mk:__prsmrk__``, and updatedb drops those three and writes
``mk:_updmrk_`` on the parsed pages. A job given a batch id that no row holds a mark of would
otherwise read nothing, do nothing and succeed; :func:`require_batch` makes that an error
naming the table, and the marks found let a job say what it did with a batch that is there
but not at its step (updatedb of a batch never fetched only drops its generate marks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from nutchy.core.status import Mark
from nutchy.exceptions import UnknownBatch

if TYPE_CHECKING:
    from nutchy.store.table import WebTable

__all__ = ["ALL_BATCHES", "BATCH_MARKS", "batch_marks", "require_batch"]

#: The batch argument that fetches every generated row (Nutch's ``-all``).
ALL_BATCHES: Final = "-all"

#: The marks that hold a batch id, in the order of the crawl cycle.
BATCH_MARKS = (Mark.GENERATE, Mark.FETCH, Mark.PARSE, Mark.UPDATEDB)


def batch_marks(table: WebTable, batch_id: str) -> frozenset[str]:
    """The marks of :data:`BATCH_MARKS` that at least one row of *table* holds with *batch_id*.

    Each mark costs one scan that stops at its first row: a full scan (server-side filtered on
    HBase) only when no row holds the mark.
    """
    found = set()
    for mark in BATCH_MARKS:
        for _ in table.scan(("markers",), marker=(mark, batch_id), limit=1, skip_errors=True):
            found.add(mark)
            break
    return frozenset(found)


def require_batch(table: WebTable, batch_id: str) -> frozenset[str]:
    """:func:`batch_marks`, or :exc:`~nutchy.exceptions.UnknownBatch` when there are none."""
    marks = batch_marks(table, batch_id)
    if not marks:
        raise UnknownBatch(
            f"no batch {batch_id!r} in table {table.name} ({table.store!r}): no row holds its"
            " generate, fetch, parse or updatedb mark"
        )
    return marks
