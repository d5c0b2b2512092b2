"""``benchmarks/bench_hbase.py --quick`` runs: updatedb by one writer and by two at once, with this
checkout's client and the old one, and generate with 1 and 4 tasks, through happybase to the
HBase test server in its own process; the tables are printed and the equality checks ran. It
measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_hbase.py"


@pytest.mark.slow
def test_quick_run_prints_the_tables_and_checks_the_tables_equal():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "FAILED" not in out
    # The runs of this checkout: 1,000 targets a batch, both batches, by one writer and by two.
    assert re.search(r"^\| 1 writer, both \(sum\) \| 2,000 \| 100 \|", out, re.MULTILINE)
    assert re.search(r"^\| 2 writers at once \| 2,000 \| 100 \|", out, re.MULTILINE)
    # Two tables built and updated apart, then compared row by row: every row, and the shared
    # targets (half of each batch's) hold both batches' shares.
    assert (
        "Equality check: the table of 2 writers at once equals the table of 1 writer:"
        " 1,600 rows compared" in out
    )
    assert "; 500 targets hold both batches' shares." in out
    # The server counted the calls by kind: one writer's writes went in one mutateRowsTs call per
    # modify call (1,000 targets, then 50 pages, for each batch; two at once may cut a chunk
    # short while they wait for each other), and its checkAndPut calls are the leases' (64 a
    # run), not one a row.
    now = section(out, "### updatedb, this checkout")
    assert re.search(
        r"^\| mutateRowsTs \| 0\.0020 \(4\) \| 0\.00\d\d \(\d\) \|$", now, re.MULTILINE
    )
    assert re.search(
        r"^\| checkAndPut \| 0\.0640 \(128\) \| 0\.\d{4} \(\d+\) \|$", now, re.MULTILINE
    )
    # generate: the same 500 rows marked by one task and by four.
    assert "Batch check: -numTasks 4 marked the same 500 rows as -numTasks 1 (500)." in out
    assert re.search(
        r"^\| generate -topN 500 -numTasks 4 \| 10,000 \| 1,000 \| 500 \|", out, re.MULTILINE
    )
    # The old client ran whenever its commit is in this checkout's history: two checkAndPut a
    # target row (take and release its lock), and its tables compared as well.
    history = subprocess.run(
        ["git", "-C", str(SCRIPT.parent), "cat-file", "-e", "fdd6be4^{commit}"], check=False
    )
    if history.returncode == 0:
        before = section(out, "### updatedb, before (client of commit fdd6be4)")
        assert re.search(
            r"^\| checkAndPut \| 2\.\d{4} \([\d,]+\) \| 2\.\d{4} \(", before, re.MULTILINE
        )
        assert "Equality check: the table of 2 writers at once equals" in before
    else:
        assert "### updatedb, before: commit fdd6be4 is not in this checkout; skipped" in out


def section(out: str, title: str) -> str:
    """The lines of *out* from *title* to the next title."""
    assert title in out, out
    return out.split(title, 1)[1].split("\n###", 1)[0]
