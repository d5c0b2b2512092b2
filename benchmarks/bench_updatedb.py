"""updatedb and generate alone, between the fetches of a crawl of bench_crawl.py's doc-shaped site.

    python benchmarks/bench_updatedb.py                       # 2,000 pages on 20 hosts
    python benchmarks/bench_updatedb.py --hosts 1 --repeat 5
    PYTHONPATH=/path/to/other/checkout python benchmarks/bench_updatedb.py --data DIR  # before/after

The first run crawls the site (bench_crawl.py's server, ``--shape docs``) round by round as
``nutchy crawl`` does (inject; then generate, ``scrapy crawl nutch -a batch=ID`` with updatedb off,
a copy of the crawl directory, ``nutchy updatedb ID``, until nothing is due), then a re-crawl
(10% of the pages changed, ``generate -adddays 31``), and keeps a copy of the table as it is
between each fetch and its updatedb in ``--data`` (the snapshots, reused by later runs: the same
tables for the code before and after a change).

Then, for each snapshot, a child process of its own copies it, opens it, and runs what ``nutchy
crawl`` runs between that fetch and the next: :func:`nutchy.jobs.updatedb.updatedb` (for the
re-crawl also with :func:`~nutchy.jobs.updatedb.read_ahead` first, as the crawl reads during the
fetch; its time is shown apart, as it runs beside the fetch), then
:func:`nutchy.jobs.generate.generate` of the next batch (for the last round of the first crawl
also ``-adddays 31``, the re-crawl's generate, which selects every row again). It prints the wall and CPU seconds of
each, the child's RSS once the table is open and its peak (``VmHWM``), and a digest of every cell
of the table after updatedb and after generate (fixed times and batch ids): two checkouts that
write the same bytes print the same digests. Each is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
CRAWL = HERE.parent / "bench_crawl.py"
DATA = Path("/tmp/nutchy-bench-updatedb")
#: the generate after each updatedb: the batch id it writes, for digests that do not vary
NEXT_BATCH = "1700000000-1"


def _rss_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _digest(table: Any) -> str:
    """A digest of every cell of *table*, in key order."""
    from nutchy.store.base import Scan

    digest = hashlib.blake2b(digest_size=8)
    for key, cells in table.store.scan(Scan(), 1000):
        digest.update(key)
        for column in sorted(cells):
            digest.update(b"\0" + column + b"\0" + cells[column])
    return digest.hexdigest()


def measure(snapshot: str, work: str, batch_id: str, now: str, ahead: str) -> dict[str, Any]:
    """One child: updatedb of *batch_id* on a copy of *snapshot*, then the next generate."""
    from nutchy.config import load_settings
    from nutchy.jobs._cycle import update_config
    from nutchy.jobs.generate import GenerateOptions, generate
    from nutchy.jobs.updatedb import read_ahead, updatedb
    from nutchy.store import open_table

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(snapshot, work)
    settings = load_settings({"NUTCH_CRAWL_DIR": work}, project=False)
    when = int(now)
    result: dict[str, Any] = {}
    with open_table(settings) as table:
        table.get_key("")  # connected, as in a crawl
        result["rss_open"] = _rss_kib("VmRSS:") / 1024
        config = update_config(settings, batch_id)
        marker = ("_gnmrk_", batch_id)
        result["outlinks"] = sum(len(p.outlinks) for p in table.scan(["outlinks"], marker=marker))
        read = None
        if ahead == "ahead":
            wall, cpu = time.perf_counter(), time.process_time()
            limit = settings.getint("NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS")
            read = read_ahead(table, batch_id, config, max_outlinks=limit)
            result["ahead_s"] = time.perf_counter() - wall
            result["ahead_cpu"] = time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        counts = updatedb(table, batch_id, now=when, config=config, ahead=read)
        result["updatedb_s"] = time.perf_counter() - wall
        result["updatedb_cpu"] = time.process_time() - cpu
        del read
        result["peak_updatedb"] = _rss_kib("VmHWM:") / 1024
        result["pages"] = counts.batch_pages
        result["new"] = counts.new_rows
        result["rows"] = counts.batch_pages + counts.existing_targets + counts.new_rows
        result["from_ahead"] = counts.read_ahead
        result["digest_updatedb"] = _digest(table)
        options = GenerateOptions.from_settings(settings, top_n=None, num_fetchers=1)
        # adddays: the re-crawl's generate (-adddays 31), which selects every row again
        add_days = 31 if ahead == "adddays" else 0
        wall, cpu = time.perf_counter(), time.process_time()
        generated = generate(
            table, options, now=when + 1000, batch_id=NEXT_BATCH, add_days=add_days
        )
        result["generate_s"] = time.perf_counter() - wall
        result["generate_cpu"] = time.process_time() - cpu
        result["selected"] = generated.selected
        result["digest_generate"] = _digest(table)
    result["peak"] = _rss_kib("VmHWM:") / 1024
    shutil.rmtree(work, ignore_errors=True)
    return result


# --- the snapshots -----------------------------------------------------------------------------


def _run(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)
) -> str:
    done = subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def _now_ms() -> int:
    return int(time.time() * 1000)


def make_snapshots(data: Path, hosts: int, pages: int) -> list[dict[str, Any]]:
    """Crawl the site round by round, keeping the table between each fetch and its updatedb."""
    sys.path.insert(0, str(HERE.parent))
    import bench_crawl as bc

    data.mkdir(parents=True, exist_ok=True)
    crawl_dir = data / "crawl"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    server = subprocess.Popen(
        bc.child("serve", "docs", pages, 40, hosts, 1, 300), stdout=subprocess.PIPE, text=True
    )
    snapshots: list[dict[str, Any]] = []
    try:
        assert server.stdout is not None
        ports = json.loads(server.stdout.readline())
        site = bc.make_site("docs", pages, 40, hosts, 1, 300)
        names = [f"127.0.0.{i + 2}" for i in range(hosts)]

        def url(i: int) -> str:
            host = names[site.host_of[i]]
            return f"http://{host}:{ports[host]}{bc.page_path(i)}\n"

        seeds = data / "seeds.txt"
        seeds.write_text("".join(map(url, site.seeds)))
        settings = {
            "NUTCH_CRAWL_DIR": str(crawl_dir),
            "NUTCH_FETCHER_SERVER_DELAY": "0",
            "NUTCH_FETCHER_THREADS_PER_QUEUE": "8",
            "CONCURRENT_REQUESTS": "16",
            "NUTCH_HTTP_CONTENT_LIMIT": "-1",
            "NUTCH_DB_MAX_OUTLINKS_PER_PAGE": "-1",
            "LOG_LEVEL": "WARNING",
        }
        s = [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]
        nutchy = [sys.executable, "-m", "nutchy"]
        _run([*nutchy, "inject", str(seeds), *s], data)

        def round_(name: str, *extra: str) -> bool:
            """Generate, fetch, keep a copy, updatedb; whether anything was generated."""
            batch = _run([*nutchy, "generate", *extra, *s], data, ok=(0, 1)).split()
            if not batch:
                return False
            batch_id = batch[-1]
            _run(
                [*scrapy, "-a", f"batch={batch_id}", *s, "-s", "NUTCH_FETCHER_UPDATEDB=False"],
                REPO,
                {"SCRAPY_SETTINGS_MODULE": "settings"},
            )
            now = _now_ms()
            shutil.rmtree(data / name, ignore_errors=True)
            shutil.copytree(crawl_dir, data / name)
            snapshots.append({"name": name, "batch": batch_id, "now": now})
            _run([*nutchy, "updatedb", batch_id, *s], data)
            print(f"# snapshot {name}: batch {batch_id}", flush=True)
            return True

        scrapy = [sys.executable, "-m", "scrapy", "crawl", "nutch"]
        number = 1
        while round_(f"round-{number}"):
            number += 1
        bc.server_get(ports, f"{bc.CHANGE_PATH.decode()}10")
        if not round_("recrawl", "-adddays", "31"):
            raise SystemExit("the re-crawl generated nothing")
    finally:
        server.kill()
        server.wait()
    shutil.rmtree(crawl_dir, ignore_errors=True)
    (data / "snapshots.json").write_text(json.dumps(snapshots, indent=1))
    return snapshots


def _number(name: str) -> int:
    """The round of a snapshot's name (``round-4``: 4)."""
    return int(name.rpartition("-")[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each (the median is shown; 0: none)"
    )
    parser.add_argument("--data", type=Path, help=f"snapshots' folder (default {DATA}-<hosts>)")
    parser.add_argument("--only", help="the snapshots to run, comma-separated (default: all)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0
    data = args.data or Path(f"{DATA}-{args.hosts}")
    index = data / "snapshots.json"
    snapshots = (
        json.loads(index.read_text())
        if index.exists()
        else make_snapshots(data, args.hosts, args.pages)
    )
    if args.only:
        snapshots = [s for s in snapshots if s["name"] in args.only.split(",")]
    if args.repeat < 1:
        return 0
    import nutchy

    load = os.getloadavg()
    print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"# nutchy from {Path(nutchy.__file__).parent}; snapshots in {data}")
    print(f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {args.repeat}")
    print()
    print(
        "| snapshot | batch pages | their outlinks | rows written | new rows | read ahead s (CPU)"
        " | updatedb s | CPU s | RSS open MB | peak MB | generate s (CPU) | digests |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    env = {**os.environ}
    work = str(data / "work")
    last_round = max(
        (s["name"] for s in snapshots if s["name"] != "recrawl"), default=None, key=_number
    )
    for snap in snapshots:
        modes = ["plain", "ahead"] if snap["name"] == "recrawl" else ["plain"]
        if snap["name"] == last_round:
            modes.append("adddays")
        for mode in modes:
            runs = []
            for _ in range(args.repeat):
                done = subprocess.run(
                    [
                        sys.executable,
                        str(HERE),
                        "--child",
                        str(data / snap["name"]),
                        work,
                        snap["batch"],
                        str(snap["now"]),
                        mode,
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                if done.returncode:
                    raise SystemExit(done.stderr[-3000:])
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))

            def med(name: str, runs: list[dict[str, Any]] = runs) -> float:
                return statistics.median(r[name] for r in runs)

            digests = {(r["digest_updatedb"], r["digest_generate"]) for r in runs}
            ahead = f"{med('ahead_s'):.3f} ({med('ahead_cpu'):.3f})" if mode == "ahead" else ""
            label = snap["name"] + (
                f", {runs[0]['from_ahead']} read ahead" if mode == "ahead" else ""
            )
            if mode == "adddays":
                label += f", then generate -adddays 31 ({runs[0]['selected']} selected)"
            print(
                f"| {label} | {runs[0]['pages']} | {runs[0]['outlinks']} | {runs[0]['rows']}"
                f" | {runs[0]['new']} | {ahead}"
                f" | {med('updatedb_s'):.3f} | {med('updatedb_cpu'):.3f} | {med('rss_open'):.0f}"
                f" | {med('peak_updatedb'):.0f} | {med('generate_s'):.3f} ({med('generate_cpu'):.3f})"
                f" | {' '.join('/'.join(d) for d in sorted(digests))} |",
                flush=True,
            )
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
