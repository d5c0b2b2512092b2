"""The crawl's history: one line of statistics per round, in ``<crawl dir>/history.jsonl``.

``nutchy crawl`` appends a line after each round's updatedb (``NUTCH_CRAWL_HISTORY``): what the
round fetched (by fetch status, 304s, errors, new URLs, pages/s) and what the whole table holds
after it (rows by crawl status, rows due, mean fetch interval and score, from
:func:`~nutchy.jobs.readdb.table_stats`). ``nutchy plot`` draws the rounds from it. The file is
JSON lines, appended and never rewritten: a line that cannot be read (a crawl killed while
writing it, an edit by hand) is skipped by :func:`read_history`, which counts it.

>>> record = {"round": 1, "fetched": 3}
>>> json.loads(json.dumps(record)) == record
True
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from nutchy.config import crawl_dir
from nutchy.core.fetch import crawl_status_of
from nutchy.core.status import CrawlStatus, ProtocolStatusCode
from nutchy.exceptions import StoreError
from nutchy.jobs._settings import get_bool

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.jobs.readdb import TableStats
    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

__all__ = [
    "HISTORY_FILE",
    "History",
    "append_round",
    "history_path",
    "read_history",
    "record_round",
    "round_record",
]

#: The history's file name, in the crawl directory.
HISTORY_FILE: Final = "history.jsonl"


def history_path(settings: BaseSettings) -> Path:
    """The history file of the crawl the settings name (``NUTCH_CRAWL_DIR``); with a crawl id,
    ``history-<crawlId>.jsonl``, so two tables of one directory keep their own."""
    crawl_id = settings.get("NUTCH_STORAGE_CRAWL_ID") or ""
    name = f"history-{crawl_id}.jsonl" if crawl_id else HISTORY_FILE
    return crawl_dir(settings) / name


def errors_of(statuses: Mapping[str, int]) -> int:
    """The fetches among *statuses* (counts by protocol status name) that the next round tries
    again: exceptions, 5xx, timeouts, refusals (crawl status RETRY).

    >>> errors_of({"SUCCESS": 5, "EXCEPTION": 2, "NOTFOUND": 1, "NOTMODIFIED": 1})
    2
    """
    total = 0
    for name, count in statuses.items():
        code = ProtocolStatusCode.__members__.get(name)
        if code is None or crawl_status_of(code) == CrawlStatus.RETRY:
            total += count
    return total


def round_record(
    number: int,
    batch_id: str,
    *,
    selected: int,
    statuses: Mapping[str, int],
    new_rows: int,
    seconds: Mapping[str, float],
    table: TableStats,
    now: int,
    sitemaps: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The history line of round *number*: what it fetched (*statuses*, counts by protocol
    status name; *new_rows* added by its updatedb; *seconds* per phase), what the sitemaps
    read before its generate counted (*sitemaps*, ``nutch/sitemap/<name>``, when some were
    read) and the *table*'s statistics after it, at *now* (ms)."""
    fetched = sum(statuses.values())
    # nutchy crawl times the fetch; scrapy crawl nutch's rounds only the whole round
    fetch_seconds = seconds.get("fetch", seconds.get("round", 0.0))
    return {
        "round": number,
        "batch": batch_id,
        "time": datetime.fromtimestamp(now / 1000, UTC).isoformat(timespec="seconds"),
        "selected": selected,
        "fetched": fetched,
        "fetch_statuses": dict(sorted(statuses.items())),
        "not_modified": statuses.get("NOTMODIFIED", 0),
        "errors": errors_of(statuses),
        "new": new_rows,
        "pages_per_s": round(fetched / fetch_seconds, 3) if fetch_seconds > 0 else 0.0,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        **({"sitemaps": dict(sorted(sitemaps.items()))} if sitemaps is not None else {}),
        **table.to_dict(),
    }


def append_round(path: Path, record: Mapping[str, Any]) -> None:
    """Append *record* to the history at *path* as one line (one ``write`` of one line, so a
    crash leaves at most a cut last line, which :func:`read_history` skips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


@dataclass
class History:
    """The rounds a history file holds, in order, and how many of its lines were skipped."""

    rounds: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0


def read_history(path: Path) -> History:
    """The rounds of the history at *path* (none when it does not exist); a line that is not a
    JSON object with a ``round`` number is skipped and counted."""
    history = History()
    try:
        handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        return history
    with handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                history.skipped += 1
                continue
            if not isinstance(record, dict) or not isinstance(record.get("round"), int):
                history.skipped += 1
                continue
            history.rounds.append(record)
    return history


def record_round(
    table: WebTable,
    settings: BaseSettings,
    number: int,
    batch_id: str,
    *,
    selected: int,
    statuses: Mapping[str, int],
    new_rows: int,
    seconds: Mapping[str, float],
    now: int,
    sitemaps: Mapping[str, int] | None = None,
) -> dict[str, Any] | None:
    """Append round *number*'s line to the crawl's history when ``NUTCH_CRAWL_HISTORY`` is on
    (one scan of the table for its statistics); return the line. The history never stops a
    crawl: a table that cannot be read or a file that cannot be written is said in a warning,
    and the round has no line."""
    if not get_bool(settings, "NUTCH_CRAWL_HISTORY"):
        return None
    from nutchy.jobs.readdb import table_stats

    path = history_path(settings)
    try:
        stats = table_stats(table, now=now)
        record = round_record(
            number,
            batch_id,
            selected=selected,
            statuses=statuses,
            new_rows=new_rows,
            seconds=seconds,
            table=stats,
            now=now,
            sitemaps=sitemaps,
        )
        append_round(path, record)
    except (StoreError, OSError) as exc:
        logger.warning("Round %d is not in the history %s: %s", number, path, exc)
        return None
    return record
