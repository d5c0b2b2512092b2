"""Progress of long jobs: a tqdm bar on a terminal, a periodic log line elsewhere.

:class:`Progress` counts work. When its stream (standard error by default) is a terminal it shows a
`tqdm <https://tqdm.github.io/>`_ bar there; when it is not (a log file, a pipe, a CI job) it logs a
plain INFO line on the ``nutchy.progress`` logger at most every *log_interval* seconds (count,
percentage, rate), and a last one when the work ends if it ran that long, so a job writing to a log
shows it is alive without filling the log. Callers need not check which.

>>> import io
>>> with Progress("scan", stream=io.StringIO()) as progress:
...     progress.advance(10)
>>> progress.count
10
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from typing import Self

    from tqdm import tqdm

__all__ = ["Progress"]

logger = logging.getLogger(__name__)

# Reading the clock or updating the bar costs more than counting: look every this many units.
_CHECK_EVERY = 1000


@functools.cache
def _bar_class() -> type[tqdm]:  # type: ignore[type-arg]
    """tqdm without its monitor thread (the bar is updated often enough from the job itself).
    Imported with the first bar: a job that logs its progress (no terminal: a crawl's log, a
    pipe) does without tqdm and the ``importlib.metadata`` it imports, 20-25 ms of every
    ``nutchy`` command's start."""
    from tqdm import tqdm

    class _Bar(tqdm):  # type: ignore[type-arg]
        monitor_interval = 0

    return _Bar


class Progress:
    """Count work; show the count, the rate and, given *total*, a percentage.

    *label* names the work, *unit* what is counted. *total*, when known, is where the work ends,
    in the units of :meth:`advance`'s *position* (bytes of seed files, for instance) or, without
    positions, in counted units. *enabled* chooses the terminal bar (true) or the log lines
    (false); by default the bar is shown when *stream* is a terminal. *interval* is the least time
    between two redraws of the bar and *log_interval* between two log lines, in seconds; *clock* is
    the time source of the log lines (for tests). The clock is read every *check_every* units
    only, so counting stays cheap; slow work (one page fetched at a time) gives 1.
    """

    def __init__(
        self,
        label: str,
        *,
        unit: str = "rows",
        total: int | None = None,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        interval: float = 0.25,
        log_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        check_every: int = _CHECK_EVERY,
    ) -> None:
        self.label = label
        self.unit = unit
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.interval = interval
        self.log_interval = log_interval
        self.clock = clock
        self.check_every = max(1, check_every)
        self.count = 0
        #: How far the work is, for the percentage; the count unless positions are given.
        self.position: int | None = None
        self._start = clock()
        self._next_log = self._start + log_interval
        self._check_at = 0
        self._bar: tqdm | None = None  # type: ignore[type-arg]
        if enabled:
            self._bar = _bar_class()(
                desc=label,
                total=total,
                unit=f" {unit}",
                unit_scale=True,
                file=self.stream,
                mininterval=interval,
                delay=interval,
                dynamic_ncols=True,
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def advance(self, n: int = 1, position: int | None = None) -> None:
        """Add *n* to the count and note *position*; show the progress if it is time to."""
        self.count += n
        if position is not None:
            self.position = position
        if self.count >= self._check_at:
            self._check_at = self.count + self.check_every
            self._show()

    def close(self) -> None:
        """Show the final count: end the bar, or log a last line if the work took an interval."""
        if self._bar is not None:
            self._show()
            self._bar.close()
            self._bar = None
        elif not self.enabled:
            now = self.clock()
            if now - self._start >= self.log_interval:
                self._log(now)
            self._next_log = float("inf")

    def _show(self) -> None:
        bar = self._bar
        if bar is None:
            if not self.enabled:
                now = self.clock()
                if now >= self._next_log:
                    self._next_log = now + self.log_interval
                    self._log(now)
            return
        if self.position is None:
            bar.update(self.count - bar.n)
            return
        if bar.unit != "":
            # Positions (bytes read, say) measure the bar; the count goes after it.
            bar.unit = ""
            bar.bar_format = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"
        bar.set_postfix_str(f"{self.count:,} {self.unit}", refresh=False)
        bar.update(self.position - bar.n)

    def _log(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        text = f"{self.label}: {self.count:,} {self.unit}"
        if self.total:
            done = self.count if self.position is None else self.position
            text += f" ({min(100.0, 100.0 * done / self.total):.0f}%)"
        text += f", {self.count / elapsed:,.0f} {self.unit}/s"
        logger.info("%s", text)
