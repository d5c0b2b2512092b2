"""``benchmarks/bench_scan.py`` runs on a few rows of the HBase store and prints its table: every
reader reads every row, and each job reads the rows it should. It measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_scan.py"


@pytest.mark.slow
def test_small_run_reads_every_row_with_every_reader():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "300", "--text", "50", "--store", "hbase"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(
        r"^\| (\w+) \| ([\d,]+) \| ([\w -]+?) \| ([\w ]+) \|", done.stdout, re.MULTILINE
    )
    assert rows == [
        ("hbase", "300", "store", "job"),
        ("hbase", "300", "store", "whole rows"),
        ("hbase", "300", "happybase", "job"),
        ("hbase", "300", "happybase", "whole rows"),
        ("hbase", "300", "updatehostdb", "its own"),
        ("hbase", "300", "index -all", "its own"),
        ("hbase", "300", "dedup", "its own"),
    ], done.stdout
