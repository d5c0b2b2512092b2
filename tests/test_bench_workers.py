"""``benchmarks/bench_workers.py --quick`` runs: every crawl of it fetches each URL of its batch
once and leaves every row fetched (the script checks both), and the table is printed. It
measures nothing here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_workers.py"


@pytest.mark.slow
def test_quick_run_fetches_every_batch_once_and_prints_the_table(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "| Redis vs local, 1 worker, 50 pages (run 1) |" in out
    assert "| 2 workers vs 1, Redis, 50 pages (run 1) |" in out
    for n in ("local frontier", "1 worker", "2 workers", "3 workers"):
        assert f"| 10 hosts x 3 pages, delay 0.3 s, {n} (run 1) |" in out
    assert out.count("smallest gap 0.") == 4
