"""nutchy: the Apache Nutch 2.x crawl cycle for Scrapy."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
