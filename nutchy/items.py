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

from pprint import pformat
from typing import Final

from scrapy import Field, Item

# The fields' values are made without Scrapy, in the parse process too (nutchy._pageparse).
from nutchy._pageparse import (
    Outlinks,
    content_fields,
    fetch_time_iso,
    outlinks,
    parse_status_name,
)

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
