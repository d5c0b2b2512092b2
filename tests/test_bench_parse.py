"""``benchmarks/bench_parse.py`` runs on a few pages of each shape and of a folder, and prints a
row a set in which both parses found the pages' links. It measures nothing here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_parse.py"


def test_a_small_run_prints_a_row_per_set(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.html").write_text(
        '<html><title>One</title><a href="two.html">two</a> <a href="/three">3</a></html>',
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--pages", "20", "--shaped", "2", "--repeat", "1"),
            *("--html", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
        for line in done.stdout.splitlines()
        if re.match(r"\| (docs|reference|news|forum|html) \|", line)
    }
    assert list(rows) == ["docs", "reference", "news", "forum", "html"]
    assert [rows[name][0] for name in rows] == ["20", "2", "2", "2", "1"]
    # outlinks a page (nutchy) and links a page (LinkExtractor): the same links found
    assert rows["html"][2] == rows["html"][6] == "2"
    assert all(
        float(cells[2]) > 5 and float(cells[6]) > 5
        for name, cells in rows.items()
        if name != "html"
    )
    assert "load" in done.stdout and "libxml2" in done.stdout
