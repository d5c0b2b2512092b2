"""SIGKILLs at random moments of a crawl, each followed by the same ``nutchy crawl`` command again:
does the table end as the table of a crawl never killed?

    python benchmarks/bench_kills.py                     # 3,000 pages on 10 hosts, 10 kills
    python benchmarks/bench_kills.py --pages 300 --kills 3   # a quick look

The site is bench_crawl.py's (``--pages`` pages over ``--hosts`` loopback hosts, ``--links`` links
a page, every page reachable from the first page of each host, served by its asyncio server in a
process of its own, which counts its answers). First an uninterrupted ``nutchy crawl SEEDS
-rounds 100`` on a new table, until nothing is left to fetch. Then, on another new table, the same
command ``--kills`` times, each run SIGKILLed at a moment drawn at random: ``--kills`` moments are
drawn uniformly over the uninterrupted crawl's length (from ``--seed``) and sorted, and run *i* is
killed ``--restart`` seconds (what a run spends starting before it goes on with the crawl) plus
the gap between moments *i* - 1 and *i* after it starts, so that the kills fall all along the
crawl. The victim is the crawl's fetch child when it has one at that moment and a coin says so,
``nutchy crawl`` itself otherwise (its children die with it). A run that ends before its moment
is not a kill. Then the command once more, to its end.

The table compares each row of both tables (URL → status, score, inlinks, markers of an
unfinished batch), and the pages the server sent more than once over the pages of the site
against what can be in flight at a kill: ``2 * NUTCH_FETCHER_FLUSH_SIZE + CONCURRENT_REQUESTS``
(fetched and not written, or asked for) per fetch process running at a kill.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_crawl import page_path, server_counts

DATA = Path("/work/bench-kills")


def crawl_command(seeds: Path, crawl_dir: Path, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nutchy",
        "crawl",
        str(seeds),
        "-rounds",
        "100",
        "-s",
        f"NUTCH_CRAWL_DIR={crawl_dir}",
        "-s",
        "NUTCH_FETCHER_SERVER_DELAY=0",
        "-s",
        f"NUTCH_FETCHER_THREADS_PER_QUEUE={args.per_host}",
        "-s",
        f"CONCURRENT_REQUESTS={args.concurrency}",
        "-s",
        f"NUTCH_FETCHER_FLUSH_SIZE={args.flush_size}",
        "-numFetchers",
        str(args.fetchers),
    ]


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def snapshot(crawl_dir: Path) -> dict[str, tuple[Any, ...]]:
    """Each row: URL -> status, score, inlinks, the marks of an unfinished batch."""
    from nutchy.config import load_settings
    from nutchy.store import open_table

    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir)}, project=False)
    with open_table(settings) as table:
        return {
            page.url: (
                page.status,
                page.score,
                dict(page.inlinks),
                sorted(m for m in page.markers if m in ("_gnmrk_", "_ftcmrk_", "__prsmrk__")),
            )
            for page in table.scan()
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--links", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--restart", type=float, default=4.0, help="seconds a run takes to start")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--per-host", type=int, default=2)
    parser.add_argument("--flush-size", type=int, default=100)
    parser.add_argument("--fetchers", type=int, default=1, help="nutchy crawl -numFetchers")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = args.data / f"run-{os.getpid()}"
    work.mkdir(parents=True)
    hosts = [f"127.0.0.{i + 2}" for i in range(args.hosts)]
    server = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "bench_crawl.py"),
            "--child",
            "serve",
            *map(str, (args.pages, args.links, args.hosts, args.seed, args.words)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        ports = json.loads(server.stdout.readline())
        seeds = work / "seeds.txt"
        seeds.write_text(
            "".join(f"http://{h}:{ports[h]}{page_path(i)}\n" for i, h in enumerate(hosts))
        )
        print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
        print(
            f"# {args.pages} pages x {args.links} links on {args.hosts} hosts (seed {args.seed}),"
            f" CONCURRENT_REQUESTS={args.concurrency}, {args.per_host} per host, delay 0,"
            f" NUTCH_FETCHER_FLUSH_SIZE={args.flush_size}, -numFetchers {args.fetchers};"
            f" data: {work}",
            flush=True,
        )
        before = server_counts(ports)
        started = time.monotonic()
        whole = subprocess.run(
            crawl_command(seeds, work / "whole", args), capture_output=True, text=True, check=False
        )
        whole_seconds = time.monotonic() - started
        assert whole.returncode == 0, whole.stderr[-2000:]
        whole_served = server_counts(ports) - before
        expected = snapshot(work / "whole")
        print(
            f"# uninterrupted: {whole_seconds:.1f} s, {len(expected)} rows,"
            f" {whole_served[200]} pages sent",
            flush=True,
        )

        command = crawl_command(seeds, work / "killed", args)
        before = server_counts(ports)
        rows = []
        kills = fetch_kills = runs = 0
        moments = sorted(rng.uniform(0, whole_seconds) for _ in range(args.kills))
        gaps = [b - a for a, b in zip([0.0, *moments], moments, strict=False)]
        for gap in gaps:
            runs += 1
            moment = args.restart + gap
            coin = rng.random() < 0.5
            log = (work / f"run-{runs}.log").open("w")
            crawl = subprocess.Popen(command, stdout=log, stderr=log)
            started = time.monotonic()
            try:
                crawl.wait(timeout=moment)
            except subprocess.TimeoutExpired:
                found = children(crawl.pid)
                victim = "fetch child" if found and coin else "nutchy crawl"
                said = (work / f"run-{runs}.log").read_text().strip().splitlines()
                last = said[-1].removeprefix("nutchy crawl: ")[:40] if said else "(nothing yet)"
                phase = "fetch" if found else f"no fetch child; last line: {last}"
                os.kill(rng.choice(found) if victim == "fetch child" else crawl.pid, signal.SIGKILL)
                crawl.wait()  # a crawl whose fetch child was killed stops there
                kills += 1
                fetch_kills += len(found)
                rows.append((kills, f"{moment:.1f}", victim, phase, crawl.returncode))
            else:
                rows.append(("-", f"{moment:.1f}", "none: ended first", "", crawl.returncode))
            finally:
                log.close()
        started = time.monotonic()
        last = subprocess.run(command, capture_output=True, text=True, check=False)
        last_seconds = time.monotonic() - started
        served = server_counts(ports) - before
        got = snapshot(work / "killed")
    finally:
        server.kill()
        server.wait()

    print()
    print(f"{'kill':>4}  {'at s':>6}  {'victim':<17}  exit  crawl then")
    for kill, at, victim, phase, code in rows:
        print(f"{kill!s:>4}  {at:>6}  {victim:<17}  {code!s:>4}  {phase}")
    print(f"last run: exit {last.returncode}, {last_seconds:.1f} s")
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    both = expected.keys() & got.keys()
    differ = Counter()
    for url in both:
        for i, name in enumerate(("status", "score", "inlinks", "marks left")):
            differ[name] += expected[url][i] != got[url][i]
    twice = served[200] - args.pages
    bound = fetch_kills * (2 * args.flush_size + args.concurrency)
    print()
    print("| what | uninterrupted | killed |")
    print("|---|---|---|")
    print(f"| rows | {len(expected)} | {len(got)} |")
    print(f"| rows missing / extra | | {len(missing)} / {len(extra)} |")
    for name in ("status", "score", "inlinks", "marks left"):
        print(f"| rows whose {name} differ | | {differ[name]} |")
    print(f"| pages sent | {whole_served[200]} | {served[200]} |")
    print(f"| pages sent twice / in flight at most | | {twice} / {bound} |")
    print(f"| kills (fetch processes stopped) | | {kills} ({fetch_kills}) in {runs} runs |")
    ok = not missing and not extra and not any(differ.values()) and twice <= bound
    ok = ok and last.returncode == 0
    print(f"\n{'OK' if ok else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
