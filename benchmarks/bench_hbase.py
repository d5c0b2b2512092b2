"""Updatedb and generate on HBase: the Thrift calls they make, counted by the server, by kind.

    python benchmarks/bench_hbase.py            # updatedb of 100,000 targets; generate 50,000 of 1M
    python benchmarks/bench_hbase.py --quick    # the same, tiny: a smoke run of a few seconds
    python benchmarks/bench_hbase.py --targets 20000 --rows 200000 --top-n 10000
    python benchmarks/bench_hbase.py --no-before --no-generate

Every client goes through real happybase and Thrift sockets to the HBase test server
(:mod:`nutchy.testing.hbase_server`), which runs in a process of its own; the script reads the
server's :meth:`~nutchy.testing.hbase_server.HBaseThriftServer.stats` (calls and bytes on the wire,
by Thrift method) over a pipe after each measured run. Each measured run is a process of its own
too; the tables are built, compared and dropped by this script's process between runs, with the
statistics zeroed before each run.

**updatedb.** Two batches, ``b1`` and ``b2``, of ``2 * --targets / --links`` fetched pages each;
each page has ``--links`` outlinks and a cash of ``--links`` (every share 1.0, so every sum is
exact in any order), and each batch's outlinks reach ``--targets`` distinct target rows, each
target twice. The batches share ``--overlap`` of their targets, and every other target is already
a row (score 0.5, an inlink of its own). Runs:

- ``1 writer``: updatedb of ``b1``, then of ``b2``, one process after the other, on one table;
- ``2 writers``: updatedb of ``b1`` and of ``b2`` at once, in two processes, on a second table
  built the same; the script then checks that both tables hold the same rows with the same
  status, schedule, score, cash (``mtdt``), inlinks and marks (all but ``mtdt:_nub_``, which
  records the order the runs came in);
- ``before``: both again with the client code of commit ``--before`` (default ``fdd6be4``, the
  last one that locked each row with ``checkAndPut``), extracted with ``git archive`` and put
  first on the writers' ``PYTHONPATH``, against the same server, with ``--before-targets``
  targets.

**generate.** A table of ``--rows`` rows shaped like a crawl in progress (the columns generate
reads and a few more; 10% due), loaded through :meth:`HBaseStore.write` in batches of 1,000 rows
(measured apart), split into 4 regions (the server's ``split_table``), then generate ``-topN
--top-n`` with ``-numTasks 1`` and with ``-numTasks 4``; the marks of the first are deleted before
the second, and both batches must hold the same rows.

Each table's lease table (``<table>_nutchy``) is created before the measured runs, as it exists
for any table updated or generated before; the runs of the old client never use it.

The report ends with the issue's targets, each with the figures behind its verdict: no
``checkAndPut`` a row (every ``checkAndPut`` of the store is a lease call; the verdict holds them
to the bound the lease design gives whatever the rows: two per lease taken, one per renewal every
third of the lease time, one per race lost to another writer); at most one mutate call per 1,000
rows or per ``NUTCH_HBASE_BATCH_BYTES`` (the floor is computed per writer and modify call, or from
the bytes sent); two writers at once making no more calls per target row than one. The script
fails (exit status 1) when this checkout's two tables differ or the generate batches do.

The test server is Python and shares the machine's cores with the clients: its rows/s measure the
server, not nutchy. The calls and their bytes are what carry over to a real HBase.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
NOW = 1_700_000_000_000
DAY = 86_400_000
INTERVAL = 2_592_000
BATCHES = ("1700000000-101", "1700000000-102")
GENERATE_BATCHES = ("1700000000-201", "1700000000-202")
HOSTS = 10_000
REGIONS = 4
#: What a generate mark adds to a row (mk:_gnmrk_, f:bid, mtdt:_npt_): deleted between runs.
MARK_COLUMNS = (b"mk:_gnmrk_", b"f:bid", b"mtdt:_npt_")
#: NUTCH_HBASE_LOCK_LEASE's default, which every client here runs with: leases are renewed every
#: third of it.
DEFAULT_LEASE_MS = 60_000


# --- the server, in a process of its own -------------------------------------------------------


def serve(transport: str, protocol: str) -> None:
    """Run the test server; answer one JSON command per line of stdin with one line of JSON."""
    import gc

    from nutchy.testing.hbase_server import HBaseThriftServer

    gc.set_threshold(100_000, 50, 100)  # as ``python -m nutchy.testing.hbase_server`` does
    server = HBaseThriftServer("127.0.0.1", 0, transport, protocol)
    server.start()
    print(json.dumps({"port": server.port}), flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            op = command["op"]
            answer: Any = None
            if op == "stats":
                answer = {
                    "methods": {m: list(s) for m, s in server.stats().items()},
                    "rows_shipped": server.rows_shipped,
                    "connections": dict(server.connection_counts),
                    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                }
            elif op == "reset_stats":
                server.reset_stats()
            elif op == "split":
                server.split_table(command["table"], command["keys"])
            else:
                raise ValueError(f"unknown command {op!r}")
            print(json.dumps(answer), flush=True)
    finally:
        server.stop()


class Server:
    """The parent's handle on the server process."""

    def __init__(self, transport: str, protocol: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(HERE),
                "--serve",
                "--transport",
                transport,
                "--protocol",
                protocol,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.port = int(self._read()["port"])

    def _read(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the HBase test server exited ({self.process.wait()})")
        return json.loads(line)

    def ask(self, op: str, **arguments: Any) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def stats(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.ask("stats")
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait()


# --- the measured clients, each in a process of its own -----------------------------------------
#
# The writer runs with the code of this checkout or, for the "before" runs, with that of an older
# commit first on PYTHONPATH: it uses only what both have (HBaseStore's host, port, crawl_id,
# timeout, transport and protocol; WebTable's limits; updatedb's table, batch, now and config).


def _ready_then_wait(info: Mapping[str, Any]) -> None:
    print(json.dumps({"ready": True, **info}), flush=True)
    sys.stdin.readline()  # "go"


def writer(spec: Mapping[str, Any]) -> dict[str, Any]:
    """updatedb of one batch, once the parent says go."""
    import nutchy
    from nutchy.core.update import UpdateConfig
    from nutchy.jobs.updatedb import updatedb
    from nutchy.store.hbase import HBaseStore
    from nutchy.store.table import WebTable

    store = HBaseStore(
        "127.0.0.1",
        spec["port"],
        crawl_id=spec["crawl_id"],
        transport=spec["transport"],
        protocol=spec["protocol"],
    )
    table = WebTable(store, read_limit=1000, write_limit=1000)
    _ready_then_wait({"nutchy": nutchy.__file__})
    started = time.time()
    counts = updatedb(table, spec["batch"], now=NOW + 1000, config=UpdateConfig())
    ended = time.time()
    table.close()
    return {
        "started": started,
        "ended": ended,
        "targets": counts.existing_targets + counts.new_rows,
        "new_rows": counts.new_rows,
        "batch_pages": counts.batch_pages,
    }


def generator(spec: Mapping[str, Any]) -> dict[str, Any]:
    """generate -topN N -numTasks K, once the parent says go."""
    from nutchy.jobs._regions import Tasks
    from nutchy.jobs.generate import GenerateOptions, generate
    from nutchy.store import open_table

    settings = load_hbase_settings(spec)
    options = GenerateOptions.from_settings(settings, top_n=spec["top_n"])
    tasks = Tasks.from_settings(settings, spec["tasks"])
    with open_table(settings) as table:
        _ready_then_wait({})
        started = time.time()
        result = generate(table, options, now=NOW, batch_id=spec["batch"], tasks=tasks)
        ended = time.time()
    return {
        "started": started,
        "ended": ended,
        "selected": result.selected,
        "due": result.counts.seen,
        "select_seconds": result.select_seconds,
        "write_seconds": result.write_seconds,
    }


CHILDREN = {"writer": writer, "generator": generator}


def load_hbase_settings(spec: Mapping[str, Any]) -> Any:
    from nutchy.config import load_settings

    return load_settings(
        {
            "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
            "NUTCH_STORAGE_CRAWL_ID": spec["crawl_id"],
            "NUTCH_HBASE_HOST": "127.0.0.1",
            "NUTCH_HBASE_PORT": spec["port"],
            "NUTCH_HBASE_TRANSPORT": spec["transport"],
            "NUTCH_HBASE_PROTOCOL": spec["protocol"],
        },
        project=False,
    )


class Child:
    """A measured client: started, ready, then told to go."""

    def __init__(self, kind: str, spec: Mapping[str, Any], pythonpath: Path | None = None) -> None:
        env = dict(os.environ)
        if pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(pythonpath), env.get("PYTHONPATH")])
            )
        self.process = subprocess.Popen(
            [sys.executable, str(HERE), "--child", kind, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        out: IO[str] | None = self.process.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise RuntimeError(f"a measured client failed (exit status {self.process.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def result(self) -> dict[str, Any]:
        result = self._read()
        if self.process.wait() != 0:
            raise RuntimeError(f"a measured client failed (exit status {self.process.returncode})")
        return result


def measure(server: Server, children: list[Child]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Zero the server's statistics, let *children* go at once, and return their results and
    the statistics of what they did."""
    server.ask("reset_stats")
    for child in children:
        child.go()
    results = [child.result() for child in children]
    return results, server.stats()


# --- the tables ---------------------------------------------------------------------------------


def open_store(port: int, crawl_id: str, args: argparse.Namespace) -> Any:
    from nutchy.store.hbase import HBaseStore

    return HBaseStore(
        "127.0.0.1",
        port,
        crawl_id=crawl_id,
        transport=args.transport,
        protocol=args.protocol,
    )


def target_url(j: int) -> str:
    return f"http://t{j % 997}.example.org/d/{j}.html"


def update_rows(targets: int, links: int, overlap: float) -> Iterator[Any]:
    """The rows of the updatedb table: both batches' pages, and the targets that already exist."""
    from nutchy.core.scoring import cash_bytes
    from nutchy.core.urls import reverse_url
    from nutchy.store.schema import build_update

    pages = math.ceil(2 * targets / links)
    shift = round(targets * (1 - overlap))
    for b, batch in enumerate(BATCHES):
        for i in range(pages):
            url = f"http://b{b}h{i % 50}.example.com/page/{i}.html"
            outlinks = {
                target_url(b * shift + (i * links + k) % targets): f"anchor {k}"
                for k in range(links)
            }
            yield build_update(
                reverse_url(url),
                {
                    "status": 2,
                    "fetch_time": NOW - DAY,
                    "prev_fetch_time": NOW - 31 * DAY,
                    "fetch_interval": INTERVAL,
                    "score": 1.0,
                },
                {
                    "outlinks": outlinks,
                    "metadata": {"_csh_": cash_bytes(float(links))},
                    "markers": {"_gnmrk_": batch, "__prsmrk__": batch, "dist": "0"},
                },
            )
    for j in range(0, targets + shift, 2):
        yield build_update(
            reverse_url(target_url(j)),
            {"status": 2, "fetch_time": NOW + DAY, "fetch_interval": INTERVAL, "score": 0.5},
            {
                "inlinks": {f"http://old.example.net/{j % 7}": "old"},
                "markers": {"dist": "1"},
                "metadata": {"_csh_": cash_bytes(0.0)},
            },
        )


def build_update_table(port: int, crawl_id: str, args: argparse.Namespace, targets: int) -> int:
    from nutchy.store.table import WebTable

    store = open_store(port, crawl_id, args)
    store.create()
    create_lease_table(store)
    with WebTable(store) as table:
        rows = 0
        chunk = []
        for update in update_rows(targets, args.links, args.overlap):
            chunk.append(update)
            if len(chunk) == 1000:
                table.store.write(chunk)
                rows += len(chunk)
                chunk = []
        table.store.write(chunk)
        return rows + len(chunk)


def create_lease_table(store: Any) -> None:
    """Create the table's lease table (taking and releasing a lease of its own), so that the
    measured runs find it, as they do on any table updated or generated before."""
    with store.exclusive("bench-setup"):
        pass


def table_state(port: int, crawl_id: str, args: argparse.Namespace) -> dict[str, tuple[Any, ...]]:
    """Every row as updatedb decides it: status, schedule, score, metadata (cash) but
    ``mtdt:_nub_``, inlinks and marks."""
    from nutchy.store.table import WebTable

    rows = {}
    with WebTable(open_store(port, crawl_id, args)) as table:
        for page in table.scan():
            metadata = {k: v for k, v in page.metadata.items() if k != "_nub_"}
            rows[page.key] = (
                page.status,
                page.fetch_time,
                page.prev_fetch_time,
                page.fetch_interval,
                page.retries_since_fetch,
                page.score,
                sorted(metadata.items()),
                sorted(page.inlinks.items()),
                sorted(page.markers.items()),
            )
    return rows


def drop(port: int, crawl_id: str, args: argparse.Namespace) -> None:
    store = open_store(port, crawl_id, args)
    store.drop()
    store.close()


def generate_rows(rows: int) -> Iterator[Any]:
    """A crawl in progress: 10% of the rows due now, the rest within 30 days; the cells generate
    reads and a few more."""
    from nutchy.core.scoring import cash_bytes
    from nutchy.core.urls import reverse_url
    from nutchy.store.schema import RowUpdate, encode_cell

    for i in range(rows):
        url = f"http://www.site{i % HOSTS}.example/section/{i // HOSTS}/page-{i}.html"
        due = i % 10 == 0
        fetch_time = NOW - (i % 1000) * 1000 if due else NOW + 1 + (i * 7919) % (30 * DAY)
        yield RowUpdate(
            reverse_url(url).encode(),
            {
                b"f:st": encode_cell("status", 2),
                b"f:ts": encode_cell("fetch_time", fetch_time),
                b"f:pts": encode_cell("prev_fetch_time", fetch_time - 30 * DAY),
                b"f:fi": encode_cell("fetch_interval", INTERVAL),
                b"f:typ": b"text/html",
                b"s:s": encode_cell("score", 1.0 / (1 + (i * 31) % 997)),
                b"mk:dist": b"1",
                b"mtdt:_csh_": cash_bytes(0.0),
            },
        )


def split_keys(count: int) -> list[str]:
    """Keys that cut the generate table into *count* regions of as many hosts each."""
    from nutchy.core.urls import reverse_url

    hosts = sorted(reverse_url(f"http://www.site{h}.example/").split(":")[0] for h in range(HOSTS))
    return [hosts[len(hosts) * n // count] for n in range(1, count)]


def batch_keys(port: int, crawl_id: str, args: argparse.Namespace, batch: str) -> list[bytes]:
    from nutchy.store.base import Scan

    store = open_store(port, crawl_id, args)
    scan = Scan(columns=[b"mk:_gnmrk_"], marker=(b"_gnmrk_", batch.encode()))
    keys = [key for key, _ in store.scan(scan, 1000)]
    store.close()
    return keys


def unmark(port: int, crawl_id: str, args: argparse.Namespace, keys: list[bytes]) -> None:
    from nutchy.store.schema import RowUpdate

    store = open_store(port, crawl_id, args)
    for start in range(0, len(keys), 1000):
        store.write([RowUpdate(k, {}, set(MARK_COLUMNS)) for k in keys[start : start + 1000]])
    store.close()


# --- the old client -----------------------------------------------------------------------------


def extract(commit: str, into: Path) -> Path | None:
    """The ``nutchy`` package of *commit*, extracted under *into*; ``None`` if git cannot."""
    archive = into / "old.tar"
    with archive.open("wb") as out:
        done = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", commit, "nutchy"],
            stdout=out,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        return None
    root = into / f"nutchy-{commit}"
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root


# --- the runs -----------------------------------------------------------------------------------


def updatedb_runs(
    server: Server,
    args: argparse.Namespace,
    label: str,
    targets: int,
    pythonpath: Path | None = None,
) -> dict[str, Any]:
    """1 writer (b1, then b2) and 2 writers at once; the tables compared, then dropped."""
    spec = {"port": server.port, "transport": args.transport, "protocol": args.protocol}
    one, two = f"{label}1", f"{label}2"
    built = time.perf_counter()
    rows = build_update_table(server.port, one, args, targets)
    build_update_table(server.port, two, args, targets)
    built = time.perf_counter() - built
    runs: dict[str, Any] = {"rows": rows, "build_seconds": built / 2}

    results = []
    stats = []
    for batch in BATCHES:
        child = Child("writer", {**spec, "crawl_id": one, "batch": batch}, pythonpath)
        check_code(child.info, pythonpath)
        done, stat = measure(server, [child])
        results += done
        stats.append(stat)
    runs["one"] = summary(results, merge_stats(stats), sequential=True)
    runs["one"]["runs"] = [
        summary([r], s, sequential=True) for r, s in zip(results, stats, strict=True)
    ]

    children = [
        Child("writer", {**spec, "crawl_id": two, "batch": batch}, pythonpath) for batch in BATCHES
    ]
    for child in children:
        check_code(child.info, pythonpath)
    results, stat = measure(server, children)
    runs["two"] = summary(results, stat, sequential=False)

    expected = table_state(server.port, one, args)
    found = table_state(server.port, two, args)
    differ = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))
    runs["compared"] = len(expected)
    runs["differ"] = differ
    both = sum(1 for k in expected if expected[k][5] >= 4.0 and k.startswith("org.example.t"))
    runs["targets_of_both"] = both
    for crawl_id in (one, two):
        drop(server.port, crawl_id, args)
    return runs


def check_code(info: Mapping[str, Any], pythonpath: Path | None) -> None:
    """The writer runs the code it should: the old commit's, or this checkout's."""
    where = Path(info["nutchy"]).resolve()
    expected = (pythonpath or REPO).resolve()
    if not where.is_relative_to(expected):
        raise RuntimeError(f"the writer imported nutchy from {where}, not from {expected}")


def summary(
    results: list[dict[str, Any]], stats: dict[str, Any], *, sequential: bool
) -> dict[str, Any]:
    if sequential:
        seconds = sum(r["ended"] - r["started"] for r in results)
    else:
        seconds = max(r["ended"] for r in results) - min(r["started"] for r in results)
    return {
        "seconds": seconds,
        "targets": sum(r.get("targets", 0) for r in results),
        "batch_pages": sum(r.get("batch_pages", 0) for r in results),
        "results": results,
        "stats": stats,
    }


def merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    methods: dict[str, list[int]] = {}
    for stat in stats:
        for method, (calls, request, response, largest) in stat["methods"].items():
            total = methods.setdefault(method, [0, 0, 0, 0])
            total[0] += calls
            total[1] += request
            total[2] += response
            total[3] = max(total[3], largest)
    return {
        "methods": methods,
        "rows_shipped": sum(s["rows_shipped"] for s in stats),
        "rss_mb": max(s["rss_mb"] for s in stats),
    }


def generate_runs(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Load the table, split it, generate with 1 task then 4; compare the batches."""
    from nutchy.store.schema import RowUpdate

    crawl_id = "gen"
    store = open_store(server.port, crawl_id, args)
    store.create()
    create_lease_table(store)
    server.ask("reset_stats")
    started = time.perf_counter()
    chunk: list[RowUpdate] = []
    for update in generate_rows(args.rows):
        chunk.append(update)
        if len(chunk) == 1000:
            store.write(chunk)
            chunk = []
    store.write(chunk)
    load = {"seconds": time.perf_counter() - started, "stats": server.stats()}
    store.close()
    server.ask("split", table=f"{crawl_id}_webpage", keys=split_keys(REGIONS))

    spec = {
        "port": server.port,
        "transport": args.transport,
        "protocol": args.protocol,
        "crawl_id": crawl_id,
        "top_n": args.top_n,
    }
    runs: dict[str, Any] = {"load": load}
    batches = []
    for tasks, batch in zip((1, REGIONS), GENERATE_BATCHES, strict=True):
        child = Child("generator", {**spec, "tasks": tasks, "batch": batch})
        (result,), stats = measure(server, [child])
        keys = batch_keys(server.port, crawl_id, args, batch)
        batches.append(keys)
        unmark(server.port, crawl_id, args, keys)
        runs[tasks] = {"seconds": result["ended"] - result["started"], **result, "stats": stats}
        runs[tasks]["marked"] = len(keys)
    runs["same_batch"] = batches[0] == batches[1]
    drop(server.port, crawl_id, args)
    return runs


# --- the report ---------------------------------------------------------------------------------

UPDATE_METHODS = (
    "checkAndPut",
    "getRowsWithColumns",
    "getRowsWithColumnsTs",
    "getRows",
    "get",
    "mutateRowsTs",
    "mutateRows",
    "scannerOpenWithScan",
    "scannerGetList",
    "scannerClose",
)


def method_order(methods: Mapping[str, Any]) -> list[str]:
    known = [m for m in UPDATE_METHODS if m in methods]
    return known + sorted(m for m in methods if m not in known)


def calls(stats: Mapping[str, Any], method: str | None = None) -> int:
    methods = stats["methods"]
    if method is not None:
        return int(methods.get(method, (0,))[0])
    return sum(int(m[0]) for m in methods.values())


def mutate_calls(stats: Mapping[str, Any]) -> int:
    return calls(stats, "mutateRowsTs") + calls(stats, "mutateRows")


def print_rpc_table(columns: list[tuple[str, dict[str, Any], float]], unit: str) -> None:
    """Calls per *unit* by Thrift method, one column per run."""
    methods = method_order({m: None for _, s, _ in columns for m in s["methods"]})
    print(f"| Thrift method | {' | '.join(name for name, _, _ in columns)} |")
    print(f"|---|{'---:|' * len(columns)}")
    for method in methods:
        cells = []
        for _, stats, rows in columns:
            n = calls(stats, method)
            cells.append(f"{n / rows:.4f} ({n:,})" if n else "")
        print(f"| {method} | {' | '.join(cells)} |")
    cells = [f"**{calls(s) / rows:.4f}** ({calls(s):,})" for _, s, rows in columns]
    print(f"| all, per {unit} | {' | '.join(cells)} |")


def print_bytes_table(columns: list[tuple[str, dict[str, Any]]]) -> None:
    print(
        "| run | Thrift method | calls | request bytes, mean | largest request | response bytes, mean |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for name, stats in columns:
        for method in method_order(stats["methods"]):
            n, request, response, largest = stats["methods"][method]
            print(
                f"| {name} | {method} | {n:,} | {request / n:,.0f} | {largest:,} | {response / n:,.0f} |"
            )


def report_updatedb(title: str, runs: Mapping[str, Any], args: argparse.Namespace) -> bool:
    """Print the updatedb tables of one code version; return whether the two tables are equal."""
    one, two = runs["one"], runs["two"]
    print(f"### updatedb, {title}")
    print()
    print(
        f"Two batches of {one['runs'][0]['batch_pages']:,} pages x {args.links} outlinks, each"
        f" reaching {one['runs'][0]['targets']:,} target rows ({args.overlap:.0%} shared); the"
        f" table holds {runs['rows']:,} rows before (built in {runs['build_seconds']:.1f} s)."
    )
    print()
    print(
        "| run | target rows | batch pages | seconds | target rows/s | calls | calls per target row | mutate calls | rows written per mutate call |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [
        (f"1 writer, {BATCHES[0]}", one["runs"][0]),
        (f"1 writer, {BATCHES[1]} after it", one["runs"][1]),
        ("1 writer, both (sum)", one),
        ("2 writers at once", two),
    ]
    for name, run in rows:
        written = run["targets"] + run["batch_pages"]
        mutates = mutate_calls(run["stats"])
        print(
            f"| {name} | {run['targets']:,} | {run['batch_pages']:,} | {run['seconds']:,.1f}"
            f" | {run['targets'] / run['seconds']:,.0f} | {calls(run['stats']):,}"
            f" | {calls(run['stats']) / run['targets']:.4f} | {mutates:,}"
            f" | {written / mutates if mutates else 0:,.0f} |"
        )
    print()
    print("Calls per target row by Thrift method (count in brackets):")
    print()
    print_rpc_table(
        [
            ("1 writer (b1 then b2)", one["stats"], one["targets"]),
            ("2 writers at once", two["stats"], two["targets"]),
        ],
        "target row",
    )
    print()
    print_bytes_table([("1 writer", one["stats"]), ("2 writers", two["stats"])])
    print()
    equal = not runs["differ"]
    print(
        f"Equality check: the table of 2 writers at once {'equals' if equal else 'DIFFERS from'}"
        f" the table of 1 writer: {runs['compared']:,} rows compared (status, schedule, score,"
        f" cash and other metadata but mtdt:_nub_, inlinks, marks)"
        + ("" if equal else f"; {len(runs['differ']):,} rows differ, first {runs['differ'][0]!r}")
        + f"; {runs['targets_of_both']:,} targets hold both batches' shares."
    )
    print()
    return equal


def report_targets(
    runs: Mapping[str, Any], gen: Mapping[str, Any] | None, args: argparse.Namespace
) -> None:
    """The issue's targets, each with its verdict and the figures behind it."""
    from nutchy.store.hbase import MODIFY_BUCKETS

    one, two = runs["one"], runs["two"]
    print("### Targets")
    print()
    if args.quick:
        print("(--quick: the sizes are too small for the verdicts to mean anything.)")
        print()
    # Every checkAndPut of the store is a lease's (nutchy.store.hbase_lease). The design bounds
    # them per lease, whatever the rows: an updatedb run takes and releases each of the 16
    # buckets once per modify call (targets, then the batch's pages), renews a lease it holds
    # every third of the lease time, and with other writers about can lose a race for a
    # bucket (a checkAndPut that fails) once per lease it takes; generate takes one lease.
    renewal = DEFAULT_LEASE_MS / 3000
    for name, run in (("1 writer", one), ("2 writers at once", two)):
        n = calls(run["stats"], "checkAndPut")
        count = len(run["results"])
        leases = 2 * MODIFY_BUCKETS * count
        longest = max(r["ended"] - r["started"] for r in run["results"])
        bound = 2 * leases + leases * math.floor(longest / renewal)
        if run is two:
            bound += leases
        print(
            f"- checkAndPut, updatedb, {name}: {n:,} for {run['targets']:,} target rows"
            f" ({n / run['targets']:.5f} a row), all lease calls: {count} runs x 2 modify calls x"
            f" {MODIFY_BUCKETS} buckets taken and released make {2 * leases:,}; the design's"
            f" bound with renewals{' and lost races' if run is two else ''} is {bound:,}, not"
            f" per row -> {verdict(n <= bound)}"
        )
    for tasks in (1, REGIONS) if gen is not None else ():
        assert gen is not None
        n = calls(gen[tasks]["stats"], "checkAndPut")
        bound = 2 + math.floor(gen[tasks]["seconds"] / renewal)
        print(
            f"- checkAndPut, generate -numTasks {tasks}: {n:,} for {gen[tasks]['selected']:,}"
            f" rows marked: the generate lease taken and released (bound with renewals {bound})"
            f" -> {verdict(n <= bound)}"
        )
    for name, run in (("1 writer", one), ("2 writers at once", two)):
        written = run["targets"] + run["batch_pages"]
        mutates = mutate_calls(run["stats"])
        print(
            f"- mutate calls, updatedb, {name}: {mutates:,} for {written:,} rows written, one per"
            f" {written / mutates:,.0f} rows; {mutate_floor(run, args)}"
            f" -> {verdict(mutates <= floor_of(run, args))}"
        )
    for tasks in (1, REGIONS) if gen is not None else ():
        assert gen is not None
        run = gen[tasks]
        mutates = mutate_calls(run["stats"])
        rows = {"results": [{"targets": run["selected"]}], "stats": run["stats"]}
        print(
            f"- mutate calls, generate -numTasks {tasks}: {mutates:,} for {run['selected']:,} rows"
            f" marked; {mutate_floor(rows, args)} -> {verdict(mutates <= floor_of(rows, args))}"
        )
    a = calls(one["stats"]) / one["targets"]
    b = calls(two["stats"]) / two["targets"]
    print(
        f"- calls per target row, 2 writers at once {b:.5f}, 1 writer {a:.5f} ({b / a:.3f}x)"
        f" -> {verdict(b <= a)}"
    )
    print()


def verdict(met: bool) -> str:
    return "**met**" if met else "**not met**"


def floor_of(run: Mapping[str, Any], args: argparse.Namespace) -> int:
    """The fewest mutate calls that write *run*'s rows 1,000 at a time and at most
    ``NUTCH_HBASE_BATCH_BYTES`` a call: per writer and per modify call, or for the bytes sent."""
    by_rows = sum(
        math.ceil(r.get("targets", 0) / 1000) + math.ceil(r.get("batch_pages", 0) / 1000)
        for r in run["results"]
    )
    sent = sum(run["stats"]["methods"].get(m, (0, 0))[1] for m in ("mutateRowsTs", "mutateRows"))
    return max(by_rows, math.ceil(sent / args.batch_bytes))


def mutate_floor(run: Mapping[str, Any], args: argparse.Namespace) -> str:
    largest = max(
        run["stats"]["methods"].get(m, (0, 0, 0, 0))[3] for m in ("mutateRowsTs", "mutateRows")
    )
    return (
        f"the floor at 1,000 rows and {args.batch_bytes:,} bytes a call is {floor_of(run, args):,};"
        f" largest call {largest:,} bytes"
    )


def report_generate(gen: Mapping[str, Any], args: argparse.Namespace) -> list[str]:
    load = gen["load"]
    print("### generate")
    print()
    print(
        f"Load: {args.rows:,} rows written with HBaseStore.write (batches of 1,000 rows, one"
        f" mutateRowsTs each, the rows made in the same process) in {load['seconds']:,.1f} s,"
        f" {args.rows / load['seconds']:,.0f} rows/s; {calls(load['stats'], 'mutateRowsTs'):,}"
        f" mutateRowsTs calls of {mean_request(load['stats'], 'mutateRowsTs'):,.0f} bytes on"
        f" average; server RSS {load['stats']['rss_mb']:,.0f} MB after the load. The table is"
        f" then split into {REGIONS} regions of {HOSTS // REGIONS:,} hosts each."
    )
    print()
    print(
        "| run | rows | due rows read | selected | seconds | due rows/s | rows the server shipped | calls | mutate calls |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for tasks in (1, REGIONS):
        run = gen[tasks]
        print(
            f"| generate -topN {args.top_n:,} -numTasks {tasks} | {args.rows:,} | {run['due']:,}"
            f" | {run['selected']:,} | {run['seconds']:,.1f} | {run['due'] / run['seconds']:,.0f}"
            f" | {run['stats']['rows_shipped']:,} | {calls(run['stats']):,}"
            f" | {mutate_calls(run['stats']):,} |"
        )
    print()
    print("Calls by Thrift method, per 1,000 rows selected (count in brackets):")
    print()
    print_rpc_table(
        [
            (f"-numTasks {tasks}", gen[tasks]["stats"], gen[tasks]["selected"] / 1000)
            for tasks in (1, REGIONS)
        ],
        "1,000 rows selected",
    )
    print()
    print_bytes_table([(f"-numTasks {t}", gen[t]["stats"]) for t in (1, REGIONS)])
    print()
    same = gen["same_batch"] and gen[1]["marked"] == gen[1]["selected"]
    print(
        f"Batch check: -numTasks {REGIONS} marked {'the same' if same else 'NOT the same'}"
        f" {gen[REGIONS]['marked']:,} rows as -numTasks 1 ({gen[1]['marked']:,})."
    )
    print()
    return [] if same else ["generate: the batches of -numTasks 1 and 4 differ"]


def mean_request(stats: Mapping[str, Any], method: str) -> float:
    n, request, _, _ = stats["methods"].get(method, (0, 0, 0, 0))
    return float(request / n) if n else 0.0


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=100_000, help="target rows of each batch")
    parser.add_argument("--links", type=int, default=40, help="outlinks of each page")
    parser.add_argument(
        "--overlap", type=float, default=0.5, help="share of targets both batches reach"
    )
    parser.add_argument("--before", default="fdd6be4", help="the commit of the 'before' client")
    parser.add_argument(
        "--before-targets", type=int, help="targets of the 'before' runs (--targets)"
    )
    parser.add_argument("--no-before", action="store_true", help="skip the 'before' runs")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the generate table")
    parser.add_argument("--top-n", type=int, default=50_000, help="generate's -topN")
    parser.add_argument("--no-generate", action="store_true", help="skip the generate runs")
    parser.add_argument("--transport", choices=("buffered", "framed"), default="buffered")
    parser.add_argument("--protocol", choices=("binary", "compact"), default="binary")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=CHILDREN, help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.transport, args.protocol)
        return 0
    if args.child:
        print(json.dumps(CHILDREN[args.child](json.loads(args.spec))), flush=True)
        return 0
    # A long run's sections show as they are printed, also in a file.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.quick:
        args.targets, args.rows, args.top_n = 1000, 10_000, 500
        args.before_targets = args.before_targets or 400
    if args.links > args.targets or not 0 <= args.overlap <= 1:
        parser.error("--links must be at most --targets and --overlap within [0, 1]")
    from nutchy.config import load_settings

    args.batch_bytes = load_settings(project=False).getint("NUTCH_HBASE_BATCH_BYTES")

    print(
        f"# bench_hbase.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit()},"
        f" {os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()},"
        f" HBase test server {args.transport}/{args.protocol}"
    )
    print(f"# {' '.join(['python', 'benchmarks/bench_hbase.py', *sys.argv[1:]])}")
    print()
    print(
        "The HBase test server is Python and shares the machine's cores with the clients: its"
        " rows/s measure the server, not nutchy. The calls and bytes carry over to a real HBase."
    )
    print()
    problems: list[str] = []
    server = Server(args.transport, args.protocol)
    work = Path(tempfile.mkdtemp(prefix="bench-hbase-"))
    try:
        runs = updatedb_runs(server, args, "now", args.targets)
        if not report_updatedb("this checkout", runs, args):
            problems.append("updatedb: the table of 2 writers differs from the table of 1 writer")
        before = None
        if not args.no_before:
            old = extract(args.before, work)
            if old is None:
                print(
                    f"### updatedb, before: commit {args.before} is not in this checkout; skipped"
                )
                print()
            else:
                before = updatedb_runs(
                    server, args, "old", args.before_targets or args.targets, old
                )
                # The old client's equality is a finding about it, not a failure of this run.
                report_updatedb(f"before (client of commit {args.before})", before, args)
        gen = None
        if not args.no_generate:
            gen = generate_runs(server, args)
            problems += report_generate(gen, args)
        report_targets(runs, gen, args)
        if before is not None:
            print_before_after(runs, before)
        print(f"Server peak RSS: {server.stats()['rss_mb']:,.0f} MB.")
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


def print_before_after(now: Mapping[str, Any], before: Mapping[str, Any]) -> None:
    print("### Before and after: calls per target row")
    print()
    print_rpc_table(
        [
            ("before, 1 writer", before["one"]["stats"], before["one"]["targets"]),
            ("before, 2 writers", before["two"]["stats"], before["two"]["targets"]),
            ("now, 1 writer", now["one"]["stats"], now["one"]["targets"]),
            ("now, 2 writers", now["two"]["stats"], now["two"]["targets"]),
        ],
        "target row",
    )
    print()


if __name__ == "__main__":
    sys.exit(main())
