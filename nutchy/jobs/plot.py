"""``nutchy plot -out crawl.png``: a picture of the crawl, drawn with matplotlib.

Four panels: the table's rows by crawl status over the rounds and the pages fetched per second
in each round (both from the crawl's history, :mod:`nutchy.jobs.history`), and the distributions
of the fetch interval and of the score over the table as it is now (one streaming scan of two
columns; the values are kept as 8-byte floats, 16 MB for a million rows). Drawn with the Agg
backend on a :class:`matplotlib.figure.Figure` of its own: pyplot is never imported, no display
is ever opened, so it runs on a server, in cron or in a container.

matplotlib is an optional dependency (``pip install 'nutchy[plot]'``), imported only here.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from nutchy.exceptions import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nutchy.store.table import WebTable

__all__ = ["PlotResult", "plot_crawl", "table_values"]

#: Image formats the plot is written in, by file name extension.
FORMATS: Final = (".png", ".svg", ".pdf")

_DAY: Final = 86400.0


@dataclass(frozen=True, slots=True)
class PlotResult:
    """What ``nutchy plot`` drew: the file, the rounds of the history and the table's rows."""

    path: Path
    rounds: int
    rows: int


def table_values(table: WebTable) -> tuple[array[float], array[float]]:
    """The fetch interval (s) and the score of every row, in one scan of those two columns."""
    intervals: array[float] = array("d")
    scores: array[float] = array("d")
    for page in table.scan(("fetch_interval", "score"), skip_errors=True):
        intervals.append(float(page.fetch_interval))
        scores.append(float(page.score))
    return intervals, scores


def plot_crawl(
    out: Path,
    rounds: Sequence[dict[str, Any]],
    intervals: Sequence[float],
    scores: Sequence[float],
    *,
    title: str = "",
) -> PlotResult:
    """Draw the crawl into *out* (PNG, SVG or PDF, by its extension): *rounds* are the history's
    records, *intervals* and *scores* the table's values (:func:`table_values`)."""
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(
            f"cannot draw {out.name}: the plot is written as {', '.join(FORMATS)} (by extension)"
        )
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ConfigError(
            f"nutchy plot needs matplotlib ({exc}): pip install 'nutchy[plot]'"
        ) from exc

    figure = Figure(figsize=(12, 8), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    (by_status, speed), (interval_axes, score_axes) = figure.subplots(2, 2)
    numbers = [int(r["round"]) for r in rounds]

    by_status.set_title("Rows by status after each round")
    names = sorted({name for r in rounds for name in _dict(r.get("by_status"))})
    for name in names:
        by_status.plot(
            numbers,
            [_dict(r.get("by_status")).get(name, 0) for r in rounds],
            marker="o",
            label=name.removeprefix("status_"),
        )
    if names:
        by_status.legend(fontsize="small")
    _round_axis(by_status, numbers, "rows")

    speed.set_title("Pages fetched per second")
    speed.bar(numbers, [float(r.get("pages_per_s") or 0.0) for r in rounds], color="tab:green")
    _round_axis(speed, numbers, "pages/s")

    interval_axes.set_title(f"Fetch interval ({len(intervals)} rows)")
    if intervals:
        interval_axes.hist([v / _DAY for v in intervals], bins=40, color="tab:blue")
    interval_axes.set_xlabel("days")
    interval_axes.set_ylabel("rows")

    score_axes.set_title(f"Score ({len(scores)} rows)")
    if scores:
        score_axes.hist(scores, bins=40, color="tab:orange", log=True)
    score_axes.set_xlabel("score")
    score_axes.set_ylabel("rows (log)")

    if title:
        figure.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    return PlotResult(out, len(rounds), len(scores))


def _dict(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int)}


def _round_axis(axes: Any, numbers: list[int], label: str) -> None:
    axes.set_xlabel("round")
    axes.set_ylabel(label)
    if numbers:
        axes.set_xticks(numbers)
    else:
        axes.text(0.5, 0.5, "no rounds in the history yet", ha="center", transform=axes.transAxes)
