"""The clean job: delete gone, redirected and duplicate pages from every index writer's index
(``nutchy clean``, Nutch's ``CleaningJob``).

One scan of the whole table reads three small columns of each row (``f:st``, ``p:st``, ``mk``)
and judges it as the index job does (:func:`nutchy.jobs.index.index_action`): a page gone (404,
410, denied), redirected (at fetch, or by a meta refresh) or a duplicate (``nutchy dedup``) is
deleted from every writer of ``NUTCH_INDEX_WRITERS``, whether or not the table remembers
indexing it (its index mark ``mk:_idxmrk_``): an index written by another crawl, or before the
mark was lost, is cleaned as well, as Nutch's job cleans whatever its CrawlDb says is gone. An
index that does not hold a URL takes its deletion as a no-op.

Deletions go to the writers a thousand at a time; every ten thousand the writers commit, and the
rows that had the index mark lose it (after the commit, so a crash between the two leaves a
mark, never an indexed page without one). With *commit* false (``-noCommit``) the writers are
not asked to commit, and the marks stay. Memory holds one chunk of URLs, whatever the table
holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nutchy.core.status import CrawlStatus, Mark
from nutchy.index.chain import opened
from nutchy.jobs.index import IndexAction, index_action
from nutchy.store.schema import build_update

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nutchy.core.webpage import WebPage
    from nutchy.index.writers import IndexWriter
    from nutchy.progress import Progress
    from nutchy.store.table import TableWriter, WebTable

__all__ = ["CleanCounts", "clean"]

#: The fields the job reads of each row.
_FIELDS: Final = ("status", "parse_status", "markers")
#: URLs handed to the writers at once, and deletions between two commits.
_DELETES_PER_CALL: Final = 1000
_DELETES_PER_COMMIT: Final = 10_000


@dataclass
class CleanCounts:
    """What one run of the clean job did: *rows* read, and the URLs deleted from every writer:
    *gone*, *redirected* (at fetch or by a meta refresh) and *duplicates*; *unmarked* rows lost
    their index mark."""

    rows: int = 0
    gone: int = 0
    redirected: int = 0
    duplicates: int = 0
    unmarked: int = 0

    @property
    def deleted(self) -> int:
        return self.gone + self.redirected + self.duplicates


class _Deletions:
    """The URLs waiting for the writers, and the keys whose index mark goes at the next
    commit."""

    def __init__(
        self, writers: Sequence[IndexWriter], marks: TableWriter, counts: CleanCounts, commit: bool
    ) -> None:
        self.writers = writers
        self.marks = marks
        self.counts = counts
        self.commit_too = commit
        self.urls: list[str] = []
        self.marked: list[str] = []
        self.since_commit = 0

    def add(self, page: WebPage) -> None:
        self.urls.append(page.url)
        if self.commit_too and Mark.INDEX in page.markers:
            self.marked.append(page.key)
        self.since_commit += 1
        if len(self.urls) >= _DELETES_PER_CALL:
            self.send()
        if self.since_commit >= _DELETES_PER_COMMIT:
            self.commit()

    def send(self) -> None:
        urls, self.urls = self.urls, []
        if urls:
            for writer in self.writers:
                writer.delete(urls)

    def commit(self) -> None:
        self.send()
        self.since_commit = 0
        if not self.commit_too:
            return
        for writer in self.writers:
            writer.commit()
        for key in self.marked:
            self.marks.add(build_update(key, entries={"markers": {Mark.INDEX: None}}))
        self.counts.unmarked += len(self.marked)
        self.marked = []


def clean(
    table: WebTable,
    writers: Sequence[IndexWriter],
    *,
    commit: bool = True,
    progress: Progress | None = None,
) -> CleanCounts:
    """Delete the gone, redirected and duplicate pages of *table* from every one of *writers*
    (see the module docstring). The writers are opened, given the deletions, committed (unless
    not *commit*) and closed, also when one fails: an
    :exc:`~nutchy.exceptions.IndexWriterError` is raised after every writer is closed.
    *progress* counts the rows read."""
    counts = CleanCounts()
    with opened(writers, rebuild=False), table.writer() as marks:
        pending = _Deletions(writers, marks, counts, commit)
        for page in table.scan(_FIELDS, skip_errors=True):
            counts.rows += 1
            if progress is not None:
                progress.advance()
            if index_action(page) is not IndexAction.DELETE:
                continue
            if page.status == CrawlStatus.DUPLICATE:
                counts.duplicates += 1
            elif page.status == CrawlStatus.GONE:
                counts.gone += 1
            else:  # redirected at fetch (status) or by a meta refresh (parse status)
                counts.redirected += 1
            pending.add(page)
        pending.commit()
    return counts
