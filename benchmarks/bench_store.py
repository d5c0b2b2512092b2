"""Write, then scan, rows shaped like fetched pages, on the embedded store and through happybase.

Each phase runs in a child process of its own, so the peak RSS printed is that phase's alone.

    python benchmarks/bench_store.py                      # 1,000,000 embedded rows, 100,000 HBase
    python benchmarks/bench_store.py --rows 20000 --hbase-rows 5000   # a quick look

A row has what a fetched page really has: status, fetch times, interval, score, protocol status,
content type, ~20 response headers, ~30 outlinks with anchors, markers, OPIC cash and 10 KB of
HTML content.

Phases: ``write`` (batches of 1000 rows, the time to build the rows taken off), ``scan`` (every
row, every cell, as raw cells), ``scan-pages`` (every row decoded into a WebPage), ``scan-job``
(the columns generate reads: status, fetch time, interval, score, markers).

The ``floor`` rows measure, in the same invocation and on the same rows, the least any store of
these rows in SQLite must do: plain SQLite with the embedded store's settings (64 KiB pages, WAL,
``synchronous=NORMAL``, 64 MB cache), one table of ``(id, key UNIQUE, small families, other
families)`` and one of content, each row's cells split in two marshalled dicts, written with
``executemany`` in the same batches; scanned in key order with the content joined and both dicts
decoded. No update semantics, no index for generate, no markers apart. The embedded store's
figures are also given as a ratio to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from nutchy.testing.memory import peak_rss_kib

BATCH = 1000
HEADERS = [
    "Content-Type", "Content-Length", "Date", "Server", "Last-Modified", "ETag", "Cache-Control",
    "Expires", "Vary", "Connection", "Accept-Ranges", "Age", "X-Cache", "X-Served-By",
    "Strict-Transport-Security", "X-Frame-Options", "X-Content-Type-Options", "Set-Cookie",
    "Content-Language", "Via",
]  # fmt: skip


def page_cells(i: int) -> tuple[bytes, dict[bytes, bytes]]:
    from nutchy.core.status import ProtocolStatus
    from nutchy.core.urls import reverse_url
    from nutchy.store.schema import encode_cell

    host = f"www.site{i % 5000}.example"
    url = f"http://{host}/section/{i // 5000}/page-{i}.html"
    words = f"crawl {i} fetch parse update generate schedule score anchor link table "
    body = (f"<html><head><title>Page {i}</title></head><body>" + words * 120)[:10240]
    cells = {
        b"f:st": encode_cell("status", 2),
        b"f:ts": encode_cell("fetch_time", 1_700_000_000_000 + i),
        b"f:pts": encode_cell("prev_fetch_time", 1_690_000_000_000 + i),
        b"f:fi": encode_cell("fetch_interval", 2_592_000),
        b"s:s": encode_cell("score", 1.0 / (1 + i % 97)),
        b"f:prot": encode_cell("protocol_status", ProtocolStatus(1)),
        b"f:typ": b"text/html",
        b"f:bas": url.encode(),
        b"f:cnt": body.encode(),
        b"mk:_ftcmrk_": b"1700000000-1",
        b"mk:_gnmrk_": b"1700000000-1",
        b"mk:dist": b"1",
        b"mtdt:_csh_": encode_cell("score", 0.0),
        b"mtdt:_rs_": (120).to_bytes(4, "big"),
    }
    for n, name in enumerate(HEADERS):
        cells[b"h:" + name.encode()] = f"value {n} of {name} for page {i}".encode()
    for n in range(30):
        target = f"http://www.site{(i + n) % 5000}.example/section/{n}/page-{i + n}.html"
        cells[b"ol:" + target.encode()] = f"anchor text {n}".encode()
    return reverse_url(url).encode(), cells


_SMALL_FAMILIES = (b"f:", b"s:", b"mk:", b"mtdt:")


def floor_phase(args: argparse.Namespace) -> tuple[int, int, float]:
    """The ``floor`` backend's phase: plain SQLite, see the module's docstring."""
    import marshal
    import sqlite3

    path = Path(args.dir) / "floor.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("page_size = 65536", "journal_mode = WAL", "synchronous = NORMAL"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("PRAGMA cache_size = -65536")
    conn.execute("PRAGMA wal_autocheckpoint = 4096")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE,"
        " small BLOB, other BLOB)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, value BLOB)")
    n = nbytes = 0
    start = time.perf_counter()
    if args.phase == "write":
        made = 0.0
        for first in range(0, args.rows, BATCH):
            made_start = time.perf_counter()
            rows = [page_cells(i) for i in range(first, min(first + BATCH, args.rows))]
            made += time.perf_counter() - made_start
            records, contents = [], []
            for i, (key, cells) in enumerate(rows, first + 1):
                nbytes += sum(len(v) for v in cells.values())
                content = cells.pop(b"f:cnt")
                small = {c: v for c, v in cells.items() if c.startswith(_SMALL_FAMILIES)}
                other = {c: v for c, v in cells.items() if c not in small}
                records.append((i, key, marshal.dumps(small, 4), marshal.dumps(other, 4)))
                contents.append((i, content))
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", records)
            conn.executemany("INSERT INTO c VALUES (?, ?)", contents)
            conn.execute("COMMIT")
        n = args.rows
        elapsed = time.perf_counter() - start - made
    else:
        loads = marshal.loads
        for _key, small, other, content in conn.execute(
            "SELECT t.key, small, other, c.value FROM t LEFT JOIN c USING (id) ORDER BY t.key"
        ):
            cells = loads(small)
            cells.update(loads(other))
            if content is not None:
                cells[b"f:cnt"] = content
            n += 1
            nbytes += len(cells.get(b"f:cnt", b""))
        elapsed = time.perf_counter() - start
    conn.close()
    return n, nbytes, elapsed


def open_backend(args: argparse.Namespace):
    if args.backend == "embedded":
        from nutchy.store.embedded import EmbeddedStore

        return EmbeddedStore(Path(args.dir) / "webpage.sqlite")
    from nutchy.store.hbase import HBaseStore

    return HBaseStore("127.0.0.1", args.port, timeout=20000)


def phase(args: argparse.Namespace) -> dict[str, float]:
    """Run one phase in this (child) process and return its measurements."""
    from nutchy.store.schema import RowUpdate, decode_page

    if args.backend == "floor":
        n, nbytes, elapsed = floor_phase(args)
        rss = peak_rss_kib() / 1024
        return {
            "rows": n,
            "seconds": elapsed,
            "rows_per_s": n / elapsed,
            "bytes": nbytes,
            "rss": rss,
        }
    store = open_backend(args)
    store.create()
    start = time.perf_counter()
    n = 0
    nbytes = 0
    if args.phase == "write":
        batch: list[RowUpdate] = []
        for i in range(args.rows):
            key, cells = page_cells(i)
            nbytes += sum(len(v) for v in cells.values())
            batch.append(RowUpdate(key, cells))
            if len(batch) == BATCH:
                store.write(batch)
                batch = []
        if batch:
            store.write(batch)
        n = args.rows
        # the time to make the rows is not the store's: measure it and take it off
        gen_start = time.perf_counter()
        for i in range(min(args.rows, 20000)):
            page_cells(i)
        gen = (time.perf_counter() - gen_start) * args.rows / min(args.rows, 20000)
        elapsed = time.perf_counter() - start - gen
    else:
        from nutchy.store.base import Scan

        decode = args.phase == "scan-pages"
        # what generate reads: status, fetch time and interval, score, markers
        columns = [b"f:st", b"f:ts", b"f:fi", b"s:s", b"mk"] if args.phase == "scan-job" else None
        for key, cells in store.scan(Scan(columns=columns), page_size=1000):
            if decode:
                decode_page(key, cells)
            n += 1
            nbytes += len(cells.get(b"f:cnt", b""))
        elapsed = time.perf_counter() - start
    store.close()
    rss = peak_rss_kib() / 1024
    return {"rows": n, "seconds": elapsed, "rows_per_s": n / elapsed, "bytes": nbytes, "rss": rss}


def run_phase(
    backend: str, name: str, rows: int, directory: str, port: int = 0
) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", name, "--backend", backend, "--rows", str(rows)]
    command += ["--dir", directory, "--port", str(port)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def start_hbase_server() -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen(
        [sys.executable, "-m", "nutchy.testing.hbase_server", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--hbase-rows", type=int, default=100_000)
    parser.add_argument("--child")
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--dir")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-floor", action="store_true", help="skip the plain SQLite floor")
    args = parser.parse_args()
    if args.child:
        args.phase = args.child
        print(json.dumps(phase(args)))
        return

    results = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for label, rows in (("embedded", args.small_rows), ("embedded", args.rows)):
            directory = str(Path(tmp) / f"e{rows}")
            for name in ("write", "scan", "scan-pages", "scan-job"):
                results.append((label, rows, name, run_phase("embedded", name, rows, directory)))
            size = sum(f.stat().st_size for f in Path(directory).iterdir())
            results.append((label, rows, "file size", {"bytes": size}))
            shutil.rmtree(directory)
            if not args.no_floor:
                directory = str(Path(tmp) / f"f{rows}")
                for name in ("write", "scan"):
                    results.append(("floor", rows, name, run_phase("floor", name, rows, directory)))
                size = sum(f.stat().st_size for f in Path(directory).iterdir())
                results.append(("floor", rows, "file size", {"bytes": size}))
                shutil.rmtree(directory)
        server, port = start_hbase_server()
        try:
            directory = str(Path(tmp) / "h")
            for name in ("write", "scan", "scan-job"):
                results.append(
                    (
                        "hbase",
                        args.hbase_rows,
                        name,
                        run_phase("hbase", name, args.hbase_rows, directory, port),
                    )
                )
        finally:
            server.terminate()
            server.wait()

    print(
        f"# bench_store.py, {datetime.now(UTC):%Y-%m-%d}, {platform.node()},"
        f" {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print()
    print("| store | rows | phase | rows/s | MB/s | seconds | peak RSS MB |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for label, rows, name, r in results:
        if name == "file size":
            print(
                f"| {label} | {rows:,} | file size | | | | {r['bytes'] / 2**20:,.0f} MB on disk |"
            )
            continue
        print(
            f"| {label} | {rows:,} | {name} | {r['rows_per_s']:,.0f} | {r['bytes'] / r['seconds'] / 2**20:,.1f}"
            f" | {r['seconds']:,.1f} | {r['rss']:,.0f} |"
        )
    floor = {(rows, name): r for label, rows, name, r in results if label == "floor"}
    if floor:
        print()
        print("| rows | phase | embedded rows/s | floor rows/s | embedded / floor |")
        print("|---:|---|---:|---:|---:|")
        for label, rows, name, r in results:
            f = floor.get((rows, name))
            if label == "embedded" and f and "rows_per_s" in r:
                print(
                    f"| {rows:,} | {name} | {r['rows_per_s']:,.0f} | {f['rows_per_s']:,.0f}"
                    f" | {r['rows_per_s'] / f['rows_per_s']:.2f} |"
                )
    scans = {
        rows: r["rss"] for label, rows, name, r in results if label == "embedded" and name == "scan"
    }
    if len(scans) == 2:
        small, big = sorted(scans)
        print()
        print(
            f"Full-scan peak RSS, {big:,} rows minus {small:,} rows: {scans[big] - scans[small]:+.0f} MB"
        )


if __name__ == "__main__":
    main()
