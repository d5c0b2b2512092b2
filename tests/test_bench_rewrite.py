"""``benchmarks/bench_rewrite.py`` runs on a few rows and prints its table. It measures nothing
here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_rewrite.py"


def test_small_run_prints_both_writes_for_each_text_size():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "200", "--text", "100", "5000"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(
        r"^\| (304 headers|updatedb inlinks) \| ([\d,]+) B \| [\d.]+ \| ([\d.]+)x \|$",
        done.stdout,
        re.MULTILINE,
    )
    assert [(name, size) for name, size, _ in rows] == [
        ("304 headers", "100"),
        ("304 headers", "5,000"),
        ("updatedb inlinks", "100"),
        ("updatedb inlinks", "5,000"),
    ]
    assert rows[0][2] == rows[2][2] == "1.00"  # each write's smallest text is its unit
