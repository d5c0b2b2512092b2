"""Indexing filters: the steps that turn a row of the web table into a :class:`Document`.

As in Nutch, the ``nutchy index`` job hands each indexable page through a chain of filters, in
the order ``NUTCH_INDEXING_FILTERS`` gives (a dict of class path to order number, as Scrapy's
``ITEM_PIPELINES``; ``None`` turns a filter off). Each filter gets the document built so far and
the page, and returns the document (changed or not), or ``None``: the page is not indexed, and
is deleted from the index if it was there.

A filter is any class with:

- ``fields``, the WebPage fields it reads (the job reads the union of all filters' fields, and
  no more, from the table);
- ``filter(doc, page)``;
- optionally ``more_fields(page)``, the fields it needs for this page beyond ``fields``: the job
  reads them for that row alone before calling ``filter`` (the robots filter reads a page's
  content only when its parse left neither title nor text);
- optionally ``from_settings(settings)``, a classmethod that reads its settings and returns an
  instance (Scrapy's ``from_crawler`` pattern without a crawler); without it, the class is called
  with no argument.

The default chain is Nutch's ``index-basic``, ``index-anchor`` and ``index-metadata`` plugins,
and the robots ``noindex`` rule of Nutch's HTML parser (``indexer.delete.robots.noindex``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar, Protocol

from nutchy.core.urls import InvalidURL, host_of
from nutchy.exceptions import ConfigError
from nutchy.index.document import STANDARD_FIELDS
from nutchy.jobs._settings import get_bool, get_float, get_int

if TYPE_CHECKING:
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.core.webpage import WebPage
    from nutchy.index.document import Document

__all__ = [
    "AnchorIndexingFilter",
    "BasicIndexingFilter",
    "IndexingFilter",
    "MetadataIndexingFilter",
    "RobotsMetaIndexingFilter",
    "clean_text",
    "robots_directives",
]


class IndexingFilter(Protocol):
    """What the index job asks of an indexing filter (see the module docstring)."""

    #: The :class:`~nutchy.core.webpage.WebPage` fields :meth:`filter` reads.
    fields: frozenset[str]

    def filter(self, doc: Document, page: WebPage) -> Document | None:
        """Return *doc* with this filter's fields added, or ``None`` to keep *page* out of the
        index."""


def clean_text(text: str, limit: int = -1) -> str:
    """*text* cut to *limit* characters (no limit when < 0), with any lone surrogate (text that
    cannot be written as UTF-8) replaced by U+FFFD, so that every writer can store it.

    >>> clean_text("ab\\ud800c"), clean_text("abcdef", 3)
    ('ab\\ufffdc', 'abc')
    """
    if 0 <= limit < len(text):
        text = text[:limit]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Paired surrogates become their character, unpaired ones U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class BasicIndexingFilter:
    """Nutch's ``index-basic``: host, title, text, content type, fetch and modification times,
    signature and boost.

    *max_title_length* and *max_content_length* cut title and text (characters; no limit when
    < 0), *score_power* makes the boost ``score ** score_power`` (Nutch's ``indexerScore``).
    The fetch time (``tstamp``) is the time of the last fetch, which updatedb keeps as the
    row's previous fetch time once it has scheduled the next one.
    """

    fields: ClassVar[frozenset[str]] = frozenset(
        {
            "title",
            "text",
            "content_type",
            "fetch_time",
            "prev_fetch_time",
            "modified_time",
            "signature",
            "score",
        }
    )

    def __init__(
        self, *, max_title_length: int = 100, max_content_length: int = -1, score_power: float = 0.5
    ) -> None:
        self.max_title_length = max_title_length
        self.max_content_length = max_content_length
        self.score_power = score_power

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(
            max_title_length=get_int(settings, "NUTCH_INDEXER_MAX_TITLE_LENGTH", minimum=-1),
            max_content_length=get_int(settings, "NUTCH_INDEXER_MAX_CONTENT_LENGTH", minimum=-1),
            score_power=get_float(settings, "NUTCH_INDEXER_SCORE_POWER"),
        )

    def filter(self, doc: Document, page: WebPage) -> Document | None:
        try:
            doc.host = host_of(doc.url)
        except InvalidURL:
            doc.host = ""
        doc.title = clean_text(page.title or "", self.max_title_length)
        doc.content = clean_text(page.text or "", self.max_content_length)
        doc.type = (page.content_type or "").split(";")[0].strip().lower()
        # Before updatedb (a row just fetched), fetch_time is the fetch's; after it, the next
        # fetch's, and the last one is prev_fetch_time.
        doc.tstamp = page.prev_fetch_time or page.fetch_time
        doc.last_modified = page.modified_time
        doc.digest = page.signature.hex() if page.signature else ""
        doc.boost = max(page.score, 0.0) ** self.score_power
        return doc


class AnchorIndexingFilter:
    """Nutch's ``index-anchor``: the anchor texts of the page's inlinks (``il:``, written by
    updatedb) go in the document's ``anchor`` field, so the page is found by the words other
    pages link to it with. With *deduplicate*, an anchor text is kept once, whatever its case
    (``anchorIndexingFilter.deduplicate``). Empty anchors are left out."""

    fields: ClassVar[frozenset[str]] = frozenset({"inlinks"})

    def __init__(self, *, deduplicate: bool = False) -> None:
        self.deduplicate = deduplicate

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(deduplicate=get_bool(settings, "NUTCH_ANCHORINDEXINGFILTER_DEDUPLICATE"))

    def filter(self, doc: Document, page: WebPage) -> Document | None:
        seen: set[str] = set()
        for anchor in page.inlinks.values():
            anchor = clean_text(anchor.strip())
            if not anchor:
                continue
            if self.deduplicate:
                folded = anchor.casefold()
                if folded in seen:
                    continue
                seen.add(folded)
            doc.anchor.append(anchor)
        return doc


class MetadataIndexingFilter:
    """Nutch's ``index-metadata``: the row metadata (``mtdt:``) keys named in *keys*
    (``NUTCH_INDEX_METADATA``) become document fields of the same name, their bytes read as
    UTF-8. A key the row does not have adds nothing."""

    def __init__(self, keys: list[str]) -> None:
        clash = [key for key in keys if key in STANDARD_FIELDS]
        if clash:
            raise ConfigError(
                f"NUTCH_INDEX_METADATA: {', '.join(clash)} would replace a standard index field"
            )
        self.keys = keys
        #: No key, no metadata read.
        self.fields = frozenset({"metadata"} if keys else ())

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        try:
            keys = settings.getlist("NUTCH_INDEX_METADATA")
        except ValueError:
            raise ConfigError(
                f"NUTCH_INDEX_METADATA must be a list of keys, got {settings.get('NUTCH_INDEX_METADATA')!r}"
            ) from None
        return cls([str(key) for key in keys if str(key)])

    def filter(self, doc: Document, page: WebPage) -> Document | None:
        for key in self.keys:
            value = page.metadata.get(key)
            if value is not None:
                doc.metadata[key] = clean_text(value.decode("utf-8", "replace"))
        return doc


_META = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(rb"""([a-zA-Z_:][-\w:.]*)\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)""")
_HEAD_END = re.compile(rb"<body\b|</head\s*>", re.IGNORECASE)
#: Bytes of a page looked at for its robots meta tags: a head longer than this is not read on.
_HEAD_LIMIT = 65536


def robots_directives(content: bytes | None, headers: dict[str, str] | None = None) -> set[str]:
    """The robots directives of a page: those of its ``<meta name="robots">`` tags (in the first
    64 KiB, before ``<body>``) and of its ``X-Robots-Tag`` header, lower-cased.

    >>> sorted(robots_directives(b'<head><meta content="NOINDEX, follow" name=robots></head>'))
    ['follow', 'noindex']
    >>> robots_directives(b"<p>hi</p>", {"X-Robots-Tag": "none"})
    {'none'}
    """
    found: set[str] = set()
    for name, value in (headers or {}).items():
        if name.lower() == "x-robots-tag":
            found.update(_directives(value))
    if content:
        head = content[:_HEAD_LIMIT]
        end = _HEAD_END.search(head)
        if end is not None:
            head = head[: end.start()]
        for tag in _META.findall(head):
            attrs = {key.lower(): value.strip(b"\"'") for key, value in _ATTR.findall(tag[5:])}
            if attrs.get(b"name", b"").strip().lower() == b"robots":
                found.update(_directives(attrs.get(b"content", b"").decode("latin-1")))
    return found


def _directives(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",") if part.strip()}


class RobotsMetaIndexingFilter:
    """Keeps pages whose robots meta tag or ``X-Robots-Tag`` header says ``noindex`` (or
    ``none``) out of the index, and deletes them from it (Nutch's
    ``indexer.delete.robots.noindex``; *enabled* is ``NUTCH_INDEXER_DELETE_ROBOTS_NOINDEX``).

    nutchy's parser empties the title and text of such a page; only a page with neither has its
    content read and looked at, so the cost is on those pages alone.
    """

    fields: ClassVar[frozenset[str]] = frozenset({"title", "text", "headers"})

    def more_fields(self, page: WebPage) -> frozenset[str]:
        if self.enabled and not (page.title or page.text):
            return frozenset({"content"})
        return frozenset()

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(enabled=get_bool(settings, "NUTCH_INDEXER_DELETE_ROBOTS_NOINDEX"))

    def filter(self, doc: Document, page: WebPage) -> Document | None:
        if not self.enabled:
            return doc
        content = None if (page.title or page.text) else page.content
        if robots_directives(content, page.headers) & {"noindex", "none"}:
            return None
        return doc
