"""Indexing into the embedded index, memory on a large table, and search latency.

    python benchmarks/bench_index.py                # 4,000 pages x 40 links; 10,000 / 100,000 rows
    python benchmarks/bench_index.py --quick        # a small smoke run

**The site table** (``--pages`` pages, ``--links`` links each): the link graph of
``bench_crawl.py``'s site generator (a *links*-ary tree from page 0, then random pages), on
``--hosts`` hosts, each page about 300 words of text drawn from a Zipf-distributed vocabulary of
5,000 made-up words, and each link's anchor text "Page j about WORD". It is not crawled (a crawl
is ``bench_crawl.py``'s subject): each page's HTML is written to the table as a fetched row of
one batch, then ``nutchy parse -all`` and ``nutchy updatedb -all`` run on it, so titles, texts,
signatures, scores and inlinks with their anchors are what a crawl would have written.

**Indexing**: ``nutchy index -all`` into the embedded index (a new folder), as a command of its
own: its wall time (process start to exit), the job's own time (from its summary line), the
documents per second of each, and the peak RSS of the process.

**Search**: 100 queries (one, two or three words of the vocabulary, a third of them phrases or
``title:`` queries), seeded: the median and 95th percentile of ``EmbeddedIndex.search`` on an
index opened once, and of open + search, what ``nutchy search`` does after Python has started;
then ``nutchy search`` itself run 10 times: its wall time (Python and imports included) and the
time it prints.

**Streaming** (``--stream-rows``): two tables of pre-parsed rows of the same shape (about 2 KB of
text, 10 inlinks with anchors, written directly, no parse), ``nutchy index -all -rebuild`` on
each, then ``nutchy index -all`` again on the larger (every document replaced). Peak memory is
given whole (RSS), and split into the process's anonymous memory, which should not grow with the
row count once SQLite's page cache (64 MB) is full, and the index files tantivy maps, page cache
that grows with the index and that the kernel takes back under pressure. Both tables are larger
than that cache, so the comparison is of like with like.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO))

from bench_crawl import page_path, site_links

BATCH = "1700000000-1"
NOW = 1_700_000_000_000
VOCABULARY = 5000


def vocabulary(seed: int) -> list[str]:
    rng = random.Random(seed)
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        syllables = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


def zipf_picker(words: list[str], rng: random.Random) -> list[str]:
    """A pool of words in which word *k* appears about 1/k as often as the first."""
    pool: list[str] = []
    for k, word in enumerate(words, 1):
        pool.extend([word] * max(1, 2000 // k))
    rng.shuffle(pool)
    return pool


def settings_args(crawl: Path) -> list[str]:
    return ["-s", f"NUTCH_CRAWL_DIR={crawl}"]


def build_site_table(crawl: Path, pages: int, links: int, hosts: int, seed: int) -> float:
    """Write the site's pages as fetched rows, parse and update them; return the seconds."""
    from nutchy.cli import main
    from nutchy.config import load_settings
    from nutchy.core.status import CrawlStatus, Mark
    from nutchy.core.urls import reverse_url
    from nutchy.core.webpage import WebPage
    from nutchy.store import open_table

    started = time.monotonic()
    rng = random.Random(seed)
    words = vocabulary(seed)
    pool = zipf_picker(words, rng)
    graph = site_links(pages, links, seed)
    names = [f"127.0.0.{2 + h}" for h in range(hosts)]

    def url(j: int) -> str:
        return f"http://{names[j % hosts]}:8000{page_path(j)}"

    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl)}, project=False)
    fields = [
        "status", "fetch_time", "fetch_interval", "content", "content_type", "markers", "score",
        "base_url",
    ]  # fmt: skip
    with open_table(settings) as table:
        table.create()
        with table.writer() as writer:
            for i, targets in enumerate(graph):
                items = "".join(
                    f'<li><a href="{url(j)}">Page {j} about {rng.choice(pool)}</a></li>'
                    for j in targets
                )
                text = "</p><p>".join(
                    " ".join(rng.choice(pool) for _ in range(100)) for _ in range(3)
                )
                title = " ".join(rng.choice(pool) for _ in range(3)).title()
                html = (
                    f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>'
                    f"</head><body><h1>{title}</h1><p>{text}</p><ul>{items}</ul></body></html>"
                )
                page = WebPage(
                    reverse_url(url(i)),
                    status=CrawlStatus.FETCHED,
                    fetch_time=NOW,
                    fetch_interval=2_592_000,
                    content=html.encode(),
                    content_type="text/html; charset=utf-8",
                    markers={Mark.GENERATE: BATCH, Mark.FETCH: BATCH, Mark.DISTANCE: "1"},
                    score=1.0,
                    base_url=url(i),
                )
                writer.put(page, fields)
    quiet = [*settings_args(crawl), "-s", "LOG_LEVEL=WARNING"]
    for verb in ("parse", "updatedb"):
        if main([verb, BATCH, *quiet]) != 0:
            raise RuntimeError(f"nutchy {verb} failed")
    return time.monotonic() - started


def build_flat_table(crawl: Path, rows: int, seed: int) -> float:
    """Write *rows* pre-parsed rows (about 2 KB of text, 10 inlinks each); return the seconds."""
    from nutchy.config import load_settings
    from nutchy.core.status import CrawlStatus, Mark, ParseStatus, ParseStatusMajor
    from nutchy.core.urls import reverse_url
    from nutchy.core.webpage import WebPage
    from nutchy.store import open_table

    started = time.monotonic()
    rng = random.Random(seed)
    pool = zipf_picker(vocabulary(seed), rng)
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl)}, project=False)
    fields = [
        "status", "fetch_time", "prev_fetch_time", "title", "text", "content_type",
        "parse_status", "signature", "score", "inlinks", "markers",
    ]  # fmt: skip
    ok = ParseStatus(ParseStatusMajor.SUCCESS)
    with open_table(settings) as table:
        table.create()
        with table.writer() as writer:
            for i in range(rows):
                text = " ".join(rng.choice(pool) for _ in range(300))
                inlinks = {
                    f"http://127.0.0.{2 + k % 20}/p/{rng.randrange(rows)}.html": (
                        f"Page {i} about {rng.choice(pool)}"
                    )
                    for k in range(10)
                }
                page = WebPage(
                    reverse_url(f"http://127.0.0.{2 + i % 20}/p/{i}.html"),
                    status=CrawlStatus.FETCHED,
                    fetch_time=NOW + 86_400_000,
                    prev_fetch_time=NOW,
                    title=f"Page {i} {rng.choice(pool)}",
                    text=text,
                    content_type="text/html",
                    parse_status=ok,
                    signature=i.to_bytes(16, "big"),
                    score=rng.random(),
                    inlinks=inlinks,
                    markers={Mark.UPDATEDB: BATCH},
                )
                writer.put(page, fields)
    return time.monotonic() - started


def _memory(pid: int) -> tuple[int, int]:
    """RssAnon and RssFile of *pid* (bytes): its own memory, and the files it maps."""
    found = {"RssAnon:": 0, "RssFile:": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] in found:
                    found[parts[0]] = int(parts[1]) * 1024
    except OSError:
        pass
    return found["RssAnon:"], found["RssFile:"]


def index_all(crawl: Path, log: Path, *, rebuild: bool = True) -> dict[str, float]:
    """``nutchy index -all [-rebuild]``: wall s, the job's s, documents, and the peaks (MB) of
    the process's RSS, of its anonymous memory and of the files it maps, sampled every 0.1 s."""
    command = [sys.executable, "-m", "nutchy.cli", "index", "-all", *settings_args(crawl)]
    if rebuild:
        command.append("-rebuild")
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, cwd=crawl.parent, env=env, stdout=out, stderr=out)
        rss = anon = mapped = 0
        while process.poll() is None:
            a, f = _memory(process.pid)
            rss, anon, mapped = max(rss, a + f), max(anon, a), max(mapped, f)
            time.sleep(0.1)
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"{command} exited with {process.returncode}; see {log}")
    summary = [line for line in log.read_text().splitlines() if line.startswith("nutchy index:")]
    match = re.search(r"(\d+) indexed, .* in ([\d.]+) s", summary[-1])
    if match is None:
        raise RuntimeError(f"no summary line: {summary[-1]!r}")
    return {
        "wall": wall,
        "job": float(match.group(2)),
        "docs": int(match.group(1)),
        "rss": rss / 2**20,
        "anon": anon / 2**20,
        "mapped": mapped / 2**20,
    }


def queries(seed: int, n: int) -> list[str]:
    rng = random.Random(seed + 7)
    words = vocabulary(seed)
    common = words[:200]  # the Zipf head: words many pages have
    found = []
    for k in range(n):
        picked = [rng.choice(common if rng.random() < 0.5 else words) for _ in range(1 + k % 3)]
        if k % 3 == 1 and len(picked) > 1:
            found.append('"' + " ".join(picked) + '"')
        elif k % 3 == 2:
            found.append(f"title:{picked[0]} " + " ".join(picked[1:]))
        else:
            found.append(" ".join(picked))
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def bench_search(crawl: Path, seed: int, n: int, cli_runs: int, log: Path) -> dict[str, float]:
    from nutchy.index.embedded import EmbeddedIndex

    asked = queries(seed, n)
    folder = crawl / "index"
    index = EmbeddedIndex(folder)
    hits = 0
    searched = []
    for query in asked:
        started = time.perf_counter()
        result = index.search(query, 10)
        searched.append(time.perf_counter() - started)
        hits += len(result.hits) > 0
    opened = []
    for query in asked:
        started = time.perf_counter()
        EmbeddedIndex(folder).search(query, 10)
        opened.append(time.perf_counter() - started)
    walls, printed = [], []
    for query in asked[:cli_runs]:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "nutchy.cli", "search", query, *settings_args(crawl)],
            capture_output=True,
            text=True,
            check=False,
            cwd=crawl.parent,
            env={k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"},
        )
        walls.append(time.monotonic() - started)
        with log.open("a") as f:
            f.write(f"$ nutchy search {query!r}\n{done.stdout}{done.stderr}")
        match = re.search(r"\((\d+) ms\)", done.stderr)
        if done.returncode not in (0, 1) or match is None:
            raise RuntimeError(f"nutchy search {query!r}: {done.stderr}")
        printed.append(int(match.group(1)) / 1000)
    return {
        "queries": len(asked),
        "with_hits": hits,
        "median": statistics.median(searched),
        "p95": percentile(searched, 0.95),
        "open_median": statistics.median(opened),
        "open_p95": percentile(opened, 0.95),
        "cli_runs": len(walls),
        "cli_wall_median": statistics.median(walls),
        "cli_printed_median": statistics.median(printed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--links", type=int, default=40)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--stream-rows", type=int, nargs=2, default=[30_000, 100_000])
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--cli-runs", type=int, default=10, help="runs of nutchy search itself")
    parser.add_argument("--quick", action="store_true", help="300 pages, 1,000/3,000 rows")
    parser.add_argument("--keep", type=Path, help="build the tables in this folder and keep it")
    args = parser.parse_args(argv)
    if args.quick:
        args.pages, args.links, args.queries, args.stream_rows = 300, 10, 20, [1000, 3000]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-index-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "commands.log"
    print(
        f"# bench_index {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.python_version()},"
        f" {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    try:
        site = work / "site"
        built = build_site_table(site, args.pages, args.links, args.hosts, args.seed)
        print(f"site table: {args.pages} pages x {args.links} links built in {built:.1f} s")
        indexed = index_all(site, log)
        print(
            "\n| phase | documents | wall s | docs/s (wall) | job s | docs/s (job) | peak RSS MB"
            " | peak anonymous MB | peak mapped files MB |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        print(_index_row("site: nutchy index -all", indexed), flush=True)
        rows = []
        for count in args.stream_rows:
            flat = work / f"flat-{count}"
            build_flat_table(flat, count, args.seed)
            result = index_all(flat, log)
            rows.append(result)
            print(_index_row(f"{count:,} rows: nutchy index -all -rebuild", result), flush=True)
        again = index_all(flat, log, rebuild=False)
        print(_index_row(f"{count:,} rows again: nutchy index -all", again), flush=True)
        growth = rows[-1]["anon"] / rows[0]["anon"]
        print(
            f"\npeak anonymous memory, {args.stream_rows[-1]:,} rows / {args.stream_rows[0]:,}"
            f" rows: {growth:.2f}x"
        )
        found = bench_search(site, args.seed, args.queries, args.cli_runs, log)
        print(
            f"\n| search ({found['queries']} queries, {found['with_hits']} with hits) | median ms | p95 ms |"
        )
        print("|---|---|---|")
        print(
            f"| EmbeddedIndex.search, index open | {found['median'] * 1000:.1f} | {found['p95'] * 1000:.1f} |"
        )
        print(
            f"| open + search | {found['open_median'] * 1000:.1f} | {found['open_p95'] * 1000:.1f} |"
        )
        print(
            f"| nutchy search, time it prints ({found['cli_runs']:.0f} runs) | {found['cli_printed_median'] * 1000:.0f} | |"
        )
        print(
            f"| nutchy search, process wall time ({found['cli_runs']:.0f} runs) | {found['cli_wall_median'] * 1000:.0f} | |"
        )
        print(
            json.dumps({"index": indexed, "stream": rows, "again": again, "search": found}),
            file=sys.stderr,
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _index_row(name: str, r: dict[str, float]) -> str:
    return (
        f"| {name} | {r['docs']:,.0f} | {r['wall']:.1f} | {r['docs'] / r['wall']:,.0f} |"
        f" {r['job']:.1f} | {r['docs'] / r['job']:,.0f} | {r['rss']:.0f} | {r['anon']:.0f} |"
        f" {r['mapped']:.0f} |"
    )


if __name__ == "__main__":
    sys.exit(main())
