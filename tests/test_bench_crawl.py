"""``benchmarks/bench_crawl.py --quick --shape docs`` runs: both crawlers crawl the whole small
doc-shaped site, the re-crawl gets 304s for the pages left unchanged and 200s for the others,
and the table is printed. It measures nothing here."""

from __future__ import annotations

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
    assert "| first crawl / plain Spider asking every page again (per round) |" in out
