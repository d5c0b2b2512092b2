"""Typed, validated reads of nutchy settings for the jobs.

Each getter reads one setting with Scrapy's typed getter (no inline default: the registered
default is the only one) and raises :class:`~nutchy.exceptions.ConfigError` naming the setting
when the value has the wrong type or is out of range.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from nutchy.core.urlfilter import DEFAULT_RULES_PATH, RegexURLFilter
from nutchy.exceptions import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.settings import BaseSettings


def get_int(settings: BaseSettings, name: str, minimum: int | None = None) -> int:
    try:
        value = settings.getint(name)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {settings.get(name)!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def get_float(settings: BaseSettings, name: str) -> float:
    try:
        value = settings.getfloat(name)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {settings.get(name)!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return value


def get_bool(settings: BaseSettings, name: str) -> bool:
    try:
        return settings.getbool(name)
    except ValueError:
        raise ConfigError(
            f"{name} must be a boolean (True/False, 1/0, 'true'/'false'), got {settings.get(name)!r}"
        ) from None


def get_choice(settings: BaseSettings, name: str, choices: Sequence[str]) -> str:
    value = settings.get(name)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return str(value)


def url_filter(settings: BaseSettings) -> RegexURLFilter:
    """The regex URL filter of ``NUTCH_URLFILTER_REGEX_FILE`` (nutchy's own rules when empty)."""
    name = "NUTCH_URLFILTER_REGEX_FILE"
    value = settings.get(name)
    if value is not None and not isinstance(value, (str, Path)):
        raise ConfigError(f"{name} must be a file path, got {value!r}")
    path = Path(value) if value else DEFAULT_RULES_PATH
    try:
        return RegexURLFilter.from_file(path)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None
