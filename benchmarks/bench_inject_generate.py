"""Inject seeds, then generate a batch, on the embedded store, at a million rows.

    python benchmarks/bench_inject_generate.py                # 1,000,000 seeds and rows
    python benchmarks/bench_inject_generate.py --rows 50000   # a quick look
    python benchmarks/bench_inject_generate.py --no-inject    # the generate phases alone

Each phase runs in a child process of its own, so the peak RSS printed is that phase's alone, and
each generate runs on a fresh copy of the prepared table.

Phases:

- ``inject``: ``--rows`` seed URLs (10,000 hosts, one line in ten with a score and metadata, 1%
  repeated) into an empty table, through :func:`nutchy.jobs.inject.inject` with nutchy's default
  URL filter;
- ``generate``: a table of ``--rows`` rows shaped like a crawl in progress (status, fetch times,
  interval, score, markers, OPIC cash, headers, outlinks; no content, which generate never reads),
  where 10% are due; then :func:`nutchy.jobs.generate.generate` with ``-topN 50000``: with the
  default settings (URL filter and normalization check on), as ``bin/crawl`` runs it
  (``-noFilter -noNorm``), and with ``generate.max.count=20`` and 4 partitions;
- ``generate-small``: the same on a table of ``--small-rows`` rows (10,000 by default), to show
  that cost follows the due rows and not the size of the table.

The issue's targets: inject at least 20,000 URLs/s; generate at most 3 s and under 300 MB peak
RSS on 1,000,000 rows; the small table at least 20 times cheaper.
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
from pathlib import Path

from nutchy.testing.memory import peak_rss_kib

NOW = 1_700_000_000_000
DAY = 86_400_000
HOSTS = 10_000
TOP_N = 50_000


def peak_rss_mb() -> float:
    return peak_rss_kib() / 1024


# --- children ----------------------------------------------------------------------------------


def write_seeds(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            n = i - 1 if i % 100 == 99 else i  # 1% repeats of the previous URL
            url = f"http://www.site{n % HOSTS}.example/section/{n // HOSTS}/page-{n}.html"
            if i % 10 == 0:
                out.write(f"{url}\tnutch.score={1 + i % 7}\tsource=bench\n")
            else:
                out.write(url + "\n")


def child_inject(args: argparse.Namespace) -> dict[str, object]:
    from nutchy.config import load_settings
    from nutchy.jobs.inject import InjectOptions, inject
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.table import WebTable

    options = InjectOptions.from_settings(
        load_settings(project=False), filter_urls=not args.no_filter
    )
    table = WebTable(EmbeddedStore(Path(args.dir) / "webpage.sqlite"))
    start = time.perf_counter()
    result = inject(table, [Path(args.seeds)], options, now=NOW)
    seconds = time.perf_counter() - start
    table.close()
    return {
        "seconds": seconds,
        "lines": result.lines,
        "injected": result.injected,
        "duplicates": result.duplicates,
        "rate": result.lines / seconds,
        "rss": peak_rss_mb(),
    }


def child_prepare(args: argparse.Namespace) -> dict[str, object]:
    """A crawl in progress: 10% of the rows due now, the rest due within 30 days."""
    from nutchy.core.urls import reverse_url
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.schema import RowUpdate, encode_cell

    store = EmbeddedStore(Path(args.dir) / "webpage.sqlite")
    store.create()
    start = time.perf_counter()
    batch: list[RowUpdate] = []
    for i in range(args.rows):
        host = f"www.site{i % HOSTS}.example"
        url = f"http://{host}/section/{i // HOSTS}/page-{i}.html"
        due = i % 10 == 0
        fetch_time = NOW - (i % 1000) * 1000 if due else NOW + 1 + (i * 7919) % (30 * DAY)
        cells = {
            b"f:st": encode_cell("status", 2),
            b"f:ts": encode_cell("fetch_time", fetch_time),
            b"f:pts": encode_cell("prev_fetch_time", fetch_time - 30 * DAY),
            b"f:fi": encode_cell("fetch_interval", 2_592_000),
            b"s:s": encode_cell("score", 1.0 / (1 + (i * 31) % 997)),
            b"f:typ": b"text/html",
            b"mk:dist": b"1",
            b"mk:_updmrk_": b"1690000000-1",
            b"mtdt:_csh_": encode_cell("score", 0.0),
            b"mtdt:_rs_": (120).to_bytes(4, "big"),
        }
        for n in range(10):
            cells[f"h:X-Header-{n}".encode()] = f"value {n} for page {i}".encode()
        for n in range(20):
            cells[f"ol:http://{host}/section/{n}/page-{i + n}.html".encode()] = b"anchor"
        batch.append(RowUpdate(reverse_url(url).encode(), cells))
        if len(batch) == 1000:
            store.write(batch)
            batch = []
    if batch:
        store.write(batch)
    store.close()
    return {"seconds": time.perf_counter() - start, "rss": peak_rss_mb()}


def child_generate(args: argparse.Namespace) -> dict[str, object]:
    from nutchy.config import load_settings
    from nutchy.jobs.generate import GenerateOptions, generate
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.table import WebTable

    overrides = json.loads(args.settings)
    options = GenerateOptions.from_settings(
        load_settings(overrides, project=False),
        top_n=TOP_N,
        num_fetchers=args.num_fetchers,
        filter_urls=not args.no_filter,
        normalize=not args.no_norm,
    )
    start = time.perf_counter()
    table = WebTable(EmbeddedStore(Path(args.dir) / "webpage.sqlite"))
    result = generate(table, options, now=NOW, batch_id="1700000000-1")
    table.close()
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "due": result.counts.seen,
        "selected": result.selected,
        "select": result.select_seconds,
        "write": result.write_seconds,
        "rss": peak_rss_mb(),
    }


CHILDREN = {"inject": child_inject, "prepare": child_prepare, "generate": child_generate}


# --- parent ------------------------------------------------------------------------------------


def run_child(phase: str, **options: object) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", phase]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value is not False:
            command += [flag, str(value)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--no-inject", action="store_true", help="skip the inject phases")
    parser.add_argument("--child", choices=CHILDREN, help=argparse.SUPPRESS)
    parser.add_argument("--seeds", help=argparse.SUPPRESS)
    parser.add_argument("--settings", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--num-fetchers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--no-filter", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-norm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return

    work = Path(args.dir or tempfile.mkdtemp(prefix="nutchy-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        report(work, args.rows, args.small_rows, inject=not args.no_inject)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


def report(work: Path, rows: int, small_rows: int, *, inject: bool = True) -> None:
    print(f"nutchy inject/generate benchmark, embedded store, {platform.python_implementation()}")
    print(f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print()
    seeds = work / "seeds.txt"
    if inject:
        write_seeds(seeds, rows)
        os.sync()
    print(f"All generates: -topN {TOP_N:,}.")
    print(f"{'phase':<54}{'rows read':>11}{'seconds':>9}{'rows/s':>10}{'peak RSS':>10}")
    injects = [("inject (default URL filter)", {}), ("inject -noFilter", {"no_filter": True})]
    for label, options in injects if inject else []:
        inject_dir = work / "inject"
        inject = run_child("inject", dir=inject_dir, seeds=seeds, **options)
        print(
            f"{label:<54}{inject['lines']:>11,}{inject['seconds']:>9.2f}"
            f"{inject['rate']:>10,.0f}{inject['rss']:>8.0f}MB"
        )
        shutil.rmtree(inject_dir)

    variants = [
        ("generate (defaults)", {}),
        ("generate -noFilter -noNorm", {"no_filter": True, "no_norm": True}),
        (
            "generate max.count=20, 4 partitions",
            {"settings": json.dumps({"NUTCH_GENERATE_MAX_COUNT": 20}), "num_fetchers": 4},
        ),
    ]
    timings: dict[int, list[float]] = {}
    for size in (rows, small_rows):
        prepared = work / f"table-{size}"
        prepare = run_child("prepare", dir=prepared, rows=size)
        os.sync()
        print(
            f"{f'(prepare a {size:,}-row table, 10% due)':<54}{size:>11,}{prepare['seconds']:>9.2f}"
        )
        for label, options in variants:
            copy = work / "copy"
            shutil.copytree(prepared, copy)
            os.sync()  # let the copy reach the disk first: its writeback would slow the phase
            result = run_child("generate", dir=copy, **options)
            shutil.rmtree(copy)
            timings.setdefault(size, []).append(float(result["seconds"]))  # type: ignore[arg-type]
            rate = float(result["due"]) / float(result["seconds"])  # type: ignore[arg-type]
            print(
                f"{f'{label}, {size:,} rows':<54}{result['due']:>11,}{result['seconds']:>9.2f}"
                f"{rate:>10,.0f}{result['rss']:>8.0f}MB   selected {result['selected']:,}:"
                f" {result['select']:.2f} s reading and selecting,"
                f" {result['write']:.2f} s writing marks"
            )
        shutil.rmtree(prepared)
    print()
    for (label, _), big, small in zip(variants, timings[rows], timings[small_rows], strict=True):
        print(f"{label}: {rows:,} rows / {small_rows:,} rows = {big / small:.0f}x")


if __name__ == "__main__":
    main()
