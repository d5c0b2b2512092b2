"""Fetch one batch: ``python -m nutchy._fetchrun BATCH [SETTINGS_JSON [PARTITION]]``.

``nutchy crawl`` runs each round's fetch in a child process, because Twisted's reactor cannot be
started twice in one process. The child reads nutchy's defaults, the Scrapy project's settings
(when there is a project), then the overrides given as a JSON object, turns the add-on on, and
runs the ``nutch`` spider on the batch (on partition *k* of *K* only with ``PARTITION`` =
``k/K``); it leaves parse and updatedb to ``nutchy crawl``, and writes its Scrapy stats as JSON
to the file named by the environment variable ``NUTCHY_FETCH_REPORT``, when set, for
``nutchy crawl`` to say what it fetched. It exits with 1 when the crawl
could not start, could not read or write the table, or was stopped by a signal.

A child whose ``nutchy crawl`` dies (``kill -9``) dies with it (the environment variable
``NUTCHY_FETCH_PARENT`` names the parent), rather than fetch on alone beside the crawl that
re-running the command starts: that one finishes the batch.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nutchy.config import load_settings

#: Stats that make a fetch a failure: the table could not be read or written, or the WARC file
#: (NUTCH_WARC_ENABLED) could not be written.
FAILURE_STATS = ("nutch/store/put_error", "nutch/fetch/read_error", "nutch/warc/write_error")

if TYPE_CHECKING:
    from nutchy.spiders import NutchSpider

#: The batch argument of a long-lived fetch (``-rounds``): none, the batches come on stdin.
ROUNDS = "-rounds"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rounds_fd = None
    if args[:1] == ["-rounds"] and 2 <= len(args) <= 3 and args[1].isdigit():
        # The batches come one at a time on stdin (nutchy._fetchrounds).
        rounds_fd = int(args[1])
        args = [ROUNDS, *args[2:]]
    if not 1 <= len(args) <= 3:
        print(
            "usage: python -m nutchy._fetchrun BATCH [SETTINGS_JSON [PARTITION]]\n"
            "       python -m nutchy._fetchrun -rounds FD [SETTINGS_JSON]",
            file=sys.stderr,
        )
        return 2
    _die_with_parent()
    from scrapy.crawler import CrawlerProcess

    from nutchy.spiders import NutchSpider

    overrides = json.loads(args[1]) if len(args) >= 2 else {}
    partition = args[2] if len(args) == 3 else None
    spider: type[NutchSpider] = NutchSpider
    spider_args: dict[str, Any] = {"batch": args[0], "partition": partition}
    if rounds_fd is not None:
        spider = _parent_driven(rounds_fd)
        spider_args = {}
    settings = load_settings(overrides)
    settings.set("ADDONS", {**settings.getdict("ADDONS"), "nutchy.NutchAddon": 0}, "cmdline")
    if "LOG_LEVEL" not in overrides:
        settings.set("LOG_LEVEL", "INFO", "cmdline")
    # nutchy crawl parses what is left and runs updatedb itself, after this process ends.
    settings.set("NUTCH_FETCHER_UPDATEDB", False, "cmdline")
    # nutchy crawl said it once, not once a round.
    settings.set("NUTCH_HTTP_AGENT_CONTACT_WARNING", False, "cmdline")
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider)
    process.crawl(crawler, **spider_args)
    process.start()
    # As scrapy crawl: a crawl that could not start (bad settings, no table...) fails.
    if process.bootstrap_failed:
        return 1
    # So does a fetch that could not read or write the table (a store gone away), or that was
    # stopped by a signal (SIGINT, SIGTERM: Scrapy's finish reason "shutdown"): its batch is not
    # for parse and updatedb until it is fetched whole (-a resume=true). A fetch that ends at its
    # time limit, or by Scrapy's CloseSpider extension, is not a failure: as in Nutch, what it
    # fetched is parsed and updated, and the rest of the batch is generated again.
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    _write_report(stats)
    if any(stats.get(key) for key in FAILURE_STATS):
        return 1
    return 1 if stats.get("finish_reason") == "shutdown" else 0


def _die_with_parent() -> None:
    """Be killed when the process ``NUTCHY_FETCH_PARENT`` names ends: at once on Linux (the
    kernel's parent-death signal), within a second elsewhere (a thread watching the parent)."""
    parent = os.environ.get("NUTCHY_FETCH_PARENT", "")
    if not parent.isdigit():
        return
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    else:
        threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()
    if os.getppid() != int(parent):  # gone before the signal was asked for
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGKILL)


def _parent_driven(fd: int) -> type[NutchSpider]:
    """The ``nutch`` spider fetching the batches read on stdin, reporting on *fd*."""
    from nutchy._fetchrounds import ParentRounds
    from nutchy.spiders import NutchSpider

    driver = functools.partial(
        ParentRounds,
        commands=sys.stdin,
        reports=open(fd, "w", encoding="utf-8"),  # noqa: SIM115
    )
    return type("NutchSpider", (NutchSpider,), {"nutch_round_driver": staticmethod(driver)})


def _write_report(stats: dict[str, Any]) -> None:
    """Write *stats* as JSON to the file ``NUTCHY_FETCH_REPORT`` names, when set: ``nutchy
    crawl`` reads what each child fetched there, whatever the child's log level."""
    path = os.environ.get("NUTCHY_FETCH_REPORT")
    if not path:
        return
    plain = {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(plain, handle)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
