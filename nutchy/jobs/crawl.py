"""The crawl job: Nutch's ``bin/crawl`` (``nutchy crawl SEEDS -rounds N -topN M``).

Inject the seeds once, then run rounds of generate, fetch, parse and updatedb until *rounds* are
done, generate selects nothing, or a file named ``STOP`` appears in the crawl directory (checked
before each round, so the current round always finishes). Generate, parse and updatedb run in
this process; each fetch runs ``scrapy crawl nutch`` in a child process (see
:mod:`nutchy._fetchrun`). While the child fetches, this process reads ahead what updatedb needs
of the batch (:func:`~nutchy.jobs.updatedb.read_ahead`), on the core the child leaves free.
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nutchy.core.generate import new_batch_id
from nutchy.exceptions import StoreError
from nutchy.jobs._cycle import finish_batch, update_config
from nutchy.jobs._settings import get_int
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.inject import InjectOptions, inject
from nutchy.jobs.updatedb import ReadAhead, read_ahead
from nutchy.store import open_table

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

#: Name of the file in the crawl directory that stops a crawl after its current round.
STOP_FILE = "STOP"


@dataclass
class CrawlReport:
    """What a crawl did: the batch of each round, and why it stopped."""

    injected: int = 0
    batches: list[str] = field(default_factory=list)
    stopped: str = ""


def start_fetch_in_child(batch_id: str, overrides: Mapping[str, Any]) -> Callable[[], int]:
    """Start fetching *batch_id* with ``python -m nutchy._fetchrun``; return a function that waits
    for the child and returns its exit code."""
    command = [sys.executable, "-m", "nutchy._fetchrun", batch_id, json.dumps(dict(overrides))]
    return subprocess.Popen(command).wait


def fetch_in_child(batch_id: str, overrides: Mapping[str, Any]) -> int:
    """Fetch *batch_id* with ``python -m nutchy._fetchrun``; return its exit code."""
    return start_fetch_in_child(batch_id, overrides)()


def crawl(
    settings: BaseSettings,
    seeds: Sequence[Path],
    *,
    rounds: int,
    top_n: int | None,
    overrides: Mapping[str, Any],
    add_days: int = 0,
    start_fetch: Callable[[str, Mapping[str, Any]], Callable[[], int]] = start_fetch_in_child,
    log: Callable[[str], None] = print,
) -> CrawlReport:
    """Run the crawl; *overrides* are the settings given on the command line, passed to fetch.

    Each round's generate selects the URLs due *add_days* days from now (``-adddays``).
    *start_fetch* starts a round's fetch and returns a function that waits for its exit code.
    """
    report = CrawlReport()
    stop = Path(settings.get("NUTCH_CRAWL_DIR")) / STOP_FILE
    with open_table(settings) as table:
        if seeds:
            result = inject(table, seeds, InjectOptions.from_settings(settings), now=_now())
            report.injected = result.injected
            log(f"inject: {result.injected} URLs injected")
        generate_options = GenerateOptions.from_settings(settings, top_n=top_n)
        for number in range(1, rounds + 1):
            if stop.exists():
                report.stopped = f"{stop} found"
                break
            now = _now()
            # a random number, as nutchy generate: two crawls started in the same second on one
            # table get different batch ids
            batch_id = new_batch_id(now, secrets.randbelow(2**31))
            generated = generate(
                table, generate_options, now=now, batch_id=batch_id, add_days=add_days
            )
            if generated.selected == 0:
                report.stopped = "nothing left to fetch"
                break
            report.batches.append(batch_id)
            log(f"round {number}: batch {batch_id}, {generated.selected} URLs")
            wait = start_fetch(batch_id, overrides)
            try:
                ahead = _read_ahead(table, settings, batch_id)
            finally:
                code = wait()
            if code != 0:
                report.stopped = f"the fetch of batch {batch_id} failed (exit code {code})"
                break
            parsed, updated = finish_batch(table, settings, batch_id, now=_now(), ahead=ahead)
            del ahead
            assert parsed is not None
            line = f"round {number}: {parsed.parsed} pages parsed, {updated.new_rows} new URLs"
            if updated.read_ahead:
                pages = f"{updated.read_ahead} page{'s' if updated.read_ahead > 1 else ''}"
                line += f" ({pages} updated from what was read during the fetch)"
            log(line)
        else:
            report.stopped = f"{rounds} rounds done"
    log(f"stopped, {report.stopped}")
    return report


def _read_ahead(table: WebTable, settings: BaseSettings, batch_id: str) -> ReadAhead | None:
    """updatedb's first read of the batch, done while it is fetched; ``None`` when turned off
    (``NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS`` = 0) or if the table could not be read (updatedb then
    reads it all after the fetch, and reports what is wrong)."""
    limit = get_int(settings, "NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS", 0)
    if limit == 0:
        return None
    try:
        return read_ahead(table, batch_id, update_config(settings, batch_id), max_outlinks=limit)
    except StoreError as exc:  # an optimization: the crawl goes on without it
        logger.warning("Could not read batch %s ahead of updatedb: %s", batch_id, exc)
        return None


def _now() -> int:
    return int(time.time() * 1000)
