"""nutchy: the Apache Nutch 2.x crawl cycle for Scrapy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["NutchAddon", "__version__"]

if TYPE_CHECKING:
    from nutchy.addon import NutchAddon


def __getattr__(name: str) -> Any:
    # The add-on is imported on first use, so that importing nutchy.core pulls in no Scrapy.
    if name == "NutchAddon":
        from nutchy.addon import NutchAddon

        return NutchAddon
    raise AttributeError(f"module 'nutchy' has no attribute {name!r}")
