"""What ``nutchy index`` and ``nutchy search`` do, once the command line is read."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from nutchy.index.chain import load_filters, load_writers
from nutchy.index.embedded import EmbeddedIndex
from nutchy.index.writers import crawl_path
from nutchy.jobs._batches import require_batch
from nutchy.jobs.index import index
from nutchy.progress import Progress
from nutchy.store import open_table

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["run_index", "run_search"]


def run_index(settings: BaseSettings, batch_id: str | None, rebuild: bool) -> int:
    """``nutchy index ID | -all [-rebuild]``: index, print a summary, return the exit code."""
    filters = load_filters(settings)
    writers = load_writers(settings)
    started = time.monotonic()
    with open_table(settings) as table, Progress("index: rows read") as bar:
        if batch_id is not None:
            require_batch(table, batch_id)
        counts = index(
            table, batch_id, filters=filters, writers=writers, rebuild=rebuild, progress=bar
        )
    print(
        f"nutchy index: {counts.rows} rows read, {counts.indexed} indexed, {counts.deleted}"
        f" deleted, {counts.filtered} kept out by a filter (noindex), {counts.skipped} not"
        f" indexable (not fetched, retry, not parsed), {counts.unreadable} unreadable (logged),"
        f" in {time.monotonic() - started:.1f} s;"
        f" into {', '.join(w.describe() for w in writers)}",
        file=sys.stderr,
    )
    return 0


def run_search(settings: BaseSettings, query: str, limit: int, *, as_json: bool) -> int:
    """``nutchy search QUERY [-n N] [-json]``: print the hits; exit code 1 when there are none."""
    started = time.monotonic()
    result = EmbeddedIndex(crawl_path(settings, "NUTCH_INDEXER_EMBEDDED_PATH")).search(query, limit)
    took = time.monotonic() - started
    if as_json:
        record = {
            "query": query,
            "total": result.total,
            "hits": [hit.as_dict() for hit in result.hits],
        }
        print(json.dumps(record, ensure_ascii=False))
    else:
        for rank, hit in enumerate(result.hits, 1):
            print(f"{rank}. {hit.title or '(no title)'}\n   {hit.url}")
            if hit.snippet:
                print(f"   {' '.join(hit.snippet.split())}")
        print(
            f"{len(result.hits)} of {result.total} pages for {query!r} ({took * 1000:.0f} ms)",
            file=sys.stderr,
        )
    return 0 if result.hits else 1
