"""``scrapy list`` that applies the add-ons' early settings, as ``scrapy crawl`` does.

Scrapy's ``list`` command builds its spider loader from the project's settings as they are
(Scrapy 2.19), while ``scrapy crawl`` first lets each add-on of ``ADDONS`` change them
(``update_pre_crawler_settings``): a spider an add-on adds, such as nutchy's ``nutch`` spider,
can be crawled but is not listed, and scrapyd, which checks a spider's name with ``scrapy list``
before it schedules a job, answers "spider 'nutch' not found". This command is Scrapy's, with
that one step added; nutchy publishes it under the name ``list`` in the ``scrapy.commands``
entry point group, which Scrapy reads after its own commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.list import Command as ScrapyListCommand

if TYPE_CHECKING:
    import argparse


class Command(ScrapyListCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        self.settings = self.settings.copy()
        AddonManager.load_pre_crawler_settings(self.settings)
        super().run(args, opts)
