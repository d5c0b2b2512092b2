"""The crawl job: Nutch's ``bin/crawl`` (``nutchy crawl SEEDS -rounds N -topN M``).

Inject the seeds once, then run rounds of generate, fetch, parse and updatedb until *rounds* are
done, generate selects nothing, or a file named ``STOP`` appears in the crawl directory (checked
before each round, so the current round always finishes). Generate, parse and updatedb run in
this process; each fetch runs ``scrapy crawl nutch`` in a child process (see
:mod:`nutchy._fetchrun`), or in *K* children at once with ``-numFetchers K``: generate splits the
batch into *K* partitions by host (as ``nutchy generate -numFetchers K``) and each child fetches
one (``-a partition=k/K``), so every host is fetched by one process. While the children fetch,
this process reads ahead what updatedb needs of the batch
(:func:`~nutchy.jobs.updatedb.read_ahead`).
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

from nutchy.config import crawl_dir
from nutchy.core.generate import new_batch_id
from nutchy.exceptions import StoreError
from nutchy.jobs._cycle import finish_batch, update_config
from nutchy.jobs._settings import get_int
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.inject import InjectOptions, InjectResult, inject
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


#: Starts the fetch of a batch (of its partition ``k/K``, or all of it for ``None``) and returns
#: a function that waits for the fetch and returns its exit code.
StartFetch = Callable[[str, Mapping[str, Any], str | None], Callable[[], int]]


def start_fetch_in_child(
    batch_id: str, overrides: Mapping[str, Any], partition: str | None = None
) -> Callable[[], int]:
    """Start fetching *batch_id* (its *partition* ``k/K`` only, when given) with ``python -m
    nutchy._fetchrun``; return a function that waits for the child and returns its exit code."""
    command = [sys.executable, "-m", "nutchy._fetchrun", batch_id, json.dumps(dict(overrides))]
    if partition is not None:
        command.append(partition)
    return subprocess.Popen(command).wait


def fetch_in_child(
    batch_id: str, overrides: Mapping[str, Any], partition: str | None = None
) -> int:
    """Fetch *batch_id* (or its *partition*) with ``python -m nutchy._fetchrun``; return its exit
    code."""
    return start_fetch_in_child(batch_id, overrides, partition)()


def crawl(
    settings: BaseSettings,
    seeds: Sequence[Path],
    *,
    rounds: int,
    top_n: int | None,
    overrides: Mapping[str, Any],
    add_days: int = 0,
    num_fetchers: int = 1,
    start_fetch: StartFetch = start_fetch_in_child,
    log: Callable[[str], None] = print,
) -> CrawlReport:
    """Run the crawl; *overrides* are the settings given on the command line, passed to fetch.

    Each round's generate selects the URLs due *add_days* days from now (``-adddays``) and splits
    them into *num_fetchers* partitions, fetched at once by as many children.
    *start_fetch* starts the fetch of a batch (of one partition ``k/K`` of it, or of all of it
    for ``None``) and returns a function that waits for its exit code.
    """
    report = CrawlReport()
    stop = crawl_dir(settings) / STOP_FILE
    with open_table(settings) as table:
        if seeds:
            result = inject(table, seeds, InjectOptions.from_settings(settings), now=_now())
            report.injected = result.injected
            _log_inject(result, log)
        generate_options = GenerateOptions.from_settings(
            settings, top_n=top_n, num_fetchers=num_fetchers
        )
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
            line = f"round {number}: batch {batch_id}, {generated.selected} URLs"
            if num_fetchers > 1:
                sizes = ", ".join(map(str, generated.partitions))
                line += f" in {num_fetchers} partitions ({sizes})"
            log(line)
            try:
                ahead, failed = _fetch(
                    table, settings, batch_id, generated.partitions, overrides, start_fetch
                )
                table.checkpoint()  # the fetch's writes, copied into the file beside what follows
                if failed:
                    log(f"round {number}: batch {batch_id} is left for {_by_hand(batch_id)}")
                    report.stopped = f"the fetch of batch {batch_id} failed ({failed})"
                    break
                parsed, updated = finish_batch(table, settings, batch_id, now=_now(), ahead=ahead)
            except StoreError as exc:
                raise StoreError(
                    f"round {number}: cannot parse and update batch {batch_id}: {exc}. Once the"
                    f" table can be written again, finish the batch with {_by_hand(batch_id)}"
                ) from exc
            except KeyboardInterrupt:  # Ctrl-C: the fetch children stop on theirs
                log(
                    f"round {number}: interrupted; batch {batch_id} is left for {_by_hand(batch_id)}"
                )
                raise
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


def _fetch(
    table: WebTable,
    settings: BaseSettings,
    batch_id: str,
    sizes: Sequence[int],
    overrides: Mapping[str, Any],
    start_fetch: StartFetch,
) -> tuple[ReadAhead | None, str]:
    """Fetch *batch_id*, whose partitions hold *sizes* URLs: each partition that has any in a
    child of its own, all at once, while this process reads ahead for updatedb. Return the read
    ahead and what failed (``""`` when every child exited with 0)."""
    if len(sizes) == 1:
        partitions: list[str | None] = [None]
    else:
        partitions = [f"{k}/{len(sizes)}" for k, size in enumerate(sizes) if size]
    waits: list[tuple[str | None, Callable[[], int]]] = []
    ahead = None
    try:
        # One at a time, so that if a start fails, those started are still waited for.
        for partition in partitions:
            waits.append((partition, start_fetch(batch_id, overrides, partition)))  # noqa: PERF401
        ahead = _read_ahead(table, settings, batch_id)
    finally:  # never leave a child running unwaited
        codes = [(partition, wait()) for partition, wait in waits]
    failed = [
        f"exit code {code}" if partition is None else f"partition {partition}: exit code {code}"
        for partition, code in codes
        if code != 0
    ]
    return ahead, "; ".join(failed)


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


def _log_inject(result: InjectResult, log: Callable[[str], None]) -> None:
    """What inject did with the seeds, as ``nutchy inject`` says it, in fewer lines."""
    others = [f"{n} {label}" for label, n in result.outcomes() if n and label != "injected"]
    line = f"inject: {result.injected} URLs injected"
    if others:
        line += f" ({result.lines} lines read; {', '.join(others)})"
    log(line)
    for problem in result.unreadable:
        log(f"inject: cannot read {problem}")
    for malformed in result.malformed_lines:
        log(f"inject: malformed line {malformed}")
    if result.malformed > len(result.malformed_lines):
        log(f"inject: … and {result.malformed - len(result.malformed_lines)} more malformed lines")


def _by_hand(batch_id: str) -> str:
    """The commands that finish the fetch, parse and update of *batch_id*."""
    return (
        f"scrapy crawl nutch -a batch={batch_id} -a resume=true, nutchy parse {batch_id}"
        f" -resume and nutchy updatedb {batch_id}"
    )


def _now() -> int:
    return int(time.time() * 1000)
