"""What a re-crawl writes to rows of fetched and parsed pages, by the size of the pages' text.

    python benchmarks/bench_rewrite.py                    # 5,000 rows, text of 2 KB and 25 KB
    python benchmarks/bench_rewrite.py --rows 20000 --text 2000 50000

Each row is shaped like a page fetched and parsed once: main cells (status, times, score,
markers), ~20 response headers, 40 outlinks and 40 inlinks with anchors, a parse output with a
title, a signature and *text* bytes of text, and 10 KB of content. On a new embedded store of
such rows, each size in a child process of its own, the script times the two writes of a re-crawl
answered with 304s, in the batches they come in:

- ``304 headers``: every row gets new response headers and fetch times (what the fetch writes
  for a 304), 100 rows a write (``NUTCH_FETCHER_FLUSH_SIZE``);
- ``updatedb inlinks``: every row gets its inlinks again with a new score (what updatedb writes
  to a page of the batch), 1,000 rows a write.

Neither write touches the text, so neither should cost more when the text is bigger: the table
gives each time, and each size's time as a ratio to the smallest size's.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

FETCH_BATCH = 100
UPDATE_BATCH = 1000
LINKS = 40


def row(i: int, text: int) -> tuple[bytes, dict[bytes, bytes]]:
    from nutchy.core.urls import reverse_url
    from nutchy.store.schema import encode_cell

    url = f"http://www.site{i % 50}.example/page-{i}.html"
    words = f"crawl {i} fetch parse update generate schedule score anchor link table "
    cells = {
        b"f:st": encode_cell("status", 2),
        b"f:ts": encode_cell("fetch_time", 1_700_000_000_000 + i),
        b"f:pts": encode_cell("prev_fetch_time", 1_690_000_000_000 + i),
        b"f:fi": encode_cell("fetch_interval", 2_592_000),
        b"s:s": encode_cell("score", 0.5),
        b"f:cnt": (words * 200).encode()[:10240],
        b"p:t": f"Page {i}".encode(),
        b"p:c": (words * (text // len(words) + 1)).encode()[:text],
        b"p:sig": b"\x01" * 16,
        b"mk:_updmrk_": b"1700000000-1",
        b"mk:__prsmrk__": b"1700000000-1",
    }
    for n in range(20):
        cells[b"h:Header-%d" % n] = b"value %d of page %d" % (n, i)
    for n in range(LINKS):
        cells[b"ol:http://www.site%d.example/page-%d.html" % (n, i + n + 1)] = b"anchor %d" % n
        cells[b"il:http://www.site%d.example/page-%d.html" % (n, i + n + 7)] = b"anchor %d" % n
    return reverse_url(url).encode(), cells


def measure(rows: int, text: int, directory: str) -> dict[str, float]:
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.schema import RowUpdate

    store = EmbeddedStore(Path(directory) / "rewrite.sqlite")
    store.create()
    keys = []
    for start in range(0, rows, UPDATE_BATCH):
        batch = [row(i, text) for i in range(start, min(rows, start + UPDATE_BATCH))]
        store.write([RowUpdate(key, cells) for key, cells in batch])
        keys += [key for key, _ in batch]
    # Closing checkpoints the WAL, so the timed writes do not pay for writing the rows.
    store.close()
    store = EmbeddedStore(Path(directory) / "rewrite.sqlite")
    headers = [
        RowUpdate(
            key,
            {
                b"h:ETag": b'"%d"' % n,
                b"h:Date": b"now",
                b"f:ts": b"\x00" * 8,
                b"f:pts": b"\x01" * 8,
            },
        )
        for n, key in enumerate(keys)
    ]
    started = time.perf_counter()
    for start in range(0, rows, FETCH_BATCH):
        store.write(headers[start : start + FETCH_BATCH])
    fetch = time.perf_counter() - started
    inlinks = [
        RowUpdate(
            key,
            {
                **{
                    b"il:http://www.site%d.example/page-%d.html" % (n, n): b"anchor"
                    for n in range(LINKS)
                },
                b"s:s": b"\x3f\x00\x00\x00",
            },
        )
        for key in keys
    ]
    started = time.perf_counter()
    for start in range(0, rows, UPDATE_BATCH):
        store.write(inlinks[start : start + UPDATE_BATCH])
    update = time.perf_counter() - started
    store.close()
    return {"fetch": fetch, "update": update}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--text", type=int, nargs="+", default=[2000, 25000], help="bytes of text")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as directory:
            print(json.dumps(measure(args.child[0], args.child[1], directory)))
        return
    print(
        f"# {platform.platform()}, Python {platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    results = {}
    for text in args.text:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(args.rows), str(text)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[text] = json.loads(done.stdout)
    base = results[min(args.text)]
    print(f"\n| {args.rows:,} rows | text | seconds | ratio to {min(args.text):,} B of text |")
    print("|---|---:|---:|---:|")
    for name, label in (("fetch", "304 headers"), ("update", "updatedb inlinks")):
        for text, measured in results.items():
            ratio = measured[name] / base[name]
            print(f"| {label} | {text:,} B | {measured[name]:.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
