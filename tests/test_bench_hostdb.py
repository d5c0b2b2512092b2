"""``benchmarks/bench_hostdb.py`` runs on a few rows and prints its table: every row read, every
host written. It measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_hostdb.py"


@pytest.mark.slow
def test_small_run_reads_every_row_and_writes_every_host():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "300,600", "--hosts", "7"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(
        r"^\| ([\d,]+) \| [\d.]+ \| [\d.]+ \| [\d,]+ \| (\d+) \| \d+ \|$", done.stdout, re.MULTILINE
    )
    assert rows == [("300", "7"), ("600", "7")], done.stdout
