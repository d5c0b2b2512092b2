"""A progress line for long jobs, shown only on a terminal.

:class:`Progress` redraws one line on *stream* (standard error by default) a few times a second
while a job runs, and ends it with a newline. When the stream is not a terminal (a log file, a pipe,
a CI job) it writes nothing at all, so logs stay clean; callers need not check.

>>> import io
>>> with Progress("scan", stream=io.StringIO()) as progress:
...     progress.advance(10)
>>> progress.count
10
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from typing import Self

__all__ = ["Progress"]


class Progress:
    """Count work and, on a terminal, show the count, the rate and, given *total*, a percentage.

    *label* names the work, *unit* what is counted. *total*, when known, is where the work ends,
    in the units of :meth:`advance`'s *position* (bytes of seed files, for instance) or, without
    positions, in counted units. *enabled* forces the line on or off; by
    default it is shown when *stream* is a terminal. *interval* is the least time between two
    redraws, in seconds, and *clock* the time source (for tests).
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
        clock: Callable[[], float] = time.monotonic,
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
        self.clock = clock
        self.count = 0
        #: How far the work is, for the percentage; the count unless positions are given.
        self.position: int | None = None
        self._start = clock()
        self._next_draw = self._start + interval
        self._drawn = False
        # Reading the clock costs more than counting: look at it every few thousand units.
        self._check_at = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def advance(self, n: int = 1, position: int | None = None) -> None:
        """Add *n* to the count and note *position*; redraw the line if it is time to."""
        self.count += n
        if position is not None:
            self.position = position
        if self.enabled and self.count >= self._check_at:
            self._check_at = self.count + 1000
            now = self.clock()
            if now >= self._next_draw:
                self._next_draw = now + self.interval
                self._draw(now)

    def close(self) -> None:
        """Draw the final count and end the line (only if a line was shown)."""
        if self.enabled and self._drawn:
            self._draw(self.clock())
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        text = f"{self.label}: {self.count:,} {self.unit}"
        if self.total:
            done = self.count if self.position is None else self.position
            text += f" ({min(100.0, 100.0 * done / self.total):.0f}%)"
        text += f", {self.count / elapsed:,.0f} {self.unit}/s"
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._drawn = True
