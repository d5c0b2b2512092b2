"""``nutchy dedup`` on a large table: one streaming pass, its speed and its memory.

    flock /work/bench.lock python benchmarks/bench_dedup.py                  # 1,000,000 rows
    flock /work/bench.lock python benchmarks/bench_dedup.py --rows 100000 --store hbase

A table of ``--rows`` fetched pages over 1,000 hosts is built directly (row updates of the cells
a parsed, updated page has: status, fetch time and interval, score and cash, the dist and
updatedb marks, and the parse output: title, ~300 characters of text, parse status and
signature), in the embedded store in a temporary folder, or in the HBase test server
(``nutchy.testing.hbase_server``) started in a process of its own. ``--dup-share`` of the pages
(10% by default) repeat the signature of another page, each at its own key.

Then ``dedup`` runs in a child process, twice: the first run marks the duplicates, the second
finds nothing to change (the scan, the sort and the merge alone). For each run the table prints
the wall time, the rows read per second, the child's peak RSS (``VmHWM``, its own since its
exec) and how much the sort spilled to disk. ``--sort-rows`` is ``NUTCH_DEDUPLICATION_SORT_ROWS``: the entries the sort
holds in memory at most, which bound the peak RSS whatever the table holds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nutchy.config import load_settings
from nutchy.core.status import ParseStatus
from nutchy.core.urls import reverse_url
from nutchy.store import open_table
from nutchy.store.schema import RowUpdate, encode_cell

REPO = Path(__file__).resolve().parent.parent
TEXT = " ".join(["the quick brown fox jumps over the lazy dog"] * 7)  # ~300 characters

CHILD = r"""
import json, sys, time
from nutchy.config import load_settings
from nutchy.testing.memory import peak_rss_kib
from nutchy.jobs.dedup import DedupOptions, dedup
from nutchy.store import open_table

settings = load_settings(json.loads(sys.argv[1]), project=False)
options = DedupOptions.from_settings(settings)
with open_table(settings) as table:
    started = time.perf_counter()
    result = dedup(table, options)
    seconds = time.perf_counter() - started
print(json.dumps({
    "seconds": seconds,
    "pages": result.counts.pages,
    "marked": result.counts.marked,
    "unchanged": result.counts.unchanged,
    "written": result.written,
    "rss_mb": peak_rss_kib() / 1024,
    "runs": result.sort.runs,
    "spilled_mb": result.sort.spilled_bytes / 2**20,
}))
"""


def _cells(i: int, signature: bytes) -> dict[bytes, bytes]:
    return {
        b"f:st": encode_cell("status", 2),
        b"f:ts": encode_cell("fetch_time", 1_700_000_000_000 + i),
        b"f:fi": encode_cell("fetch_interval", 2592000),
        b"s:s": encode_cell("score", 1.0 / (1 + i % 97)),
        b"mtdt:_csh_": struct.pack(">f", 0.0),
        b"mk:dist": b"1",
        b"mk:_updmrk_": b"b1",
        b"p:t": f"Page {i}".encode(),
        b"p:c": TEXT.encode(),
        b"p:st": encode_cell("parse_status", ParseStatus(1, 0)),
        b"p:sig": signature,
    }


def build(values: dict[str, object], rows: int, dup_share: float) -> float:
    """Write *rows* pages; return the seconds it took."""
    distinct = max(1, round(rows * (1 - dup_share)))
    started = time.perf_counter()
    with open_table(load_settings(values, project=False)) as table:
        table.create()
        batch: list[RowUpdate] = []
        for i in range(rows):
            key = reverse_url(f"http://h{i % 1000}.example.com/page/{i}")
            signature = hashlib.md5(str(i % distinct).encode()).digest()
            batch.append(RowUpdate(key.encode(), puts=_cells(i, signature)))
            if len(batch) == 2000:
                table.store.write(batch)
                batch = []
        if batch:
            table.store.write(batch)
    return time.perf_counter() - started


def run_dedup(values: dict[str, object]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(values)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dup-share", type=float, default=0.1)
    parser.add_argument("--sort-rows", type=int, default=200_000)
    parser.add_argument("--store", choices=("embedded", "hbase"), default="embedded")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as tmp:
        values: dict[str, object] = {
            "NUTCH_CRAWL_DIR": tmp,
            "NUTCH_DEDUPLICATION_SORT_ROWS": args.sort_rows,
        }
        server = None
        if args.store == "hbase":
            from nutchy.testing.hbase_server import HBaseThriftServer

            server = HBaseThriftServer(transport="framed", protocol="binary")
            server.start()
            values.update(
                NUTCH_STORAGE_DATA_STORE_CLASS="nutchy.store.hbase.HBaseStore",
                NUTCH_HBASE_HOST="127.0.0.1",
                NUTCH_HBASE_PORT=server.port,
                NUTCH_HBASE_TRANSPORT="framed",
                NUTCH_HBASE_PROTOCOL="binary",
            )
        try:
            built = build(values, args.rows, args.dup_share)
            size = sum(f.stat().st_size for f in Path(tmp).glob("*")) / 2**20
            where = f"{size:.0f} MB file" if args.store == "embedded" else "test server"
            print(
                f"{args.store}: {args.rows} rows ({args.dup_share:.0%} duplicates) built in"
                f" {built:.1f} s ({where}); NUTCH_DEDUPLICATION_SORT_ROWS={args.sort_rows}"
            )
            print(
                "| run | rows | marked | written | seconds | rows/s | peak RSS (MB) | runs | spilled (MB) |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for name in ("first", "again"):
                r = run_dedup(values)
                print(
                    f"| {name} | {r['pages']:.0f} | {r['marked']:.0f} | {r['written']:.0f}"
                    f" | {r['seconds']:.1f} | {r['pages'] / r['seconds']:,.0f}"
                    f" | {r['rss_mb']:.0f} | {r['runs']:.0f} | {r['spilled_mb']:.0f} |"
                )
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
