"""Building the settings nutchy runs with, outside a Scrapy crawl (the ``nutchy`` command)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from scrapy.settings import Settings

import nutchy.default_settings


def nutch_property(setting: str) -> str:
    """The Nutch property a setting stands for.

    >>> nutch_property("NUTCH_GENERATE_MAX_COUNT")
    'generate.max.count'
    """
    if not setting.startswith("NUTCH_"):
        raise ValueError(f"{setting!r} is not a nutchy setting")
    return setting[len("NUTCH_") :].lower().replace("_", ".")


def load_settings(overrides: Mapping[str, Any] | None = None, project: bool = True) -> Settings:
    """nutchy's defaults, then the Scrapy project's settings (when *project* and a project is
    found through ``scrapy.cfg`` or ``SCRAPY_SETTINGS_MODULE``), then *overrides*."""
    if project and (os.environ.get("SCRAPY_SETTINGS_MODULE") or _find_scrapy_cfg()):
        from scrapy.utils.project import get_project_settings

        settings = get_project_settings()
    else:
        settings = Settings()
    settings.setmodule(nutchy.default_settings, priority="default")
    if overrides:
        settings.setdict(dict(overrides), priority="cmdline")
    return settings


def _find_scrapy_cfg() -> bool:
    from scrapy.utils.conf import closest_scrapy_cfg

    return bool(closest_scrapy_cfg())
