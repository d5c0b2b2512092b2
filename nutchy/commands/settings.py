"""``scrapy settings`` that applies the add-ons' early settings, as ``scrapy crawl`` does.

Scrapy's ``settings`` command prints the project's settings as they are (Scrapy 2.19; Scrapy's
issue 7010): what an add-on sets does not show. This command is Scrapy's, with the step
``scrapy crawl`` takes before it builds its crawlers added: each add-on of ``ADDONS`` changes the
settings in its ``update_pre_crawler_settings``. nutchy's add-on sets everything there (its
``NUTCH_*`` defaults, ``SCHEDULER``, its middlewares and pipelines), so
``scrapy settings --get NUTCH_FETCHER_SERVER_DELAY`` prints what the crawl gets. What other
add-ons set only in ``update_settings``, with a crawler, still does not show. nutchy publishes it
under the name ``settings`` in the ``scrapy.commands`` entry point group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.settings import Command as ScrapySettingsCommand

if TYPE_CHECKING:
    import argparse


class Command(ScrapySettingsCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        self.settings = self.settings.copy()
        AddonManager.load_pre_crawler_settings(self.settings)
        super().run(args, opts)
