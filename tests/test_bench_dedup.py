"""``benchmarks/bench_dedup.py`` runs on a few rows, spilling sorted runs, and prints its table: the first run marks the duplicates, the second finds nothing to change. It
measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_dedup.py"


@pytest.mark.slow
def test_small_run_marks_then_changes_nothing():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "300", "--sort-rows", "70"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(
        r"^\| (first|again) \| (\d+) \| (\d+) \| (\d+) \| [\d.]+ \| [\d,]+ \| \d+ \| (\d+) \|",
        done.stdout,
        re.MULTILINE,
    )
    # 10% of the pages repeat another's signature; runs of 70 entries: 5 of them.
    assert rows == [("first", "300", "30", "30", "5"), ("again", "300", "0", "0", "5")]
