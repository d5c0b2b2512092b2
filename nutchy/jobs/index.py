"""The index job: the documents of the crawl's pages, through indexing filters to index writers.

``nutchy index ID`` reads the rows updatedb marked with batch *ID* (``mk:_updmrk_``, the filter
Nutch 2.x's IndexingJob sets); ``nutchy index -all`` reads every row. Rows stream from the table
a page of ``NUTCH_GORA_BUFFER_READ_LIMIT`` at a time and documents go to the writers a few
hundred at a time, so memory does not grow with the table. Each row is judged by
:func:`index_action`:

- **index**: fetched (or not modified), parsed successfully and not a redirect; its document is
  built by the indexing filters, and written to every writer, unless a filter returns ``None``
  (a ``noindex`` robots meta tag): then it is deleted as below;
- **delete**: gone, redirected (at fetch or by a meta refresh), or a duplicate;
- **skip**: not fetched yet, or a fetch to retry, or a parse that failed: whatever the index
  holds of it stays.

Deletions: a row the job indexes gets Nutch's index mark ``mk:_idxmrk_`` (the value of its
updatedb mark), written before the writers commit; a row to delete is deleted from every writer
only if it holds that mark, which is dropped once the writers have committed the deletion. So a
page is deleted once, and a crash between the two leaves a mark, never a page nobody deletes.
Pages that went away in a batch lose their batch marks at updatedb, so ``nutchy index ID`` also
looks for indexed rows (those with the index mark) that are now gone, redirected or duplicates:
a scan of three small columns of the whole table (on HBase, key ranges of the whole table).

With *rebuild*, every writer starts from an empty index and every row is read (``-all``).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nutchy.core.status import CrawlStatus, Mark, ParseStatusMajor, ParseStatusMinor
from nutchy.index.chain import opened
from nutchy.store.schema import build_update

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nutchy.core.webpage import WebPage
    from nutchy.index.chain import IndexingFilters
    from nutchy.index.document import Document
    from nutchy.index.writers import IndexWriter
    from nutchy.progress import Progress
    from nutchy.store.table import TableWriter, WebTable

__all__ = ["DELETED_STATUSES", "IndexAction", "IndexCounts", "index", "index_action"]

logger = logging.getLogger(__name__)

#: Crawl statuses whose rows leave the index (DUPLICATE: marked by ``nutchy dedup``).
DELETED_STATUSES: Final = frozenset(
    {CrawlStatus.GONE, CrawlStatus.REDIR_TEMP, CrawlStatus.REDIR_PERM, CrawlStatus.DUPLICATE}
)
_INDEXABLE_STATUSES: Final = frozenset({CrawlStatus.FETCHED, CrawlStatus.NOTMODIFIED})
#: The fields the job itself reads to judge a row.
_JUDGE_FIELDS: Final = frozenset({"status", "parse_status", "markers"})
#: Documents handed to the writers at once, and the text they may hold at most (characters).
_DOCS_PER_WRITE: Final = 500
_CHARS_PER_WRITE: Final = 8_000_000
#: Deletions held before the writers commit them (and their rows lose the index mark).
_DELETES_PER_COMMIT: Final = 10_000


class IndexAction(enum.Enum):
    INDEX = "index"
    DELETE = "delete"
    SKIP = "skip"


def index_action(page: WebPage) -> IndexAction:
    """What the index does with the row *page* (see the module docstring).

    >>> from nutchy.core.webpage import WebPage
    >>> index_action(WebPage("com.example:http/", status=CrawlStatus.GONE)).value
    'delete'
    >>> index_action(WebPage("com.example:http/", status=CrawlStatus.FETCHED)).value
    'skip'
    """
    if page.status in DELETED_STATUSES:
        return IndexAction.DELETE
    if page.status not in _INDEXABLE_STATUSES or page.parse_status is None:
        return IndexAction.SKIP
    if page.parse_status.major != ParseStatusMajor.SUCCESS:
        return IndexAction.SKIP
    if page.parse_status.minor == ParseStatusMinor.SUCCESS_REDIRECT:
        return IndexAction.DELETE
    return IndexAction.INDEX


@dataclass
class IndexCounts:
    """What one run of the index job did."""

    rows: int = 0
    indexed: int = 0
    deleted: int = 0
    #: Rows a filter kept out of the index (a ``noindex`` robots meta tag).
    filtered: int = 0
    skipped: int = 0
    #: Rows left out because a cell did not decode (logged, each with its row and column).
    unreadable: int = 0


def index(
    table: WebTable,
    batch_id: str | None,
    *,
    filters: IndexingFilters,
    writers: Sequence[IndexWriter],
    rebuild: bool = False,
    progress: Progress | None = None,
) -> IndexCounts:
    """Index the rows of batch *batch_id* (every row for ``None``) into every one of *writers*.

    The writers are opened (with *rebuild*, empty), given the documents and deletions, committed
    and closed, also when one fails: an :exc:`~nutchy.exceptions.IndexWriterError` is raised
    after every writer is closed. *progress* counts the rows read.
    """
    if rebuild:
        batch_id = None
    run = _Run(table, filters, writers, progress)
    skipped_before = table.skipped
    with opened(writers, rebuild=rebuild):
        with table.writer() as marks:
            run.marks = marks
            fields = filters.fields | _JUDGE_FIELDS
            marker = None if batch_id is None else (Mark.UPDATEDB, batch_id)
            for page in table.scan(fields, marker=marker, skip_errors=True):
                run.judge(page, deletions=not rebuild)
            if batch_id is not None:
                run.sweep(batch_id)
            run.flush()
            run.commit()
        run.counts.unreadable = table.skipped - skipped_before
    return run.counts


class _Run:
    """The state of one run of :func:`index`."""

    def __init__(
        self,
        table: WebTable,
        filters: IndexingFilters,
        writers: Sequence[IndexWriter],
        progress: Progress | None,
    ) -> None:
        self.table = table
        self.filters = filters
        self.writers = writers
        self.progress = progress
        self.counts = IndexCounts()
        self.marks: TableWriter | None = None
        self.docs: list[Document] = []
        self.chars = 0
        #: URLs to delete, and the keys whose index mark goes once their deletion is committed.
        self.deletes: list[str] = []
        self.unmark: list[str] = []

    def judge(self, page: WebPage, *, deletions: bool) -> None:
        self.counts.rows += 1
        if self.progress is not None:
            self.progress.advance()
        action = index_action(page)
        if action is IndexAction.INDEX:
            doc = self.filters.document(page, self.load)
            if doc is not None:
                self.add(page, doc)
                return
            self.counts.filtered += 1
            action = IndexAction.DELETE
        if action is IndexAction.DELETE:
            if deletions and Mark.INDEX in page.markers:
                self.delete(page)
        else:
            self.counts.skipped += 1

    def load(self, page: WebPage, fields: frozenset[str]) -> None:
        """Read *fields* of *page*'s row into *page* (a filter's ``more_fields``); a row gone
        meanwhile leaves them at their defaults."""
        row = self.table.get_key(page.key, fields)
        if row is not None:
            for name in fields:
                setattr(page, name, getattr(row, name))
        page.loaded = page.loaded | fields

    def sweep(self, batch_id: str) -> None:
        """Delete the indexed rows that are now gone, redirected or duplicates (rows of another
        batch than *batch_id*, whose pages the scan of its rows did not see)."""
        for page in self.table.scan(("status", "markers"), skip_errors=True):
            if (
                Mark.INDEX in page.markers
                and page.status in DELETED_STATUSES
                and page.markers.get(Mark.UPDATEDB) != batch_id
            ):
                self.delete(page)

    def add(self, page: WebPage, doc: Document) -> None:
        self.docs.append(doc)
        self.chars += len(doc.content) + len(doc.title) + sum(map(len, doc.anchor))
        self.counts.indexed += 1
        mark = page.markers.get(Mark.UPDATEDB) or page.markers.get(Mark.FETCH) or "y"
        if page.markers.get(Mark.INDEX) != mark:
            # Written before the writers commit: a mark without its document costs a needless
            # deletion one day; a document without its mark would never be deleted.
            assert self.marks is not None
            self.marks.add(build_update(page.key, entries={"markers": {Mark.INDEX: mark}}))
        if len(self.docs) >= _DOCS_PER_WRITE or self.chars >= _CHARS_PER_WRITE:
            self.flush()

    def delete(self, page: WebPage) -> None:
        self.deletes.append(page.url)
        self.unmark.append(page.key)
        self.counts.deleted += 1
        if len(self.unmark) >= _DELETES_PER_COMMIT:
            self.flush()
            self.commit()

    def flush(self) -> None:
        docs, self.docs, self.chars = self.docs, [], 0
        deletes, self.deletes = self.deletes, []
        for writer in self.writers:
            if docs:
                writer.write(docs)
            if deletes:
                writer.delete(deletes)

    def commit(self) -> None:
        for writer in self.writers:
            writer.commit()
        if self.unmark:
            assert self.marks is not None
            for key in self.unmark:
                self.marks.add(build_update(key, entries={"markers": {Mark.INDEX: None}}))
            self.unmark = []
