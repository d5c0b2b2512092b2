"""The parse of fetched pages, without Scrapy: :class:`FetchedPage`, :class:`PageParser`, and
the fields of the items they give.

:class:`~nutchy.pipelines.NutchParsePipeline` parses in a thread of the fetch's process or in
the parse process (:mod:`nutchy._parsework`); the parse process imports this module, the core,
the store and lxml, and neither Scrapy nor Twisted (about 30 MB less than a process that imports
Scrapy). So the parser returns each page's item as its fields (a dict), which the pipeline makes
a :class:`~nutchy.items.PageItem` of, and the page it takes is this module's
:class:`FetchedPage`, whose subclass :class:`nutchy.pipelines.FetchedPage` is what the ``nutch``
spider yields.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from w3lib.encoding import html_to_unicode

from nutchy.core.parse import (
    HTML_TYPES,
    ParseConfig,
    is_truncated,
    parse_change,
    parse_content,
)
from nutchy.core.signature import Signature
from nutchy.core.status import (
    CrawlStatus,
    Mark,
    ParseStatus,
    ParseStatusMajor,
    ParseStatusMinor,
    crawl_status_name,
)
from nutchy.core.webpage import WebPage
from nutchy.exceptions import ConfigError, StoreError
from nutchy.jobs._batches import ALL_BATCHES
from nutchy.jobs._cycle import parse_config, signature, update_config
from nutchy.jobs._settings import get_bool, get_float, get_int
from nutchy.jobs.updatedb import ParsedShares
from nutchy.store import open_table
from nutchy.store.schema import RowUpdate, build_update

if TYPE_CHECKING:
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.store.table import WebTable

logger = logging.getLogger(__name__)

__all__ = [
    "FetchedPage",
    "Outlinks",
    "PageParser",
    "content_fields",
    "fetch_time_iso",
    "item_parse_fields",
    "outlinks",
    "parse_status_name",
    "parsed_shares",
]


@dataclass
class FetchedPage:
    """A page fetched successfully, as :class:`PageParser` takes it (the ``nutch`` spider yields
    the subclass :class:`nutchy.pipelines.FetchedPage`); its *content* is bytes and is left out
    of its repr."""

    key: str
    url: str
    batch_id: str
    base_url: str | None
    content_type: str | None
    headers: dict[str, str] = field(repr=False)
    content: bytes = field(repr=False)
    truncated: bool = False
    #: The HTTP status code of the answer.
    http_status: int = 200
    #: When the answer came, in ms since the epoch (the row's ``f:ts``).
    fetch_time: int = 0
    #: The fetch's outcome (its row update), when the parser is to write it with the parse
    #: (:mod:`nutchy.outcomes`); left out of its repr.
    outcome: RowUpdate | None = field(default=None, repr=False)


#: What the parser reads of the rows of the pages it parses: for the signature move and the
#: item's score; and their cash (``mtdt:_csh_``) too when it keeps updatedb's shares.
_READ: Final = ("signature", "prev_signature", "markers", "score")
_SHARE_READ: Final = (*_READ, "metadata")


class PageParser:
    """Parses :class:`FetchedPage` objects and writes their parse to *table*: the work of
    :class:`~nutchy.pipelines.NutchParsePipeline`, without Scrapy, so that it runs in a thread
    of the fetch's process or in a process of its own (:mod:`nutchy._parsework`).

    :meth:`process` reads the pages' rows (for the signature move and the score), parses them,
    holds their parse columns and writes what it holds when asked or when *flush_size* are held.
    It counts what it did in :attr:`stats` (stats keys and amounts, taken by the caller) and
    keeps the first store error it met in :attr:`error`.
    """

    def __init__(
        self,
        table: WebTable,
        *,
        config: ParseConfig,
        signature: Signature,
        skip_truncated: bool,
        timeout: float,
        flush_size: int,
        item_content: bool,
        item_parse_fields: bool = True,
        shares: ParsedShares | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self.signature = signature
        self.skip_truncated = skip_truncated
        self.timeout = timeout
        self.flush_size = flush_size
        self.item_content = item_content
        #: whether the items carry ``title``, ``text`` and ``outlinks`` (:func:`item_parse_fields`)
        self.item_parse_fields = item_parse_fields
        #: what was counted since the caller last took it
        self.stats: dict[str, int] = {}
        #: the first store error not reported yet
        self.error: str | None = None
        #: The parses not written yet, and the fetch outcomes given with their pages.
        self._updates: list[RowUpdate] = []
        #: the keys of the rows whose outcome is among them
        self._outcomes: list[str] = []
        #: the keys of the rows whose outcome was written, and of those whose write failed,
        #: since the caller last took them
        self.outcomes_written: list[str] = []
        self.outcomes_failed: list[str] = []
        #: keeps updatedb's shares of the pages parsed with ``shares=True`` (:meth:`process`)
        self.shares = shares
        #: (batch, page as its parse leaves it) of those pages: held with their parses, then
        #: written, their shares not kept yet
        self._to_share: list[tuple[str, WebPage]] = []
        self._shareable: list[tuple[str, WebPage]] = []
        self._sharing = False

    @classmethod
    def from_settings(cls, settings: BaseSettings, table: WebTable | None = None) -> Self:
        """The parser of *settings*, writing to *table* (the table they name by default)."""
        return cls(open_table(settings) if table is None else table, **cls.options(settings))

    @staticmethod
    def options(settings: BaseSettings) -> dict[str, Any]:
        """The arguments of the parser of *settings* but its table: values that pickle, for the
        parse process, which has no settings of its own."""
        return {
            "config": parse_config(settings),
            "signature": signature(settings),
            "skip_truncated": get_bool(settings, "NUTCH_PARSER_SKIP_TRUNCATED"),
            "timeout": get_float(settings, "NUTCH_PARSER_TIMEOUT"),
            "flush_size": get_int(settings, "NUTCH_FETCHER_FLUSH_SIZE", 1),
            "item_content": get_bool(settings, "NUTCH_ITEM_CONTENT"),
            "item_parse_fields": item_parse_fields(settings),
            "shares": parsed_shares(settings),
        }

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def take(self) -> tuple[dict[str, int], str | None]:
        """What was counted, and the store error met, since the last call."""
        stats, self.stats = self.stats, {}
        error, self.error = self.error, None
        return stats, error

    def take_outcomes(self) -> tuple[list[str], list[str]]:
        """The keys of the rows whose fetch outcome was written, and of those whose outcome
        could not be, since the last call."""
        written, self.outcomes_written = self.outcomes_written, []
        failed, self.outcomes_failed = self.outcomes_failed, []
        return written, failed

    def read_shares(self) -> None:
        """Keep updatedb's shares (:class:`~nutchy.jobs.updatedb.ParsedShares`) of the pages
        parsed with ``shares=True`` whose parses were written since the last call."""
        written, self._shareable = self._shareable, []
        if self.shares is None or not written:
            return
        by_batch: dict[str, list[WebPage]] = {}
        for batch_id, page in written:
            if batch_id != ALL_BATCHES:
                by_batch.setdefault(batch_id, []).append(page)
        for batch_id, pages in by_batch.items():
            self.shares.add(batch_id, pages)

    def take_shares(self, batch_id: str) -> list[Any]:
        """The shares kept of *batch_id*'s pages (see :meth:`read_shares`)."""
        self.read_shares()
        return [] if self.shares is None else self.shares.take(batch_id)

    def process(
        self, pages: Sequence[FetchedPage], write: bool, *, shares: bool = False
    ) -> list[dict[str, Any]]:
        """Parse *pages* and return their items' fields (those of a
        :class:`~nutchy.items.PageItem`, and of a :class:`~nutchy.items.PageContentItem` with
        *item_content*), in the order the item sets them; write the parses held when *write* or when
        there are *flush_size* updates held. When the rows cannot be read, the pages still give
        their items (without score), but their parses are not written: ``nutchy parse ID -resume``
        parses those whose fetch was written, the others are fetched again.

        The fetch outcome a page brings (:attr:`FetchedPage.outcome`) is held before its parse,
        whatever the parse does, and written in the same write (one update of the row: the
        store merges them, the outcome first); :meth:`take_outcomes` says which were written.

        With *shares*, the next :meth:`read_shares` keeps updatedb's shares of the pages whose
        parses are written (the parse process calls it once it has answered); their rows' cash is
        read with the rest."""
        stored: dict[str, WebPage] = {}
        readable = True
        sharing = shares and self.shares is not None
        if pages:
            try:
                stored = self.table.get_many(
                    [p.key for p in pages], _SHARE_READ if sharing else _READ
                )
            except StoreError as exc:
                self._not_written(len(pages), exc)
                readable = False
        for page in pages:
            if page.outcome is not None:
                self._updates.append(page.outcome)
                self._outcomes.append(page.key)
        self._sharing = sharing
        items = [self._parse(page, stored.get(page.key), keep=readable) for page in pages]
        if self._updates and (write or len(self._updates) >= self.flush_size):
            updates, self._updates = self._updates, []
            self._write(updates)
        return items

    def _parse(self, fetched: FetchedPage, row: WebPage | None, *, keep: bool) -> dict[str, Any]:
        """Parse *fetched* (whose row, read before, is *row*), hold the parse for writing when
        *keep*, and return its item's fields."""
        item: dict[str, Any] = {
            "url": fetched.url,
            "batch_id": fetched.batch_id,
            "status": crawl_status_name(CrawlStatus.FETCHED),
            "fetch_time": fetch_time_iso(fetched.fetch_time),
            "http_status": fetched.http_status,
            "content_type": fetched.content_type or "",
            "truncated": fetched.truncated,
        }
        if row is not None:
            item["score"] = row.score
        content_type = fetched.headers.get("Content-Type") or fetched.content_type
        if self.item_content:
            item.update(content_fields(fetched.content, content_type))
        page = WebPage(
            fetched.key,
            status=CrawlStatus.FETCHED,
            base_url=fetched.base_url,
            content=fetched.content,
            content_type=fetched.content_type,
            headers=fetched.headers,
            signature=row.signature if row else None,
            prev_signature=row.prev_signature if row else None,
            metadata={"truncated-content": b"true"} if fetched.truncated else {},
            markers={**(row.markers if row else {}), Mark.FETCH: fetched.batch_id},
        )
        if self.skip_truncated and is_truncated(page):
            self.count("nutch/parse/skipped/truncated")
            return item
        config = self.config
        if self.timeout >= 0:
            config = replace(config, clock=time.monotonic, deadline=time.monotonic() + self.timeout)
        result = parse_content(
            fetched.base_url or fetched.url, fetched.content, content_type, config
        )
        self.count(f"nutch/parse/status/{result.status.major}/{result.status.minor}")
        if fetched.truncated:
            self.count("nutch/parse/truncated")  # parsed up to the cut
        if result.outlinks_cut:
            self.count("nutch/parse/outlinks_cut")
        change = parse_change(page, result, self.signature)
        if keep:
            self._updates.append(
                build_update(fetched.key, change.fields, change.entries, change.replace)
            )
            parsed_links = change.replace.get("outlinks")
            if self._sharing and row is not None and parsed_links is not None:
                # the row's outlinks once written: what updatedb shares out (another parse
                # status leaves the row's outlinks, or adds to them: updatedb reads it)
                shared = WebPage(
                    fetched.key,
                    outlinks=cast("dict[str, str]", parsed_links),
                    metadata=row.metadata,
                    markers=row.markers,
                )
                self._to_share.append((fetched.batch_id, shared))
        item["parse_status"] = parse_status_name(result.status)
        if self.item_parse_fields:
            if "title" in change.fields:
                item["title"] = change.fields["title"]
                item["text"] = change.fields["text"]
            links = change.replace.get("outlinks", change.entries.get("outlinks"))
            if links is not None:
                item["outlinks"] = outlinks(cast("dict[str, str]", links))
        new_signature = change.fields.get("signature")
        if isinstance(new_signature, bytes):
            item["signature"] = new_signature.hex()
        return item

    def _write(self, updates: list[RowUpdate]) -> None:
        # The outcomes' own count is the fetch's (nutchy.outcomes): those not written go back to
        # it, which writes them, or counts them as not written.
        outcomes, self._outcomes = self._outcomes, []
        to_share, self._to_share = self._to_share, []
        parses = len(updates) - len(outcomes)
        started = time.monotonic()
        try:
            self.table.write(updates)
        except StoreError as exc:
            self.outcomes_failed += outcomes
            self._not_written(parses, exc)
        except Exception:
            self.outcomes_failed += outcomes
            self.count("nutch/store/put_error", parses)
            logger.exception("Could not write the parse of %(n)d pages", {"n": parses})
        else:
            self.outcomes_written += outcomes
            self._shareable += to_share
            if outcomes:
                # a write of fetch outcomes, as the fetch's own writer counts its writes (the
                # metrics' store write latency, nutchy.metrics)
                self.count("nutch/store/writes")
                self.count("nutch/store/write_us", round((time.monotonic() - started) * 1e6))

    def _not_written(self, count: int, exc: StoreError) -> None:
        """The parse of *count* pages was not written because of *exc*: counted, and kept."""
        self.count("nutch/store/put_error", count)
        self.count("nutch/parse/not_written", count)
        if self.error is None:
            self.error = f"{count} {exc!s}"


def parsed_shares(settings: BaseSettings) -> ParsedShares | None:
    """What keeps updatedb's shares of the pages a parse process parses, when asked
    (:class:`~nutchy.jobs.updatedb.ParsedShares`), for the updatedb of *settings*; ``None`` when
    ``NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS`` is 0 (no read ahead), or when updatedb's settings are
    wrong: the fetch does not depend on them, and updatedb says what is wrong when it runs."""
    limit = get_int(settings, "NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS", 0)
    if not limit:
        return None
    try:
        config = update_config(settings, None)
    except (ConfigError, ValueError):
        return None
    return ParsedShares(config, limit)


#: nutchy's own item pipelines: none of them reads an item's fields.
_OWN_PIPELINES: Final = frozenset(
    {
        "nutchy.pipelines.NutchDbUpdatePipeline",
        "nutchy.index.pipeline.NutchIndexPipeline",
    }
)
_PARSE_PIPELINE: Final = "nutchy.pipelines.NutchParsePipeline"


def item_parse_fields(settings: BaseSettings) -> bool:
    """Whether the items of parsed pages carry ``title``, ``text`` and ``outlinks``:
    ``NUTCH_ITEM_PARSE_FIELDS`` when it is set, else whether anything after the parse pipeline
    may read them: feed exports (``FEEDS``), ``NUTCH_ITEM_CONTENT``, or an item pipeline ordered
    after the parse pipeline other than nutchy's own (which read no item). A pipeline given in
    a way this cannot name counts as one that reads them.

    The fields are the bulk of an item (the page's text, every link as a dict: 30 KB of pickle a
    page on a documentation site, against 0.2 KB without them), which the fetch's process reads
    back and makes into an item for each page (docs/parse.md, benchmarks/bench_items.py)."""
    # Here rather than above: the parse process imports this module, and no Scrapy.
    from nutchy._checks import _name, _orders

    if settings.get("NUTCH_ITEM_PARSE_FIELDS") is not None:
        return get_bool(settings, "NUTCH_ITEM_PARSE_FIELDS")
    if settings.getdict("FEEDS") or get_bool(settings, "NUTCH_ITEM_CONTENT"):
        return True
    orders = {
        _name(component): order for component, order in _orders(settings, "ITEM_PIPELINES").items()
    }
    parse_order = orders.pop(_PARSE_PIPELINE, None)
    if parse_order is None:
        return True  # the parse pipeline is a subclass, or ordered by name elsewhere: keep all
    return any(order > parse_order and name not in _OWN_PIPELINES for name, order in orders.items())


class Outlinks(list[dict[str, str]]):
    """The outlinks of a page: a list of ``{"url": …, "anchor": …}`` dicts.

    It is a list in every way but one: as a string it is JSON. Scrapy's CSV exporter writes a
    list of dicts with ``str()``, which would be Python's ``repr``; this way a CSV cell holds
    the outlinks as JSON, which any CSV reader can decode. JSON lines and XML exports write the
    list itself. (Scrapy's marshal exporter, which takes built-in types only, cannot write it.)
    """

    __slots__ = ()

    def __str__(self) -> str:
        return json.dumps(list(self), ensure_ascii=False)


def outlinks(targets: Mapping[str, str]) -> Outlinks:
    """The :class:`Outlinks` of *targets* (target → anchor, as the parse gives them)."""
    return Outlinks({"url": url, "anchor": anchor} for url, anchor in targets.items())


def fetch_time_iso(ms: int) -> str:
    """*ms* since the epoch as ISO 8601 in UTC, with milliseconds and ``Z``."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_status_name(status: ParseStatus) -> str:
    """The name of a parse status in items: ``notparsed``, or the name of its minor code.

    >>> parse_status_name(ParseStatus(1, 0)), parse_status_name(ParseStatus(2, 200, ("timeout",)))
    ('success_ok', 'failed_exception')
    >>> parse_status_name(ParseStatus(0, 0)), parse_status_name(ParseStatus(2, 299))
    ('notparsed', 'failed_299')
    """
    if status.major == ParseStatusMajor.NOTPARSED:
        return "notparsed"
    try:
        return ParseStatusMinor(status.minor).name.lower()
    except ValueError:
        try:
            major = ParseStatusMajor(status.major).name.lower()
        except ValueError:
            major = str(status.major)
        return f"{major}_{status.minor}"


#: Media types outside ``text/*`` whose content is text.
_TEXT_APPLICATION_TYPES: Final = frozenset({"application/json", "application/xml"})


def content_fields(content: bytes, content_type: str | None) -> dict[str, object]:
    """The ``content`` and ``content_base64`` fields of a page with *content* and *content_type*
    (its ``Content-Type`` header).

    >>> content_fields("é".encode("latin-1"), "text/plain; charset=iso-8859-1")
    {'content': 'é', 'content_base64': False}
    >>> content_fields(b"\\x89PNG", "image/png")
    {'content': 'iVBORw==', 'content_base64': True}
    """
    media = (content_type or "").split(";")[0].strip().lower()
    if (
        media.startswith("text/")
        or media in HTML_TYPES
        or media in _TEXT_APPLICATION_TYPES
        or media.endswith(("+xml", "+json"))
    ):
        _, text = html_to_unicode(content_type, content)
        return {"content": text, "content_base64": False}
    return {"content": base64.b64encode(content).decode("ascii"), "content_base64": True}
