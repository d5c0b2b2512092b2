"""The parse job: parse the fetched pages of a batch (``nutchy parse ID``).

It runs the same code as the parse pipeline (:mod:`nutchy.core.parse`) over rows the fetcher
marked with ``mk:_ftcmrk_``: a batch fetched with parsing off, or one whose crawl stopped before
its pages were parsed. Running it twice changes nothing the second time.

With ``-numTasks K`` the table is parsed range by range (its regions on HBase) in *K* processes
at once (:mod:`nutchy.jobs._regions`), each choosing, parsing and writing the rows of its
ranges; the counts are added up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import TYPE_CHECKING, Final

from nutchy.core.parse import (
    PARSE_FIELDS,
    ParseConfig,
    is_truncated,
    parse_change,
    parse_content,
)
from nutchy.core.signature import Signature
from nutchy.core.status import CrawlStatus, Mark, ParseStatusMajor, ParseStatusMinor
from nutchy.jobs._regions import Tasks, run
from nutchy.store.schema import build_update

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import TableWriter, WebTable

logger = logging.getLogger(__name__)


@dataclass
class ParseCounts:
    """What one run of the parse job did."""

    parsed: int = 0
    redirects: int = 0
    failed: int = 0
    not_parsed: int = 0
    not_fetched: int = 0
    truncated: int = 0
    resumed: int = 0
    #: of the pages parsed: those whose content was cut at the content limit (parsed up to the
    #: cut), and those whose links were cut at ``db.max.outlinks.per.page``
    truncated_parsed: int = 0
    outlinks_cut: int = 0

    @property
    def written(self) -> int:
        return self.parsed + self.redirects + self.failed + self.not_parsed

    @property
    def rows(self) -> int:
        """How many rows were read to choose from: every row counted once."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name not in _OF_PARSED)

    def merge(self, other: ParseCounts) -> None:
        """Add the counts of *other* (another key range of the table)."""
        for name in (f.name for f in fields(self)):
            setattr(self, name, getattr(self, name) + getattr(other, name))


#: The counts of :class:`ParseCounts` that count pages already counted as parsed.
_OF_PARSED: Final = ("truncated_parsed", "outlinks_cut")


def parse_batch(
    table: WebTable,
    batch_id: str | None,
    *,
    config: ParseConfig,
    signature: Signature,
    skip_truncated: bool = True,
    timeout: float = 30,
    resume: bool = False,
    clock: Callable[[], float] = time.monotonic,
    tasks: Tasks | None = None,
    progress: Progress | None = None,
) -> ParseCounts:
    """Parse the fetched rows of *batch_id* (every fetched row for ``None``) and write the result.

    Only rows whose fetch succeeded (status FETCHED) are parsed; with *skip_truncated*, rows whose
    content was truncated are left alone; with *resume*, so are rows already parsed in this
    batch. *timeout* (s, < 0 for none) bounds the parse of one page, timed with *clock*. With
    *tasks*, the table is parsed range by range in ``tasks.count`` processes (*config*,
    *signature* and *clock* are sent to them, so they must pickle). *progress* counts the rows
    read (those of a range of another process when the range is done).
    """
    work = partial(
        _parse_range,
        batch_id=batch_id,
        config=config,
        signature=signature,
        skip_truncated=skip_truncated,
        timeout=timeout,
        resume=resume,
        clock=clock,
    )
    parts = run(
        table,
        tasks or Tasks(),
        work,
        local=partial(work, progress=progress),
        on_result=None if progress is None else lambda part: progress.advance(part.rows),
    )
    counts = parts[0]
    for part in parts[1:]:
        counts.merge(part)
    return counts


def _parse_range(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    batch_id: str | None,
    config: ParseConfig,
    signature: Signature,
    skip_truncated: bool,
    timeout: float,
    resume: bool,
    clock: Callable[[], float],
    progress: Progress | None = None,
) -> ParseCounts:
    """:func:`parse_batch` of the rows from *start* to *stop*."""
    counts = ParseCounts()
    marker = None if batch_id is None else (Mark.FETCH, batch_id)
    # Two passes: the rows to parse are chosen on their status and markers alone, and only they
    # are read whole. With -resume after a fetch that parsed as it went (the crawl's case), that
    # is none of them, and their content is never read.
    chosen: list[str] = []
    with table.writer() as writer:
        for page in table.scan(
            _CHOOSE_FIELDS, start=start, stop=stop, marker=marker, skip_errors=True
        ):
            if progress is not None:
                progress.advance()
            fetch_mark = page.markers.get(Mark.FETCH)
            if fetch_mark is None or page.status != CrawlStatus.FETCHED:
                counts.not_fetched += 1
            elif resume and page.markers.get(Mark.PARSE) == fetch_mark:
                counts.resumed += 1
            else:
                chosen.append(page.key)
                if len(chosen) >= table.read_limit:
                    _parse_rows(
                        table,
                        chosen,
                        writer,
                        counts,
                        config,
                        signature,
                        skip_truncated,
                        timeout,
                        clock,
                    )
                    chosen = []
        _parse_rows(
            table, chosen, writer, counts, config, signature, skip_truncated, timeout, clock
        )
    return counts


#: The fields the first pass of :func:`parse_batch` reads to choose the rows to parse.
_CHOOSE_FIELDS = ("status", "markers")


def _parse_rows(
    table: WebTable,
    keys: list[str],
    writer: TableWriter,
    counts: ParseCounts,
    config: ParseConfig,
    signature: Signature,
    skip_truncated: bool,
    timeout: float,
    clock: Callable[[], float],
) -> None:
    """Read the rows of *keys* whole, parse them and add their parse columns to *writer*."""
    if not keys:
        return
    found = table.get_many(keys, PARSE_FIELDS)
    for key in keys:
        page = found.get(key)
        if page is None or page.status != CrawlStatus.FETCHED:
            counts.not_fetched += 1  # deleted, or fetched again meanwhile
            continue
        truncated = is_truncated(page)
        if skip_truncated and truncated:
            counts.truncated += 1
            continue
        page_config = config
        if timeout >= 0:
            page_config = replace(config, clock=clock, deadline=clock() + timeout)
        # The header, with its charset; the row's content type is the bare media type.
        header = next((v for k, v in page.headers.items() if k.lower() == "content-type"), None)
        result = parse_content(
            page.base_url or page.url, page.content, header or page.content_type, page_config
        )
        major, minor = result.status.major, result.status.minor
        if major == ParseStatusMajor.SUCCESS:
            if minor == ParseStatusMinor.SUCCESS_REDIRECT:
                counts.redirects += 1
            else:
                counts.parsed += 1
                counts.truncated_parsed += truncated
                counts.outlinks_cut += result.outlinks_cut > 0
        elif major == ParseStatusMajor.NOTPARSED:
            counts.not_parsed += 1
        else:
            counts.failed += 1
            logger.debug(
                "Failed to parse %(url)s: %(status)s",
                {"url": page.url, "status": result.status},
            )
        change = parse_change(page, result, signature)
        writer.add(build_update(page.key, change.fields, change.entries, change.replace))
