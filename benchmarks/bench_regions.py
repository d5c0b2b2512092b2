"""Region-parallel scans: what one row costs the client, and K threads against K processes.

    python benchmarks/bench_regions.py                    # 40,000 rows, both stores
    python benchmarks/bench_regions.py --rows 10000 --store hbase

A table of ``--rows`` rows over 500 hosts is written to each store (the embedded store in a
temporary directory; the HBase test server, ``nutchy.testing.hbase_server``, in a process of
its own, cut into four ranges at quartiles of the keys as four regions would cut it: the
server's ``split_table`` is a Python call inside its process). Then ``readdb -stats``'s scan
(:func:`nutchy.jobs.readdb.table_stats`) runs:

- once in this process, timing the client's CPU (``time.process_time()``) against the wall
  time: the client's share of a scan, which threads of one process cannot overlap (the GIL);
- over the same key ranges with K = 1, 2 and 4: in one thread after another, in K threads
  sharing the store, and in K processes (:func:`nutchy.jobs._regions.run`, the ``-numTasks``
  machinery, each task opening the table itself; the pool's start is included).

The HBase test server is Python and shares the machine's cores with the client: its rows/s
measure it, not a region server, and on a machine of two cores the processes compete with it.
The client's µs a row is what carries over to a real HBase: it bounds one process.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nutchy.config import load_settings
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.jobs._regions import Tasks, key_ranges, run
from nutchy.jobs.readdb import table_stats
from nutchy.store import open_table


def _fill(table, rows: int) -> list[bytes]:
    with table.writer() as writer:
        for i in range(rows):
            page = WebPage(
                reverse_url(f"http://h{i % 500}.example.com/p{i}"),
                score=1.0,
                fetch_time=i,
                fetch_interval=100,
                markers={"dist": "1"},
            )
            writer.put(page, ALL_FIELDS)
    return sorted(page.key.encode() for page in table.scan(("status",)))


def _stats_of(table, settings, start, stop):
    from nutchy.jobs.readdb import _range_stats

    return _range_stats(table, settings, start, stop, now=0).rows


def _measure(name: str, values: dict[str, object], rows: int, split) -> None:
    settings = load_settings(values, project=False)
    table = open_table(settings)
    table.create()
    keys = _fill(table, rows)
    split(table, keys)
    wall, cpu = time.perf_counter(), time.process_time()
    assert table_stats(table, now=0).rows == rows
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{name}: one scan of {rows} rows: {wall:.2f} s wall, client CPU {cpu:.2f} s"
        f" = {cpu / rows * 1e6:.0f} us a row ({cpu / wall:.0%} of the wall time)"
    )
    print(f"| {name} | K | sequential (s) | K threads (s) | K processes (s) |")
    print("|---|---|---|---|---|")
    for k in (1, 2, 4):
        ranges = key_ranges(table.store, k) if k > 1 else [(b"", None)]
        started = time.perf_counter()
        total = sum(_stats_of(table, settings, *r) for r in ranges)
        sequential = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(k) as pool:
            total_threads = sum(pool.map(lambda r: _stats_of(table, settings, *r), ranges))
        threads = time.perf_counter() - started
        started = time.perf_counter()
        total_processes = sum(run(table, Tasks.from_settings(settings, k), _stats_of))
        processes = time.perf_counter() - started
        assert total == total_threads == total_processes == rows
        print(f"| {name} | {k} | {sequential:.2f} | {threads:.2f} | {processes:.2f} |")
    if values.get("NUTCH_STORAGE_DATA_STORE_CLASS"):
        table.store.drop()
    table.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--store", choices=["embedded", "hbase", "both"], default="both")
    args = parser.parse_args()
    if args.store in ("embedded", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            _measure("embedded", {"NUTCH_CRAWL_DIR": str(Path(tmp))}, args.rows, lambda *_: None)
    if args.store in ("hbase", "both"):
        server = subprocess.Popen(
            [sys.executable, "-m", "nutchy.testing.hbase_server", "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().rsplit(":", 1)[1])
            values = {
                "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
                "NUTCH_HBASE_HOST": "127.0.0.1",
                "NUTCH_HBASE_PORT": port,
            }

            def split(table, keys):
                quartiles = [keys[len(keys) * i // 4] for i in (1, 2, 3)]
                table.store.splits = lambda: list(
                    zip([b"", *quartiles], [*quartiles, None], strict=True)
                )

            _measure("hbase", values, args.rows, split)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
