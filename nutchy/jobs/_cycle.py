"""The configuration of parse and updatedb, read from settings (shared by jobs and pipelines)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nutchy.core.parse import ParseConfig
from nutchy.core.schedule import AdaptiveFetchSchedule, DefaultFetchSchedule, FetchSchedule
from nutchy.core.scoring import OPICScoring
from nutchy.core.signature import MD5Signature, Signature, TextProfileSignature
from nutchy.core.update import UpdateConfig
from nutchy.core.urlfilter import RegexURLFilter
from nutchy.core.urls import normalize_url
from nutchy.exceptions import ConfigError
from nutchy.jobs._settings import get_bool, get_float, get_int, url_filter
from nutchy.jobs.parse import ParseCounts, parse_batch
from nutchy.jobs.updatedb import ReadAhead, UpdateCounts, updatedb

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.store.table import WebTable

#: Accepted values of ``NUTCH_DB_FETCH_SCHEDULE_CLASS``, with Nutch's class names as aliases.
SCHEDULES = {
    "nutchy.core.schedule.DefaultFetchSchedule": "default",
    "org.apache.nutch.crawl.DefaultFetchSchedule": "default",
    "nutchy.core.schedule.AdaptiveFetchSchedule": "adaptive",
    "org.apache.nutch.crawl.AdaptiveFetchSchedule": "adaptive",
}
#: Accepted values of ``NUTCH_DB_SIGNATURE_CLASS``, with Nutch's class names as aliases.
SIGNATURES = {
    "nutchy.core.signature.MD5Signature": "md5",
    "org.apache.nutch.crawl.MD5Signature": "md5",
    "nutchy.core.signature.TextProfileSignature": "profile",
    "org.apache.nutch.crawl.TextProfileSignature": "profile",
}


def _choice(settings: BaseSettings, name: str, choices: dict[str, str]) -> str:
    value = settings.get(name)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return choices[value]


def fetch_schedule(settings: BaseSettings) -> FetchSchedule:
    """The schedule ``NUTCH_DB_FETCH_SCHEDULE_CLASS`` names, configured."""
    default = get_int(settings, "NUTCH_DB_FETCH_INTERVAL_DEFAULT", 0)
    maximum = get_int(settings, "NUTCH_DB_FETCH_INTERVAL_MAX", 0)
    if _choice(settings, "NUTCH_DB_FETCH_SCHEDULE_CLASS", SCHEDULES) == "default":
        return DefaultFetchSchedule(default, maximum)
    prefix = "NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_"
    try:
        return AdaptiveFetchSchedule(
            default,
            maximum,
            inc_rate=get_float(settings, prefix + "INC_RATE"),
            dec_rate=get_float(settings, prefix + "DEC_RATE"),
            min_interval=get_int(settings, prefix + "MIN_INTERVAL", 0),
            max_adaptive_interval=get_int(settings, prefix + "MAX_INTERVAL", 0),
            sync_delta=get_bool(settings, prefix + "SYNC_DELTA"),
            sync_delta_rate=get_float(settings, prefix + "SYNC_DELTA_RATE"),
        )
    except ValueError as exc:
        raise ConfigError(f"{prefix}MIN_INTERVAL/MAX_INTERVAL: {exc}") from None


def signature(settings: BaseSettings) -> Signature:
    """The signature ``NUTCH_DB_SIGNATURE_CLASS`` names, configured."""
    if _choice(settings, "NUTCH_DB_SIGNATURE_CLASS", SIGNATURES) == "md5":
        return MD5Signature()
    return TextProfileSignature(
        get_int(settings, "NUTCH_DB_SIGNATURE_TEXT_PROFILE_MIN_TOKEN_LEN", 0),
        get_float(settings, "NUTCH_DB_SIGNATURE_TEXT_PROFILE_QUANT_RATE"),
    )


def update_config(settings: BaseSettings, batch_id: str | None) -> UpdateConfig:
    """The :class:`~nutchy.core.update.UpdateConfig` of *settings*, for *batch_id*."""
    return UpdateConfig(
        schedule=fetch_schedule(settings),
        scoring=OPICScoring(
            get_float(settings, "NUTCH_DB_SCORE_INJECTED"),
            get_float(settings, "NUTCH_DB_SCORE_LINK_INTERNAL"),
            get_float(settings, "NUTCH_DB_SCORE_LINK_EXTERNAL"),
        ),
        retry_max=get_int(settings, "NUTCH_DB_FETCH_RETRY_MAX", 0),
        max_inlinks=get_int(settings, "NUTCH_DB_UPDATE_MAX_INLINKS", 0),
        additions_allowed=get_bool(settings, "NUTCH_DB_UPDATE_ADDITIONS_ALLOWED"),
        batch_id=batch_id,
    )


@dataclass(frozen=True, slots=True)
class _Accept:
    """An outlink as parse keeps it: normalized, and accepted by *rules* (``None`` if not).

    A class rather than a closure so that a :class:`~nutchy.core.parse.ParseConfig` pickles, for
    the tasks of ``nutchy parse -numTasks K``."""

    rules: RegexURLFilter

    def __call__(self, url: str) -> str | None:
        try:
            normalized = normalize_url(url)
        except ValueError:
            return None
        return normalized if self.rules.accepts(normalized) else None


def parse_config(settings: BaseSettings) -> ParseConfig:
    """The :class:`~nutchy.core.parse.ParseConfig` of *settings* (without a time limit)."""
    return ParseConfig(
        accept=_Accept(url_filter(settings)),
        max_outlinks=get_int(settings, "NUTCH_DB_MAX_OUTLINKS_PER_PAGE"),
        max_anchor_length=get_int(settings, "NUTCH_DB_MAX_ANCHOR_LENGTH", 0),
        max_target_length=get_int(settings, "NUTCH_PARSER_HTML_OUTLINKS_MAX_TARGET_LENGTH", 1),
        ignore_internal_links=get_bool(settings, "NUTCH_DB_IGNORE_INTERNAL_LINKS"),
        ignore_external_links=get_bool(settings, "NUTCH_DB_IGNORE_EXTERNAL_LINKS"),
    )


def finish_batch(
    table: WebTable,
    settings: BaseSettings,
    batch_id: str | None,
    *,
    now: int,
    parse: bool = True,
    ahead: ReadAhead | None = None,
    parsed: Callable[[ParseCounts], object] | None = None,
) -> tuple[ParseCounts | None, UpdateCounts]:
    """The end of a round, after the fetch of *batch_id*: parse what the fetch did not (``nutchy
    parse ID -resume``; skipped when *parse* is false), then ``nutchy updatedb ID`` at *now*,
    with the batch's shares read *ahead* during the fetch when given. *parsed*, when given, is
    called with the parse's counts as soon as it ends, before updatedb starts."""
    counts = None
    if parse:
        counts = parse_batch(
            table,
            batch_id,
            config=parse_config(settings),
            signature=signature(settings),
            skip_truncated=get_bool(settings, "NUTCH_PARSER_SKIP_TRUNCATED"),
            timeout=get_float(settings, "NUTCH_PARSER_TIMEOUT"),
            resume=True,  # pages the fetch parsed already (NUTCH_FETCHER_PARSE)
        )
        if parsed is not None:
            parsed(counts)
    config = update_config(settings, batch_id)
    updated = updatedb(table, batch_id, now=now, config=config, ahead=ahead)
    return counts, updated


#: The stats that count the pages of a fetch cut short: at the content limit (fetched, then
#: parsed up to the cut or skipped), and at ``db.max.outlinks.per.page``.
CUT_STATS: Final = (
    "nutch/fetch/truncated",
    "nutch/parse/truncated",
    "nutch/parse/skipped/truncated",
    "nutch/parse/outlinks_cut",
)


def cut_summary(truncated: int, parsed: int, skipped: int, outlinks_cut: int) -> str:
    """What a round's line says of its pages cut short (empty when none was).

    >>> cut_summary(3, 2, 1, 4)
    '; 3 truncated (2 parsed up to the cut, 1 not parsed), 4 with outlinks cut'
    >>> cut_summary(0, 0, 0, 0)
    ''
    """
    parts = []
    if truncated:
        how = [
            f"{n} {what}"
            for n, what in ((parsed, "parsed up to the cut"), (skipped, "not parsed"))
            if n
        ]
        parts.append(f"{truncated} truncated" + (f" ({', '.join(how)})" if how else ""))
    if outlinks_cut:
        parts.append(f"{outlinks_cut} with outlinks cut")
    return f"; {', '.join(parts)}" if parts else ""
