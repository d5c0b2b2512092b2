"""Building the settings nutchy runs with, outside a Scrapy crawl (the ``nutchy`` command)."""

from __future__ import annotations

import importlib.util
import os
import zipimport
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import Settings

import nutchy.default_settings
from nutchy.exceptions import ConfigError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


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


def crawl_dir(settings: BaseSettings) -> Path:
    """``NUTCH_CRAWL_DIR`` as an absolute path.

    A relative one is taken from the Scrapy project's folder (that of ``scrapy.cfg``, looked for
    from the current folder up, as Scrapy does) when there is one, from the current folder
    otherwise. A project run from an egg (a scrapyd job: its settings module is in a zip file)
    has no folder: a relative crawl directory would land in the folder scrapyd runs its jobs
    in, so it is refused with a :exc:`~nutchy.exceptions.ConfigError`.
    """
    value = settings.get("NUTCH_CRAWL_DIR")
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ConfigError(f"NUTCH_CRAWL_DIR must be a folder path, got {value!r}")
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    root = project_root()
    if root is not None:
        return root / path
    egg = _settings_egg()
    if egg is not None:
        raise ConfigError(
            f"NUTCH_CRAWL_DIR {str(value)!r} is relative, and the project runs from an egg"
            f" ({egg}), as scrapyd runs it, with no folder to take it from: the crawl's files"
            f" would land in {os.getcwd()}. Give NUTCH_CRAWL_DIR as an absolute path, in the"
            " project's settings or for one scrapyd job (schedule.json:"
            " -d setting=NUTCH_CRAWL_DIR=/srv/crawl)"
        )
    return Path.cwd() / path


def project_root() -> Path | None:
    """The folder of the Scrapy project's ``scrapy.cfg``, or ``None`` outside a project."""
    from scrapy.utils.conf import closest_scrapy_cfg

    found = closest_scrapy_cfg()
    return Path(found).resolve().parent if found else None


def _settings_egg() -> str | None:
    """The egg (zip file) the project's settings module is loaded from, if it is one."""
    name = os.environ.get("SCRAPY_SETTINGS_MODULE")
    if not name:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not isinstance(spec.loader, zipimport.zipimporter):
        return None
    return str(spec.loader.archive)


def stop_file(settings: BaseSettings) -> Path | None:
    """The ``STOP`` file that ends a crawl's rounds: in :func:`crawl_dir`, or ``None`` when the
    crawl directory has no place (a relative one in a scrapyd job of the HBase store, which has no
    other use for it: such a job is stopped with scrapyd's ``cancel.json``)."""
    try:
        return crawl_dir(settings) / "STOP"
    except ConfigError:
        return None
