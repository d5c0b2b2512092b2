"""The fetch's round driver: what happens when a batch ends, and which batch comes next.

When every row of a batch has ended and its outcome is written, :meth:`RoundDriver.finish` sends
:data:`~nutchy._fetch.batch_fetched` and :data:`~nutchy._fetch.batch_parsed` and waits for their
handlers (the parse pipeline writes what it holds;
:class:`~nutchy.pipelines.NutchDbUpdatePipeline` runs updatedb on a complete batch). Without
``-a batch``, :meth:`RoundDriver.next_batch` generates the next batch itself (``-a topN=M``) for
``-a rounds=N`` rounds, until generate selects nothing or a ``STOP`` file appears in
``NUTCH_CRAWL_DIR``.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from typing import TYPE_CHECKING

from scrapy.utils.asyncio import run_in_thread

from nutchy._fetch import batch_fetched, batch_parsed, batch_updated
from nutchy._memory import release_memory
from nutchy.core.generate import new_batch_id
from nutchy.exceptions import StoreError
from nutchy.jobs.generate import GenerateOptions, generate

if TYPE_CHECKING:
    from pathlib import Path

    from scrapy.signalmanager import SignalManager
    from scrapy.statscollectors import StatsCollector

    from nutchy._fetch import FetchJob
    from nutchy.store.table import WebTable

__all__ = ["RoundDriver"]

logger = logging.getLogger(__name__)


class RoundDriver:
    """Ends batches and generates the next ones (see the module docstring).

    *table* is the open web table; *signals* sends the end-of-batch signals (``None``: none is
    sent); *generate_options* are those of the crawl's generate (``None``: the crawl fetches a
    given batch and generates none); a *stop_file* that exists stops the rounds; *updates* says
    whether the crawl updates the batches it fetches whole (``NUTCH_FETCHER_UPDATEDB``), which
    decides whether a batch not fetched whole is worth a word.
    """

    def __init__(
        self,
        table: WebTable,
        *,
        stats: StatsCollector,
        signals: SignalManager | None = None,
        generate_options: GenerateOptions | None = None,
        stop_file: Path | None = None,
        updates: bool = True,
    ) -> None:
        self.table = table
        self.stats = stats
        self.signals = signals
        self.generate_options = generate_options
        self.stop_file = stop_file
        self.updates = updates
        #: rounds generated so far
        self.round = 0

    async def first_batch(self, job: FetchJob) -> FetchJob | None:
        """The job of the crawl's first batch: *job* itself when it names a batch, else the
        first generated one (``None``: nothing to fetch)."""
        if job.generates:
            return await self.next_batch(job)
        return job

    async def next_batch(self, job: FetchJob) -> FetchJob | None:
        """Generate the next round's batch and return its job, or ``None`` when there is none
        (the rounds are done, a ``STOP`` file exists, or generate selected nothing)."""
        if not self.more_rounds(job, self.round):
            return None
        generated = await self.generate(job)
        if generated is None:
            return None
        batch_id, selected = generated
        self.round += 1
        self.log_round(job, batch_id, selected)
        return dataclasses.replace(job, batch_id=batch_id)

    def goes_on(self, job: FetchJob, *, complete: bool) -> bool:
        """Whether a batch follows *job*'s, which ended well (not stopped, no failure);
        *complete* says whether this crawl fetched every row of it. Here: when the crawl
        generates its batches and fetched this one whole (:meth:`next_batch` may still find
        none)."""
        return complete and job.generates

    def more_rounds(self, job: FetchJob, done: int) -> bool:
        """Whether a round may follow the *done* rounds of *job* (said when not)."""
        if done >= job.rounds:
            logger.info("%(n)d rounds done", {"n": job.rounds})
            return False
        if self.stop_file is not None and self.stop_file.exists():
            logger.info("%(stop)s found: no more rounds", {"stop": self.stop_file})
            return False
        return True

    async def generate(self, job: FetchJob) -> tuple[str, int] | None:
        """Generate a batch (in a thread): its id and size, or ``None`` when generate selected
        nothing (said)."""
        options = self.generate_options
        assert options is not None
        now = _now_ms()
        batch_id = new_batch_id(now, secrets.randbelow(2**31))
        result = await run_in_thread(
            generate, self.table, options, now=now, batch_id=batch_id, add_days=job.add_days
        )
        # what this round's updatedb and this generate freed, before the next fetch (a few ms:
        # not on the reactor)
        await run_in_thread(release_memory)
        if result.selected == 0:
            logger.info("Generate selected no URL: nothing left to fetch")
            return None
        return batch_id, result.selected

    def log_round(self, job: FetchJob, batch_id: str, selected: int) -> None:
        self.stats.inc_value("nutch/rounds")
        self.stats.inc_value("nutch/rounds/selected", selected)  # for the history (nutchy.history)
        logger.info(
            "Round %(round)d of %(rounds)d: batch %(batch)s, %(n)d URLs",
            {"round": self.round, "rounds": job.rounds, "batch": batch_id, "n": selected},
        )

    async def finish(self, job: FetchJob, *, complete: bool, why: str = "") -> str:
        """*job*'s batch has ended, its outcomes written: send the end-of-batch signals and
        return the crawl's finish reason so far (``"finished"``, or ``"nutch_update_failed"``
        when a handler failed). *complete* says whether this crawl fetched every row of the
        batch; when not, *why* says what stopped it."""
        await self.fetched(job, complete=complete)
        reason = await self.parsed(job, complete=complete)
        if not complete:
            self.not_whole(job, why)
        return reason

    async def fetched(self, job: FetchJob, *, complete: bool) -> None:
        """Send :data:`~nutchy._fetch.batch_fetched` (the parse pipeline writes what it holds)."""
        if self.signals is not None:
            # A store's error is logged by the handler with what to do, not by Scrapy with a
            # traceback; it still fails the batch.
            await self.signals.send_catch_log_async(
                batch_fetched, dont_log=StoreError, batch_id=job.batch_id, complete=complete
            )

    async def parsed(self, job: FetchJob, *, complete: bool) -> str:
        """Send :data:`~nutchy._fetch.batch_parsed` (the updatedb pipeline updates a complete
        batch); ``"nutch_update_failed"`` when a handler failed, else ``"finished"``."""
        if self.signals is None:
            return "finished"
        results = await self.signals.send_catch_log_async(
            batch_parsed, dont_log=StoreError, batch_id=job.batch_id, complete=complete
        )
        if any(isinstance(result, BaseException) for _, result in results):
            return "nutch_update_failed"
        if complete and self.updates:
            await self.signals.send_catch_log_async(batch_updated, batch_id=job.batch_id)
        return "finished"

    def not_whole(self, job: FetchJob, why: str) -> None:
        """Say that *job*'s batch was not fetched whole (for *why*), and what updates it."""
        if not self.updates and job.partition is not None:
            # a partition fetched without the updatedb pipeline, as nutchy crawl -numFetchers
            # does, is the part that was asked for: nothing to say
            return
        if job.partition is not None:
            why = f"partition {job.partition}/{job.partitions}"
        logger.info(
            "Batch %(batch)s was not fetched whole (%(why)s): run nutchy updatedb %(batch)s"
            " once the rest is fetched",
            {"batch": job.batch_id, "why": why},
        )


def _now_ms() -> int:
    return int(time.time() * 1000)
