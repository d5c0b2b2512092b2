"""Settings of the nutchy Scrapy project in this repository.

Per-environment overrides go in modules beside this one (``settings/production.py`` importing
``from settings import *``), selected with ``SCRAPY_SETTINGS_MODULE``. Every nutchy setting and
its default is listed in ``nutchy/default_settings.py`` and docs/settings.md.
"""

BOT_NAME = "nutchy"
SPIDER_MODULES = ["spiders"]
NEWSPIDER_MODULE = "spiders"

# nutchy's add-on: its settings, the `nutch` spider (nutchy.spiders, added to SPIDER_MODULES), its
# scheduler, downloader middlewares and pipelines.
ADDONS = {"nutchy.NutchAddon": 0}

# The web table: the embedded store, in ./crawl.
NUTCH_CRAWL_DIR = "crawl"

# The address guard (docs/fetch.md, "Safety"): no connection to private, link-local, multicast or
# other non-public addresses, whatever a page links or redirects to. Loopback is let through for
# the README's example, which crawls a site served on 127.0.0.1:8000; settings/production.py lets
# nothing through.
NUTCH_ADDRESS_GUARD_ENABLED = True
NUTCH_ADDRESS_GUARD_ALLOW = ["127.0.0.0/8", "::1", "localhost"]
