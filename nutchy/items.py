"""The items a crawl of the ``nutch`` spider hands to a project's pipelines and feed exports.

:class:`~nutchy.pipelines.NutchParsePipeline` turns each page fetched with success into a
:class:`PageItem`: the fetch (URL, crawl status, fetch time, HTTP status, content type), the
parse (parse status, title, text, outlinks with their anchors, signature) and the row's score,
all as plain ``str``, ``int``, ``float``, ``bool`` and lists of ``dict``, so that Scrapy's own
exporters write them as they are (``scrapy crawl nutch -O pages.jsonl``, ``.csv``, ``.xml``).
With ``NUTCH_ITEM_CONTENT`` on, the items are :class:`PageContentItem`, which also carry the
content. docs/parse.md describes every field.

>>> item = PageItem(url="http://a.example/", outlinks=outlinks({"http://a.example/b": "B"}))
>>> item["outlinks"]
[{'url': 'http://a.example/b', 'anchor': 'B'}]
>>> str(item["outlinks"])
'[{"url": "http://a.example/b", "anchor": "B"}]'
>>> fetch_time_iso(1_700_000_000_123)
'2023-11-14T22:13:20.123Z'
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pprint import pformat
from typing import Final

from scrapy import Field, Item
from w3lib.encoding import html_to_unicode

from nutchy.core.parse import HTML_TYPES
from nutchy.core.status import ParseStatus, ParseStatusMajor, ParseStatusMinor

__all__ = [
    "Outlinks",
    "PageContentItem",
    "PageItem",
    "content_fields",
    "fetch_time_iso",
    "outlinks",
    "parse_status_name",
]


#: How much of a long text an item's repr shows.
_REPR_CHARS: Final = 100


class PageItem(Item):
    """A page fetched with success, parsed (see the module docstring and docs/parse.md).

    A field is left out (not set) when it has no value: ``score`` when the row could not be
    read, the parse fields when the page was not parsed (its content was cut at the content
    limit, see ``truncated``) or its parse failed.
    """

    #: The URL fetched.
    url = Field()
    #: The batch the page was fetched in.
    batch_id = Field()
    #: Nutch's name of the row's crawl status after the fetch: ``status_fetched``.
    status = Field()
    #: When the answer came, ISO 8601 in UTC with milliseconds (``2025-01-31T09:30:00.123Z``);
    #: the row's ``f:ts`` holds the same instant in ms.
    fetch_time = Field()
    #: The HTTP status code of the answer.
    http_status = Field()
    #: The media type of the content, without parameters (``text/html``).
    content_type = Field()
    #: Whether the content was cut at ``http.content.limit``.
    truncated = Field()
    #: How the parse went: ``success_ok``, ``success_redirect`` (a meta refresh), ``notparsed``
    #: (a content type nutchy does not parse), ``failed_…``.
    parse_status = Field()
    #: The page's title.
    title = Field()
    #: The page's plain text.
    text = Field()
    #: The page's outlinks, as stored: a list of ``{"url": …, "anchor": …}`` (:class:`Outlinks`).
    outlinks = Field()
    #: The page's signature (``NUTCH_DB_SIGNATURE_CLASS``), in hexadecimal.
    signature = Field()
    #: The row's score (``s:s``), as generate saw it.
    score = Field()

    def __repr__(self) -> str:
        """The fields, with long texts cut: Scrapy logs every item scraped (at DEBUG level) with
        its repr, which would otherwise hold the whole text of every page.

        >>> shown = repr(PageItem(url="http://a.example/", text="word " * 240))
        >>> "(1200 characters)" in shown, len(shown) < 200
        (True, True)
        """
        shown = {
            name: f"{value[:_REPR_CHARS]}… ({len(value)} characters)"
            if isinstance(value, str) and len(value) > _REPR_CHARS
            else value
            for name, value in self.items()
        }
        return pformat(shown, sort_dicts=False)


class PageContentItem(PageItem):
    """A :class:`PageItem` with the page's content, made with ``NUTCH_ITEM_CONTENT`` on."""

    #: The content as fetched (cut at the content limit): text for a textual content type,
    #: decoded with the page's character set; Base64 (RFC 4648) for any other type.
    content = Field()
    #: Whether ``content`` is Base64.
    content_base64 = Field()


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
