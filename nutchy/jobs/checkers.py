"""Nutch's checkers and ``freegen``: one URL through the cycle, and a batch from a URL list.

- :func:`freegen`: the URLs of seed files injected when new, then marked with a new batch id
  whatever their schedule (Nutch 1.x's ``freegen``), for ``nutchy fetch``/``scrapy crawl nutch
  -a batch=`` and the rest of the cycle as any batch;
- :func:`check_url`: ``nutchy parsechecker`` and ``nutchy indexchecker``: one URL fetched,
  parsed and updated exactly as the crawl would (the same settings, robots.txt, URL filter,
  fetch child), in a scratch table of its own beside the crawl's, which is never written: the
  URL's row is copied from the crawl's table first, so that what updatedb would set (status,
  next fetch, interval, score) is what it would set on the crawl's row.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from nutchy.core.generate import GENERATE_TIME_KEY, PARTITION_KEY, batch_time
from nutchy.core.inject import InjectMode
from nutchy.core.status import CrawlStatus, Mark, ParseStatus, ParseStatusMajor
from nutchy.core.urls import InvalidURL, normalize_url, reverse_url
from nutchy.core.webpage import ALL_FIELDS
from nutchy.jobs import _settings
from nutchy.jobs._cycle import parse_config, signature, update_config
from nutchy.jobs.crawl import start_fetch_in_child
from nutchy.jobs.inject import InjectOptions, InjectResult, _parse_lines, inject
from nutchy.jobs.parse import parse_batch
from nutchy.jobs.updatedb import updatedb
from nutchy.store import open_table
from nutchy.store.schema import build_update

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from scrapy.settings import BaseSettings

    from nutchy.core.webpage import WebPage
    from nutchy.store.schema import RowUpdate
    from nutchy.store.table import WebTable

__all__ = ["CheckResult", "FreegenResult", "check_lines", "check_url", "freegen", "index_lines"]

#: Settings of the scratch crawl of :func:`check_url` (its own embedded table).
_SCRATCH: Final = {"NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.embedded.EmbeddedStore"}


@dataclass
class FreegenResult:
    """What :func:`freegen` did: the inject of the new URLs, and the rows marked."""

    batch_id: str
    inject: InjectResult
    marked: int = 0
    #: Rows already in another batch, left to it.
    in_batch: int = 0


def freegen(
    table: WebTable, files: Sequence[Path], options: InjectOptions, *, now: int, batch_id: str
) -> FreegenResult:
    """Inject the URLs of *files* that are new (as ``nutchy inject`` does, URL filter and all),
    then mark every URL of the files with *batch_id*, due or not, except rows already in
    another batch. It holds the ``generate`` lock, as generate does, so that no generate marks
    these rows meanwhile. One partition (``-numFetchers`` 1)."""
    options = InjectOptions(options.fetch_interval, options.score, options.url_filter)
    with table.store.exclusive("generate") as still_held:
        result = FreegenResult(batch_id, inject(table, files, options, now=now, workers=0))
        keys = sorted(_keys(files, options))
        if not keys:
            return result
        metadata: dict[str, Any] = {PARTITION_KEY: (0).to_bytes(4, "big", signed=True)}
        if batch_time(batch_id) is None:
            metadata[GENERATE_TIME_KEY] = now.to_bytes(8, "big", signed=True)

        def mark(key: str, page: WebPage | None) -> RowUpdate | None:
            if page is None:  # not written: the store failed, or the URL filter changed
                return None
            if Mark.GENERATE in page.markers:
                result.in_batch += 1
                return None
            result.marked += 1
            return build_update(
                key,
                {"batch_id": batch_id},
                {"markers": {Mark.GENERATE: batch_id}, "metadata": metadata},
            )

        still_held()
        table.modify(keys, ("fetch_time", "markers"), mark)
    return result


def _keys(files: Sequence[Path], options: InjectOptions) -> set[str]:
    keys: set[str] = set()
    for path in files:
        try:
            raws = path.read_bytes().splitlines()
        except OSError:
            continue  # inject has said so
        for parsed in _parse_lines(raws, options.url_filter):
            key = getattr(parsed, "key", None)
            if key is not None:
                keys.add(key)
    return keys


@dataclass
class CheckResult:
    """One URL through the cycle: the row before (``None``: new), after the fetch and parse,
    and after updatedb; the fetch child's exit code and stats; the URLs updatedb would add."""

    url: str
    before: WebPage | None = None
    fetched: WebPage | None = None
    updated: WebPage | None = None
    code: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    new_urls: int = 0
    #: Why nothing was fetched (the URL is not valid or the URL filter rejects it).
    refused: str | None = None


def check_url(
    settings: BaseSettings,
    overrides: Mapping[str, Any],
    url: str,
    *,
    now: int,
    filter_urls: bool = True,
) -> CheckResult:
    """Fetch, parse and update *url* with *settings* (*overrides* are the command line's ``-s``,
    passed on to the fetch child) in a scratch table; the crawl's table is only read."""
    try:
        url = normalize_url(url)
    except InvalidURL as exc:
        return CheckResult(url, refused=f"not a valid URL: {exc}")
    result = CheckResult(url)
    if filter_urls and not _settings.url_filter(settings).accepts(url):
        result.refused = "the URL filter rejects it (-noFilter to fetch it anyway)"
        return result
    key = reverse_url(url)
    with open_table(settings) as crawl_table:
        result.before = crawl_table.get(url) if crawl_table.exists() else None
    scratch = Path(tempfile.mkdtemp(prefix="nutchy-check-"))
    try:
        scratch_settings = settings.copy()
        scratch_settings.setdict({**_SCRATCH, "NUTCH_CRAWL_DIR": str(scratch)}, "cmdline")
        batch_id = f"check-{now}"
        with open_table(scratch_settings) as table:
            table.create()
            if result.before is not None:
                table.put(result.before, ALL_FIELDS)
            seeds = scratch / "url.txt"
            seeds.write_text(url + "\n", encoding="utf-8")
            options = InjectOptions.from_settings(
                scratch_settings, mode=InjectMode.KEEP, filter_urls=False
            )
            # The scratch row is fetched now: its batch marks (if the crawl's row is in a batch)
            # are replaced by the check's own.
            table.update(key, entries={"markers": {Mark.GENERATE: None, Mark.FETCH: None}})
            freegen(table, [seeds], options, now=now, batch_id=batch_id)
        child = start_fetch_in_child(
            batch_id, {**overrides, **_SCRATCH, "NUTCH_CRAWL_DIR": str(scratch)}
        )()
        result.code, result.stats = child.code, child.stats
        with open_table(scratch_settings) as table:
            parse_batch(
                table,
                batch_id,
                config=parse_config(scratch_settings),
                signature=signature(scratch_settings),
                skip_truncated=_settings.get_bool(scratch_settings, "NUTCH_PARSER_SKIP_TRUNCATED"),
                timeout=_settings.get_float(scratch_settings, "NUTCH_PARSER_TIMEOUT"),
                resume=True,
            )
            result.fetched = table.get(url)
            targets = list(result.fetched.outlinks) if result.fetched is not None else []
            counts = updatedb(
                table, batch_id, now=now, config=update_config(scratch_settings, batch_id)
            )
            result.updated = table.get(url)
        result.new_urls = min(counts.new_rows, _unknown(settings, targets))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _unknown(settings: BaseSettings, urls: Sequence[str]) -> int:
    """How many of *urls* the crawl's table does not hold."""
    keys: list[str] = []
    for url in urls:
        try:
            keys.append(reverse_url(url))
        except InvalidURL:
            continue
    with open_table(settings) as table:
        if not table.exists():
            return len(keys)
        known = table.get_many(keys, ("fetch_time", "status", "score"))
    return len(keys) - len(known)


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Outlinks listed by :func:`check_lines` (all are counted).
OUTLINKS_SHOWN: Final = 20


def _clean(text: str) -> str:
    """*text* on one line, its control characters shown as ``\\xNN``: a page cannot write to
    the terminal."""
    text = " ".join(text.split())
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _when(ms: int, now: int) -> str:
    if ms <= 0:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))
    days = (ms - now) / 86_400_000
    return f"{stamp} ({'in ' if days >= 0 else ''}{abs(days):.1f} days{' ago' if days < 0 else ''})"


def _status(page: WebPage | None) -> str:
    if page is None:
        return "not in the table"
    try:
        return f"{CrawlStatus(page.status).name.lower()} ({page.status})"
    except ValueError:
        return str(page.status)


def check_lines(result: CheckResult, *, text_chars: int = 500, now: int | None = None) -> list[str]:
    """What ``nutchy parsechecker`` prints of *result*."""
    fetched, updated = result.fetched, result.updated
    assert fetched is not None and updated is not None
    now = int(time.time() * 1000) if now is None else now
    protocol = fetched.protocol_status
    out = [f"url:          {result.url}"]
    if protocol is not None:
        args = f" {_clean(' '.join(protocol.args))}" if protocol.args else ""
        out.append(f"fetch:        {protocol.name}{args}")
    content = fetched.content
    size = "no content" if content is None else f"{len(content):,} bytes"
    out.append(f"content:      {fetched.content_type or '-'}, {size}")
    out.append(f"headers:      {len(fetched.headers)}")
    out += [f"  {_clean(name)}: {_clean(value or '')}" for name, value in fetched.headers.items()]
    parse = fetched.parse_status
    out.append(f"parse:        {'-' if parse is None else _parse_status(parse)}")
    out.append(f"title:        {_clean(fetched.title or '')}")
    text = _clean(fetched.text or "")
    more = f" … ({len(text):,} characters)" if len(text) > text_chars else ""
    out.append(f"text:         {text[:text_chars]}{more}")
    out.append(f"outlinks:     {len(fetched.outlinks)}")
    for target, anchor in list(fetched.outlinks.items())[:OUTLINKS_SHOWN]:
        out.append(f"  {_clean(target)}  {_clean(anchor or '')}")
    if len(fetched.outlinks) > OUTLINKS_SHOWN:
        out.append(f"  … and {len(fetched.outlinks) - OUTLINKS_SHOWN} more")
    signature = fetched.signature.hex() if fetched.signature else "-"
    out.append(f"signature:    {signature}")
    before = result.before
    out.append("updatedb would set:")
    out.append(f"  status:     {_status(updated)}, was {_status(before)}")
    out.append(f"  next fetch: {_when(updated.fetch_time, now)}")
    out.append(
        f"  interval:   {updated.fetch_interval} s ({updated.fetch_interval / 86400:.1f} days)"
    )
    was = "-" if before is None else f"{before.score:g}"
    out.append(f"  score:      {updated.score:g}, was {was}")
    out.append(f"  modified:   {_when(updated.modified_time, now)}")
    out.append(f"  new URLs:   {result.new_urls} (outlinks the table does not hold)")
    return out


def index_lines(settings: BaseSettings, page: WebPage) -> list[str]:
    """What ``nutchy indexchecker`` adds: the index's verdict on *page* and its document."""
    from nutchy.index.chain import load_filters
    from nutchy.jobs.index import IndexAction, index_action

    action = index_action(page)
    if action is not IndexAction.INDEX:
        return [f"index:        {action.name.lower()}: not a document (status, parse or redirect)"]
    doc = load_filters(settings).document(page)
    if doc is None:
        return ["index:        an indexing filter keeps it out (e.g. a noindex robots meta tag)"]
    out = ["index:        this document:"]
    for name, value in doc.fields().items():
        shown = value if isinstance(value, (list, tuple)) else [value]
        out.extend(f"  {name}: {_clean(str(item))[:500]}" for item in shown)
    return out


def _parse_status(status: ParseStatus) -> str:
    try:
        major = ParseStatusMajor(status.major).name.lower()
    except ValueError:
        major = str(status.major)
    return major if not status.minor else f"{major} ({status.minor})"
