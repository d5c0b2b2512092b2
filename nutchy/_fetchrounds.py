"""The batches of a long-lived fetch process, given one at a time by ``nutchy crawl``.

``nutchy crawl`` runs generate, parse and updatedb itself, and the fetch of each round in a
Scrapy process (:mod:`nutchy._fetchrun`). Started anew every round, that process would pay
Scrapy's start-up, and forget what it learned of the hosts: their robots.txt answers, the
Crawl-delay and the time of their last fetch (which the next round's first request to a host
must respect), and DNS answers. ``python -m nutchy._fetchrun -rounds FD`` instead runs the
``nutch`` spider once for the whole crawl with :class:`ParentRounds` as its round driver: at the
start and after each batch it reads the next batch from its standard input, one JSON object a
line (``{"batch": ID, "partition": "k/K" or null}``), fetches it (parsing as it goes, as a
fetch does; no updatedb) and, once its outcomes and parses are written, writes a line on the
file descriptor *FD*: ``{"batch": ID, "stats": {...}}``, the crawl's Scrapy stats so far (the
parent takes the difference). The end of its input ends the crawl. The fetch that runs in a
thread of ``nutchy crawl``'s own process (:class:`nutchy._fetchrun.FetchThread`) is driven the
same way, through a pair of pipes in place of the standard input and *FD*.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import IO, TYPE_CHECKING, Any

from scrapy.utils.asyncio import run_in_thread

from nutchy._memory import release_memory
from nutchy.rounds import RoundDriver

if TYPE_CHECKING:
    from nutchy._fetch import FetchJob
    from nutchy.store.table import WebTable

__all__ = ["ParentRounds"]

logger = logging.getLogger(__name__)


class ParentRounds(RoundDriver):
    """A round driver whose batches come from *commands* and whose ends are told on *reports*
    (see the module docstring); the other arguments are :class:`~nutchy.rounds.RoundDriver`'s.
    """

    def __init__(
        self, table: WebTable, *, commands: IO[str], reports: IO[str], **kwargs: Any
    ) -> None:
        super().__init__(table, **kwargs)
        self.commands = commands
        self.reports = reports
        self._fetched: str | None = None

    def goes_on(self, job: FetchJob, *, complete: bool) -> bool:
        # A partition is all that was asked: the next batch follows it as it follows a batch.
        return True

    async def next_batch(self, job: FetchJob) -> FetchJob | None:
        if self._fetched is not None:
            self._report(self._fetched)
            # what the fetch of the batch freed (a few ms: not on the reactor)
            await run_in_thread(release_memory)
        line = await run_in_thread(self.commands.readline)
        if not line.strip():
            return None  # no more batches
        command = json.loads(line)
        partition, partitions = None, 1
        if command.get("partition"):
            k, _, n = command["partition"].partition("/")
            partition, partitions = int(k), int(n)
        self.round += 1
        self._fetched = command["batch"]
        return dataclasses.replace(
            job, batch_id=command["batch"], partition=partition, partitions=partitions
        )

    def _report(self, batch_id: str) -> None:
        stats = self.stats.get_stats()
        plain = {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}
        self.reports.write(json.dumps({"batch": batch_id, "stats": plain}) + "\n")
        self.reports.flush()
