"""``nutchy updatehostdb`` on large tables: one streaming pass, its speed, and memory flat in rows.

    flock /work/bench.lock python benchmarks/bench_hostdb.py                   # 100k, 300k, 1M
    flock /work/bench.lock python benchmarks/bench_hostdb.py --rows 50000 --store hbase

For each size of ``--rows`` (comma-separated), a table of that many rows over ``--hosts`` hosts
is built directly, in the embedded store in a temporary folder or in the HBase test server
(``nutchy.testing.hbase_server``), which runs in this script's process. Each row has the cells a
fetched, updated page has that the host database reads or that every row has (status, protocol
status, fetch time, score, ``mtdt:_rs_``, ``mtdt:_nft_``): 90% fetched pages, 5% failed with an
exception, 3% 404s and 2% never fetched.

Then ``update_hostdb`` runs in a child process, and the table prints the wall time, rows read per
second, hosts written and the child's peak RSS: its ``VmHWM``, its own peak since its exec.
(``ru_maxrss`` would also count the peak of the process it was started from, which on HBase holds
the test server's rows: about 2 KB a row, which earlier runs took for the client's.)
The host database holds one entry per host, so the peak RSS stays the same whatever the number of
rows; more hosts make it grow.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus, ProtocolStatus, ProtocolStatusCode
from nutchy.core.urls import reverse_url
from nutchy.store import open_table
from nutchy.store.schema import RowUpdate, encode_cell

REPO = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000

CHILD = r"""
import json, sys, time
from nutchy.config import load_settings
from nutchy.testing.memory import peak_rss_kib
from nutchy.jobs.hostdb import update_hostdb_of
from nutchy.store import open_table

settings = load_settings(json.loads(sys.argv[1]), project=False)
with open_table(settings) as table:
    started = time.perf_counter()
    result, name = update_hostdb_of(table, settings, now=int(time.time() * 1000))
    seconds = time.perf_counter() - started
print(json.dumps({
    "seconds": seconds,
    "rows": result.rows,
    "hosts": result.hosts,
    "rss_mb": peak_rss_kib() / 1024,
}))
"""

_FETCHED = (CrawlStatus.FETCHED, ProtocolStatus(ProtocolStatusCode.SUCCESS))
_FAILED = (CrawlStatus.UNFETCHED, ProtocolStatus(ProtocolStatusCode.EXCEPTION, ("timeout",)))
_MISSING = (CrawlStatus.GONE, ProtocolStatus(ProtocolStatusCode.NOTFOUND, ("404",)))


def _cells(i: int) -> dict[bytes, bytes]:
    cells = {
        b"f:ts": encode_cell("fetch_time", NOW + i),
        b"s:s": encode_cell("score", 1.0 / (1 + i % 97)),
    }
    kind = i % 100
    if kind < 2:
        return cells  # injected, never fetched
    status, protocol = _FAILED if kind < 7 else _MISSING if kind < 10 else _FETCHED
    cells[b"f:st"] = encode_cell("status", status)
    cells[b"f:prot"] = encode_cell("protocol_status", protocol)
    cells[b"mtdt:_rs_"] = struct.pack(">i", 20 + i % 300)
    cells[b"mtdt:_nft_"] = (NOW - 86_400_000 + i).to_bytes(8, "big")
    return cells


def build(values: dict[str, object], rows: int, hosts: int) -> float:
    """Write *rows* rows over *hosts* hosts; return the seconds it took."""
    started = time.perf_counter()
    with open_table(load_settings(values, project=False)) as table:
        table.create()
        batch: list[RowUpdate] = []
        for i in range(rows):
            key = reverse_url(f"http://h{i % hosts}.example.com/page/{i}")
            batch.append(RowUpdate(key.encode(), puts=_cells(i)))
            if len(batch) == 2000:
                table.store.write(batch)
                batch = []
        if batch:
            table.store.write(batch)
    return time.perf_counter() - started


def run_update(values: dict[str, object]) -> dict[str, float]:
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
    parser.add_argument("--rows", default="100000,300000,1000000", help="sizes, comma-separated")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--store", choices=("embedded", "hbase"), default="embedded")
    args = parser.parse_args()
    sizes = [int(size) for size in args.rows.split(",")]
    server = None
    base: dict[str, object] = {}
    if args.store == "hbase":
        from nutchy.testing.hbase_server import HBaseThriftServer

        server = HBaseThriftServer(transport="framed", protocol="binary")
        server.start()
        base = {
            "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
            "NUTCH_HBASE_HOST": "127.0.0.1",
            "NUTCH_HBASE_PORT": server.port,
            "NUTCH_HBASE_TRANSPORT": "framed",
            "NUTCH_HBASE_PROTOCOL": "binary",
        }
    print(f"{args.store}, {args.hosts} hosts")
    print("| rows | built (s) | updatehostdb (s) | rows/s | hosts written | peak RSS (MB) |")
    print("|---|---|---|---|---|---|")
    try:
        for n, rows in enumerate(sizes):
            with tempfile.TemporaryDirectory(prefix="bench-hostdb-") as tmp:
                values = {**base, "NUTCH_CRAWL_DIR": tmp, "NUTCH_STORAGE_CRAWL_ID": f"b{n}"}
                built = build(values, rows, args.hosts)
                r = run_update(values)
                print(
                    f"| {r['rows']:,.0f} | {built:.1f} | {r['seconds']:.1f}"
                    f" | {r['rows'] / r['seconds']:,.0f} | {r['hosts']:,.0f} | {r['rss_mb']:.0f} |",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
