"""A long scan's memory: rows scanned against the peak RSS of the process that scans them.

    flock /work/bench.lock python benchmarks/bench_scan.py                   # 10k, 50k, 200k rows
    python benchmarks/bench_scan.py --rows 2000,10000 --store hbase --text 4000 --transport buffered

For each store of ``--store``, one table grows to each size of ``--rows`` in turn, over 1,000
hosts. A row has the six cells ``updatehostdb`` reads (status, protocol status, fetch time,
score, ``mtdt:_rs_``, ``mtdt:_nft_``) and ``--text`` characters of parsed text (``p:c``). On
HBase the table is in the HBase test server (``nutchy.testing.hbase_server``), which runs in a
process of its own: what it holds is not the client's. Its transport is ``--transport``: framed
(the test suite's, with its 2 MiB limit on the frames the server reads) or buffered (HBase's
default); the protocol is binary.

At each size, each reader scans the whole table in a new child process: ``store`` is the
store's ``scan`` as the jobs call it (``NUTCH_GORA_BUFFER_READ_LIMIT`` rows a page),
``happybase`` (HBase only) is happybase's ``Table.scan`` with the same ``batch_size``; each
reads the six cells (``job``), then every cell (``whole rows``). Then (unless ``--no-jobs``)
the jobs that scan the whole table run on it, each in a child of its own: ``updatehostdb``,
``index -all`` (``-rebuild``, into the JSON lines writer) and ``dedup`` (sorting in runs of
20,000 entries); the fetched rows (90%) are parsed, with a title and a signature of their own. The child reads its own
``VmHWM`` (its peak RSS since its exec; ``ru_maxrss`` would count the peak of the process it
was started from) once the table is open, after half of the rows (scans only) and at the end. A client that
keeps something per row grows between the half and the end: the column ``bytes/row, half to
end`` is that growth per row scanned. The test server's own ``VmHWM`` is printed beside, for comparison.
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
from nutchy.core.status import (
    CrawlStatus,
    ParseStatus,
    ParseStatusMajor,
    ProtocolStatus,
    ProtocolStatusCode,
)
from nutchy.core.urls import reverse_url
from nutchy.store import open_store
from nutchy.store.schema import RowUpdate, encode_cell
from nutchy.testing.memory import peak_rss_kib

REPO = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000
#: The cells ``updatehostdb`` reads (nutchy.jobs.hostdb).
JOB_COLUMNS = ["f:st", "f:prot", "f:ts", "s:s", "mtdt:_rs_", "mtdt:_nft_"]
WORDS = "the quick brown fox jumps over the lazy dog "
#: What each reader scans: the six cells, then every cell.
SCANS = (("job", JOB_COLUMNS), ("whole rows", None))
#: The jobs run on the same table, and the rows each reads of a table of n rows (dedup reads
#: the pages with a signature: the 90% fetched and parsed).
JOBS = {
    "updatehostdb": lambda n: n,
    "index -all": lambda n: n,
    "dedup": lambda n: n - (n + 9) // 10,
}
#: NUTCH_DEDUPLICATION_SORT_ROWS: below the table's size, so dedup's memory is its sort's bound.
SORT_ROWS = 20_000

CHILD = r"""
import json, sys, time

from nutchy.config import load_settings
from nutchy.store import open_table
from nutchy.store.base import Scan
from nutchy.testing.memory import peak_rss_kib as peak_kb

options = json.loads(sys.argv[1])

settings = load_settings(options["settings"], project=False)
columns = [c.encode() for c in options["columns"]] if options["columns"] else None
half = options["rows"] // 2
marks = {}
reader = options["reader"]
with open_table(settings) as table:
    if reader == "updatehostdb":
        from nutchy.jobs.hostdb import update_hostdb_of

        rows = lambda: update_hostdb_of(table, settings, now=int(time.time() * 1000))[0].rows
    elif reader == "index -all":
        from nutchy.index.chain import load_filters, load_writers
        from nutchy.jobs.index import index

        filters, writers = load_filters(settings), load_writers(settings)
        rows = lambda: index(table, None, filters=filters, writers=writers, rebuild=True).rows
    elif reader == "dedup":
        from nutchy.jobs.dedup import DedupOptions, dedup

        rows = lambda: dedup(table, DedupOptions.from_settings(settings)).counts.pages
    elif reader == "happybase":
        import happybase

        connection = happybase.Connection(
            settings["NUTCH_HBASE_HOST"],
            int(settings["NUTCH_HBASE_PORT"]),
            table_prefix=settings["NUTCH_STORAGE_CRAWL_ID"],
            transport=settings["NUTCH_HBASE_TRANSPORT"],
            protocol=settings["NUTCH_HBASE_PROTOCOL"],
        )
        rows = connection.table("webpage").scan(columns=columns, batch_size=table.read_limit)
    else:
        rows = table.store.scan(Scan(columns=columns), table.read_limit)
    marks["open"] = peak_kb()
    started = time.perf_counter()
    cpu = time.process_time()
    n = 0
    if callable(rows):
        n = rows()
    else:
        for key, cells in rows:
            n += 1
            if n == half:
                marks["half"] = peak_kb()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
marks["end"] = peak_kb()
print(json.dumps({"rows": n, "seconds": seconds, "cpu": cpu, **marks}))
"""


def cells(i: int, text: str) -> dict[bytes, bytes]:
    """The cells of row *i*: 90% fetched, 10% failed with an exception, and *text*."""
    if i % 10:
        status, protocol = CrawlStatus.FETCHED, ProtocolStatus(ProtocolStatusCode.SUCCESS)
    else:
        status = CrawlStatus.UNFETCHED
        protocol = ProtocolStatus(ProtocolStatusCode.EXCEPTION, ("timeout",))
    row = {
        b"f:st": encode_cell("status", status),
        b"f:prot": encode_cell("protocol_status", protocol),
        b"f:ts": encode_cell("fetch_time", NOW + i),
        b"s:s": encode_cell("score", 1.0 / (1 + i % 97)),
        b"mtdt:_rs_": struct.pack(">i", 20 + i % 300),
        b"mtdt:_nft_": (NOW - 86_400_000 + i).to_bytes(8, "big"),
    }
    if i % 10:  # parsed: indexable, with a signature of its own
        row[b"p:t"] = f"Page {i}".encode()
        row[b"p:st"] = encode_cell("parse_status", ParseStatus(ParseStatusMajor.SUCCESS, 0))
        row[b"p:sig"] = hashlib.md5(str(i).encode()).digest()
    if text:
        row[b"p:c"] = f"{i} {text}".encode()
    return row


def grow(settings: dict[str, object], first: int, last: int, text_size: int) -> float:
    """Write rows *first* to *last* - 1; return the seconds it took."""
    text = (WORDS * (text_size // len(WORDS) + 1))[:text_size]
    started = time.perf_counter()
    with open_store(load_settings(settings, project=False)) as store:
        store.create()
        batch: list[RowUpdate] = []
        for i in range(first, last):
            key = reverse_url(f"http://h{i % 1000}.example.com/page/{i}").encode()
            batch.append(RowUpdate(key, puts=cells(i, text)))
            if len(batch) == 1000:
                store.write(batch)
                batch = []
        if batch:
            store.write(batch)
    return time.perf_counter() - started


def scan(settings: dict[str, object], reader: str, columns: list[str] | None, rows: int) -> dict:
    options = {"settings": settings, "reader": reader, "columns": columns, "rows": rows}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(options)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def start_server(transport: str = "framed") -> tuple[subprocess.Popen[str], int]:
    command = [sys.executable, "-m", "nutchy.testing.hbase_server", "--port", "0"]
    command += ["--transport", transport, "--protocol", "binary"]
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    return server, int(line.strip().rsplit(":", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="10000,50000,200000", help="sizes, comma-separated")
    parser.add_argument("--store", default="hbase,embedded", help="hbase, embedded or both")
    parser.add_argument("--text", type=int, default=2000, help="characters of text a row")
    parser.add_argument("--transport", choices=("framed", "buffered"), default="framed")
    parser.add_argument(
        "--no-jobs", action="store_true", help="scans only, not updatehostdb, index -all, dedup"
    )
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.rows.split(","))
    print(
        f"text {args.text} characters a row; HBase {args.transport} transport;"
        f" load average {os.getloadavg()}"
    )
    print(
        "| store | rows | reader | columns | seconds | CPU s | rows/s | RSS open (MB)"
        " | RSS half (MB) | RSS end (MB) | bytes/row, half to end | test server (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for store in args.store.split(","):
        server = None
        with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
            settings: dict[str, object] = {
                "NUTCH_CRAWL_DIR": tmp,
                "NUTCH_STORAGE_CRAWL_ID": "b",
                "NUTCH_INDEX_WRITERS": {"nutchy.index.writers.JSONLinesIndexWriter": 100},
                "NUTCH_DEDUPLICATION_SORT_ROWS": SORT_ROWS,
            }
            readers = ["store"]
            if store == "hbase":
                server, port = start_server(args.transport)
                settings |= {
                    "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
                    "NUTCH_HBASE_HOST": "127.0.0.1",
                    "NUTCH_HBASE_PORT": port,
                    "NUTCH_HBASE_TRANSPORT": args.transport,
                    "NUTCH_HBASE_PROTOCOL": "binary",
                }
                readers.append("happybase")
            try:
                built = 0
                for rows in sizes:
                    grow(settings, built, rows, args.text)
                    built = rows
                    runs = [
                        (reader, name, columns) for reader in readers for name, columns in SCANS
                    ]
                    if not args.no_jobs:
                        runs += [(job, "its own", None) for job in JOBS]
                    for reader, name, columns in runs:
                        r = scan(settings, reader, columns, rows)
                        if r["rows"] != (rows if reader not in JOBS else JOBS[reader](rows)):
                            raise SystemExit(f"{reader} read {r['rows']} of {rows} rows")
                        half = growth = ""
                        if "half" in r:
                            half = f"{r['half'] / 1024:.0f}"
                            growth = f"{(r['end'] - r['half']) * 1024 / (rows - rows // 2):.0f}"
                        served = f"{peak_rss_kib(server.pid) / 1024:.0f}" if server else ""
                        print(
                            f"| {store} | {rows:,} | {reader} | {name} | {r['seconds']:.1f}"
                            f" | {r['cpu']:.1f} | {rows / r['seconds']:,.0f}"
                            f" | {r['open'] / 1024:.0f} | {half} | {r['end'] / 1024:.0f}"
                            f" | {growth} | {served} |",
                            flush=True,
                        )
            finally:
                if server is not None:
                    server.terminate()
                    server.wait()
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
