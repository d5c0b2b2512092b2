"""``benchmarks/bench_crawl.py --quick --shape docs`` runs: both crawlers crawl the whole small
doc-shaped site, the re-crawl gets 304s for the pages left unchanged and 200s for the others,
and the table is printed. It measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_crawl.py"
VARIANT = ("--variant", "nutchy crawl")  # one nutchy variant keeps the run under 15 s


@pytest.mark.slow
def test_quick_run_crawls_every_page_on_both_sides(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--shape",
            "docs",
            "--data",
            str(tmp_path),
            *VARIANT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # The script asserts that the server sent each of the 60 pages once to each crawler, that
    # nutchy's table holds them all as fetched, that the re-crawl was answered with 304s but for
    # the pages changed before it (200s), and that the floor (a plain Spider asking every page
    # again) got a 304 for each of the 60.
    assert "plain 60 pages in" in out
    assert "nutchy crawl: 60 pages in" in out
    assert "| pages/s, ratio to plain (per round) |" in out
    assert "| first crawl / re-crawl (per round) |" in out
    assert "every page asked again, 304s, in" in out
    assert "# site (docs): 60 pages on 5 hosts" in out
    assert "| CPU time (user + sys) of the process tree, s |" in out
    assert "| first crawl CPU / re-crawl CPU (per round) |" in out
    assert "| re-crawl / plain Spider asking every page again (per round) |" in out
    # memory: the tree's PSS beside its RSS, each kind of process's own peak, and the floor
    assert "| peak PSS of the process tree, MB (shared pages counted once) |" in out
    peaks = next(line for line in out.splitlines() if line.startswith("| each process's peak"))
    # nutchy crawl fetches in its own process (NUTCH_CRAWL_FETCH_IN_PROCESS): no fetch child
    assert all(kind in peaks for kind in ("nutchy ", "nutchy._parsework "))
    assert "nutchy._fetchrun " not in peaks
    at_peak = next(line for line in out.splitlines() if line.startswith("| RSS of each kind"))
    assert re.search(r"nutchy \d+", at_peak), at_peak
    # each kind of process's CPU time, which says where the second core goes
    cpus = next(line for line in out.splitlines() if line.startswith("| ... of each kind"))
    spent = {
        kind: float(seconds)
        for kind, seconds in re.findall(r"(nutchy(?:\.\w+)?) (\d+\.\d)", cpus.split("|")[-2])
    }
    assert set(spent) >= {"nutchy", "nutchy._parsework"}, cpus
    assert sum(spent.values()) > 0, cpus
    floor = next(line for line in out.splitlines() if line.startswith("| memory floor, MB"))
    assert floor.rstrip(" |").split("|")[-1].strip().isdigit(), floor
    assert "| first crawl / plain Spider asking every page again (per round) |" in out
    # The re-crawl with the sitemaps: the 10 pages changed (10% of 60: numbers 0-9), each as a
    # 200, one sitemap a host, no 304 (the script asserts it), beside the blind re-crawl.
    assert "re-crawl with the sitemaps: 10 pages (200), 5 sitemaps," in out
    assert "| ... requests the server answered: pages (200), 304s, sitemaps, robots.txt |" in out
    assert "| first crawl / re-crawl with the sitemaps (per round) |" in out
    assert "| first crawl CPU / re-crawl with the sitemaps CPU (per round) |" in out
    # The bytes the server sent, and the first crawl's over each re-crawl's.
    for label in (
        "bytes the server sent, first crawl, MB",
        "first crawl bytes / re-crawl asking every page bytes (per round)",
        "first crawl bytes / re-crawl with the sitemaps bytes (per round)",
    ):
        assert f"| {label} |" in out, label


def _bench():
    """benchmarks/bench_crawl.py as a module (it is a script, not a package module)."""
    import importlib.util

    if "bench_crawl" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_crawl", SCRIPT)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_crawl"] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["bench_crawl"]


def test_profile_summary_gives_each_process_its_samples_by_part(tmp_path):
    bench = _bench()
    rate = bench.PROFILE_RATE
    parent = 'process 10:"python -m nutchy crawl seeds.txt"'
    fetch = 'process 11:"python -m nutchy._fetchrun -rounds 5 {}"'
    parse = 'process 12:"python -m nutchy._parsework"'
    stacks = [
        (parent, "main (nutchy/cli.py)", "updatedb (nutchy/jobs/updatedb.py)", rate * 2),
        (
            parent,
            "<module> (nutchy/cli.py)",
            "_find_and_load (<frozen importlib._bootstrap>)",
            rate,
        ),
        (
            parent,
            fetch,
            "main (nutchy/_fetchrun.py)",
            "NutchScheduler.next_request (nutchy/scheduler.py)",
            rate * 3,
        ),
        # an idle thread pool worker, which py-spy sometimes counts: left out
        (
            parent,
            fetch,
            "Thread.run (threading.py)",
            "_worker (concurrent/futures/thread.py)",
            rate * 7,
        ),
        (
            parent,
            fetch,
            parse,
            "serve (nutchy/_parsework.py)",
            "_parse_html (nutchy/core/parse.py)",
            rate // 2,
        ),
    ]
    raw = tmp_path / "samples.txt"
    lines = [";".join(stack[:-1]) + f" {stack[-1]}" for stack in stacks]
    raw.write_text("\n".join([*lines, "a line that is no sample"]))
    samples = bench.read_samples([raw])
    assert {kind: sum(c.values()) for kind, c in samples.items()} == {
        "the command's own process": rate * 3,
        "fetch process": rate * 3,
        "parse process": rate // 2,
    }
    text = bench.profile_summary("re-crawl", [raw])
    assert "### the command's own process: 3.00 s of samples" in text
    assert "by part: updatedb 2.00, start-up: imports 1.00" in text
    assert "### fetch process: 3.00 s of samples" in text
    assert "by part: scheduler 3.00" in text
    assert "### parse process: 0.50 s of samples" in text
    assert "by part: parse (core) 0.50" in text
    assert "3.00 s  NutchScheduler.next_request (nutchy/scheduler.py)" in text


@pytest.mark.slow
def test_profile_samples_every_process_of_a_crawl_and_a_recrawl(tmp_path):
    profiles = tmp_path / "profiles"
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--shape", "docs", "--pages", "60", "--rounds", "0"),
            *("--data", str(tmp_path), "--profile", str(profiles), *VARIANT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "## floor: a plain Spider asking every page again" in out
    # The first crawl and the re-crawl (10% of the pages changed), each with the command's own
    # process (inject, generate, updatedb, and the fetch: NUTCH_CRAWL_FETCH_IN_PROCESS) and the
    # parse process.
    for phase in ("first", "recrawl"):
        section = out.split(f"## nutchy crawl: {phase}\n", 1)[1].split("\n## ", 1)[0]
        assert "### fetch process" not in section
        assert "Scrapy downloader" in section.split("### the command's own process", 1)[1]
        for kind in ("the command's own process", "parse process"):
            assert re.search(rf"### {kind}: \d+\.\d\d s of samples", section), (phase, kind, out)
        if phase == "first":
            # The re-crawl's updatedb of 60 pages is short (0.1 s of samples or less), and one
            # run in eight had no sample of it; the first crawl's, over its rounds, has more.
            assert "updatedb" in section.split("### the command's own process", 1)[1]
    written = sorted(p.name for p in profiles.iterdir())
    assert written == ["floor.txt", "nutchy-crawl-first-0.txt", "nutchy-crawl-recrawl-0.txt"]
