"""``scrapy inject SEEDS``: Nutch's inject, inside a Scrapy project.

The same job as ``nutchy inject`` (:func:`nutchy.cli.run_inject`), with the project's settings
plus ``-s NAME=VALUE``. It starts no crawler and no reactor.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

import nutchy.default_settings
from nutchy.cli import add_inject_arguments, run_inject
from nutchy.exceptions import NutchError

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "[options] <seed file or directory>"

    def short_desc(self) -> str:
        return "Add seed URLs to nutchy's web table (Nutch's inject)"

    def long_desc(self) -> str:
        return (
            "Read seed URLs (Nutch's seed line format) from a file or from the files of a"
            " directory, normalize and filter them, and add them to nutchy's web table. URLs"
            " already in the table are kept unless -overwrite or -update says otherwise."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        group = parser.add_argument_group(title="Inject Options")
        group.add_argument(
            "-crawlId",
            dest="crawl_id",
            help="use the table <crawlId>_webpage (NUTCH_STORAGE_CRAWL_ID)",
        )
        add_inject_arguments(group)  # type: ignore[arg-type]

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        assert self.settings is not None
        settings = self.settings.copy()
        settings.setmodule(nutchy.default_settings, priority="default")
        if opts.crawl_id is not None:
            settings.set("NUTCH_STORAGE_CRAWL_ID", opts.crawl_id, priority="cmdline")
        try:
            self.exitcode = run_inject(
                settings, opts.seeds, mode=opts.mode, filter_urls=opts.filter_urls
            )
        except NutchError as exc:
            print(f"scrapy inject: {exc}", file=sys.stderr)
            self.exitcode = 2
