"""``benchmarks/bench_crawl.py --quick`` runs: both crawlers crawl the whole small site, the
re-crawl gets only 304s, and the table is printed. It measures nothing here."""

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
        [sys.executable, str(SCRIPT), "--quick", "--data", str(tmp_path), *VARIANT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # The script asserts that the server sent each of the 60 pages once to each crawler, that
    # nutchy's table holds them all as fetched, that the re-crawl was answered with 304s, and
    # that the floor (a plain Spider asking every page again) got a 304 for each of the 60.
    assert "plain 60 pages in" in out
    assert "nutchy crawl: 60 pages in" in out
    assert "| pages/s, ratio to plain (per round) |" in out
    assert "| first crawl / re-crawl (per round) |" in out
    assert "every page asked again, 304s, in" in out
    assert "| re-crawl / plain Spider asking every page again (per round) |" in out
    assert "| first crawl / plain Spider asking every page again (per round) |" in out
