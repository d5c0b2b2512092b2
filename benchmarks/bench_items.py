"""The items of parsed pages with and without their parse fields (``NUTCH_ITEM_PARSE_FIELDS``).

    python benchmarks/bench_items.py                    # 1,000 doc-shaped pages, 5 repeats
    python benchmarks/bench_items.py --pages 300 --repeat 3

The pages are those of ``bench_crawl.py``'s documentation-shaped site (its generator, built in
memory, nothing served): 5 to 80 KB of text a page, 10 to 50 links, a few hubs of hundreds.

Each run hands the pages, in chunks of :data:`nutchy.pipelines.PARSE_CHUNK`, to
``NutchParsePipeline`` as a crawl does, with the parse process (``NUTCH_FETCHER_PARSE_PROCESS``,
the default) on a new embedded table, one chunk at a time: the process reads the rows, parses,
builds the items' fields and writes the parse columns every ``NUTCH_FETCHER_FLUSH_SIZE`` pages,
and this process makes the items of its answers. With the parse fields (``True``) and without them
(``False``), alternated, ``--repeat`` times; the median is shown:

- **this process's CPU a page**: what the crawl's own process spends on a page's parse (its
  pickle to the parse process, reading the answer, making the item), the process where Scrapy's
  reactor runs in a crawl;
- **wall time a page**: the whole round trip, which is mostly the parse process's work (one
  chunk at a time, nothing overlaps);
- **answer bytes a page**: the size of the pickled fields that come back.

Both runs must write the same cells: the script compares a digest of every cell of the two
tables and fails if they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_crawl  # the doc-shaped site's generator
from bench_parse import which_nutchy

HOST = "docs.example.org"


def fetched_pages(n: int, seed: int) -> list[Any]:
    """The pages of the doc-shaped site of *n* pages, as the ``nutch`` spider yields them."""
    from nutchy.core.urls import reverse_url
    from nutchy.pipelines import FetchedPage

    site = bench_crawl.doc_site(n, 1, seed)
    bodies = bench_crawl.render_site(site, [HOST], {HOST: 80}, seed)
    pages = []
    for (_, path), body in bodies.items():
        url = f"http://{HOST}{path.decode()}"
        pages.append(
            FetchedPage(
                key=reverse_url(url),
                url=url,
                batch_id="b1",
                base_url=url,
                content_type="text/html",
                headers={"Content-Type": "text/html; charset=utf-8"},
                content=body,
                fetch_time=1_700_000_000_000,
            )
        )
    return pages


def run(pages: list[Any], parse_fields: bool, folder: str) -> dict[str, Any]:
    """One run: this process's CPU and the wall time, in seconds; the answers' bytes; the digest
    of the table's cells."""
    from scrapy.utils.misc import build_from_crawler
    from scrapy.utils.test import get_crawler

    from nutchy.addon import NutchAddon
    from nutchy.pipelines import PARSE_CHUNK, NutchParsePipeline

    crawler = get_crawler(
        settings_dict={
            "ADDONS": {NutchAddon: 0},
            "NUTCH_CRAWL_DIR": folder,
            "NUTCH_ITEM_PARSE_FIELDS": parse_fields,
            "LOG_LEVEL": "ERROR",
        }
    )
    assert crawler.stats is not None
    crawler.stats.open_spider()
    pipeline = build_from_crawler(NutchParsePipeline, crawler)
    pipeline.table.create()
    cpu = wall = 0.0
    answered = 0
    try:
        for start in range(0, len(pages), PARSE_CHUNK):
            started, began = time.process_time(), time.perf_counter()
            items = pipeline._process(pages[start : start + PARSE_CHUNK], write=False)
            cpu += time.process_time() - started
            wall += time.perf_counter() - began
            answered += len(pickle.dumps([dict(item) for item in items], protocol=5))
        pipeline._process([], write=True)
        assert pipeline.process is not None
        pipeline.process.close()
        digest = hashlib.sha256()
        for key, cells in sorted(pipeline.table.store.scan()):
            digest.update(key)
            for column, value in sorted(cells.items()):
                digest.update(column + b"=" + value)
    finally:
        pipeline.table.close()
    return {"cpu": cpu, "wall": wall, "bytes": answered, "digest": digest.hexdigest()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="doc-shaped pages")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    pages = fetched_pages(args.pages, args.seed)
    n = len(pages)
    size = sum(len(page.content) for page in pages)
    print(
        f"# bench_items {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.platform()},"
        f" Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"# nutchy: {which_nutchy()}; {n} doc-shaped pages, {size / n / 1024:.0f} KB a page")
    results: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as work:
        for repeat in range(args.repeat):
            for parse_fields in (True, False):
                folder = os.path.join(work, f"{parse_fields}-{repeat}")
                results[parse_fields].append(run(pages, parse_fields, folder))
    digests = {r["digest"] for rs in results.values() for r in rs}
    assert len(digests) == 1, "the two runs wrote different cells"

    def med(parse_fields: bool, key: str, scale: float) -> float:
        return statistics.median(r[key] for r in results[parse_fields]) * scale / n

    rows = [
        ("this process's CPU a page, ms", "cpu", 1000.0, 3),
        ("wall time a page (mostly the parse process), ms", "wall", 1000.0, 2),
        ("answer a page, KB (pickled fields)", "bytes", 1 / 1024, 1),
    ]
    print(f"\n| median of {args.repeat} | parse fields (True) | without (False) | ratio |")
    print("|---|---:|---:|---:|")
    for label, key, scale, digits in rows:
        full, light = med(True, key, scale), med(False, key, scale)
        print(f"| {label} | {full:.{digits}f} | {light:.{digits}f} | {full / light:.2f}x |")
    print(f"\nSame cells written by both: sha256 {digests.pop()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
