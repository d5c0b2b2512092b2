"""Progress of long jobs: a tqdm bar on a terminal, periodic INFO lines when the output is a log."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import textwrap

import pytest

from nutchy.progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_it_logs_a_line_every_interval_and_a_last_one(caplog):
    caplog.set_level(logging.INFO, logger="nutchy.progress")
    stream = io.StringIO()
    ticks = iter(range(100))  # each look at the clock is a second later
    with Progress(
        "scan", stream=stream, total=4000, log_interval=2.5, clock=lambda: float(next(ticks))
    ) as progress:
        for _ in range(4000):
            progress.advance()
    assert progress.count == 4000
    assert stream.getvalue() == ""
    assert [(r.name, r.levelno) for r in caplog.records] == [("nutchy.progress", logging.INFO)] * 2
    # the clock is read at 0 (start), 1, 2, 3, 4 (every 1000 rows) and 5 (close)
    assert caplog.messages == [
        "scan: 2,001 rows (50%), 667 rows/s",
        "scan: 4,000 rows (100%), 800 rows/s",
    ]


def test_off_a_terminal_a_short_job_logs_nothing(caplog):
    caplog.set_level(logging.INFO, logger="nutchy.progress")
    with Progress("scan", stream=io.StringIO(), log_interval=60) as progress:
        progress.advance(5000)
    assert progress.count == 5000
    assert caplog.messages == []


def test_log_lines_count_positions_for_the_percentage(caplog):
    caplog.set_level(logging.INFO, logger="nutchy.progress")
    ticks = iter(range(100))
    progress = Progress(
        "inject", unit="lines", total=1000, enabled=False, log_interval=1,
        clock=lambda: float(next(ticks)),
    )
    progress.advance(10, position=250)
    progress.close()
    assert caplog.messages == ["inject: 10 lines (25%), 10 lines/s", "inject: 10 lines (25%), 5 lines/s"]


def test_on_a_terminal_it_draws_a_tqdm_bar(caplog):
    caplog.set_level(logging.INFO, logger="nutchy.progress")
    stream = FakeTerminal()
    with Progress("scan", stream=stream, total=4000, interval=0) as bar:
        for _ in range(4000):
            bar.advance()
    text = stream.getvalue()
    assert text.startswith("\rscan: ")
    assert "25%" in text
    assert "100%" in text
    assert "4.00k/4.00k" in text
    assert text.endswith("\n")
    assert caplog.messages == []


def test_on_a_terminal_positions_fill_the_bar_and_the_count_follows_it():
    stream = FakeTerminal()
    with Progress("inject", unit="lines", total=2000, stream=stream, interval=0) as bar:
        bar.advance(1500, position=500)
        bar.advance(1500, position=2000)
    text = stream.getvalue()
    assert "inject:  25%|" in text
    assert "1,500 lines]" in text
    assert "inject: 100%|" in text
    assert "3,000 lines]" in text.splitlines()[-1]


@pytest.mark.parametrize("total", [None, 100])
def test_on_a_terminal_a_short_job_draws_nothing(total):
    stream = FakeTerminal()
    with Progress("scan", stream=stream, total=total, interval=60) as bar:
        bar.advance(50)
    assert bar.count == 50
    assert stream.getvalue() == ""


def test_tqdm_is_imported_with_the_first_bar_only():
    """The nutchy command and a job that logs its progress (no terminal) do without tqdm; the
    first bar imports it, and its bar has no monitor thread."""
    program = textwrap.dedent(
        """
        import io, sys
        import nutchy.cli
        from nutchy.progress import Progress

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        with Progress("scan", stream=io.StringIO()) as logged:
            logged.advance(5)
        print("logged", "tqdm" in sys.modules)
        with Progress("scan", stream=Terminal(), interval=0) as bar:
            bar.advance(5)
            print("bar", "tqdm" in sys.modules, type(bar._bar).monitor_interval)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["logged False", "bar True 0"]
