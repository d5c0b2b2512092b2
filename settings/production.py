"""Settings for crawling the web: ``SCRAPY_SETTINGS_MODULE=settings.production``.

Everything of ``settings`` (this folder's ``__init__.py``), and the address guard with nothing
let through: a crawl of the open web connects to public addresses only, so no page can make it
fetch the machine it runs on, its network or a cloud's metadata service (docs/fetch.md, "Safety").
Add the intranet hosts or networks a crawl is meant to reach to ``NUTCH_ADDRESS_GUARD_ALLOW``.
"""

from settings import *

NUTCH_ADDRESS_GUARD_ENABLED = True
NUTCH_ADDRESS_GUARD_ALLOW: list[str] = []
