"""The document an indexing filter builds and an index writer writes: one page of the crawl.

Its fields are those of Nutch's ``index-basic``, ``index-anchor`` and ``index-metadata``
plugins. :meth:`Document.fields` gives them under Nutch's field names, as Solr and
Elasticsearch schemas made for Nutch expect them:

>>> doc = Document("http://example.com/a", title="A", tstamp=1_700_000_000_000)
>>> doc.fields()["id"], doc.fields()["tstamp"], doc.fields()["lastModified"]
('http://example.com/a', '2023-11-14T22:13:20.000Z', None)
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["STANDARD_FIELDS", "Document", "iso_time"]

#: Nutch's names of the fields every document has, in the order :meth:`Document.fields` gives.
STANDARD_FIELDS: Final = (
    "id",
    "url",
    "host",
    "title",
    "content",
    "anchor",
    "type",
    "tstamp",
    "lastModified",
    "digest",
    "boost",
)


@dataclass(slots=True)
class Document:
    """One indexable page.

    *url* is the page's URL, also its *id*: writing a document replaces the one of the same URL.
    *content* is the page's text (not its raw bytes), *anchor* the anchor texts of the links to
    it, *type* its content type, *tstamp* and *last_modified* its fetch and modification times
    (ms since the epoch, 0 for unknown), *digest* its signature in hex and *boost* the score the
    index ranks it by. *metadata* holds the row metadata a user asked for
    (``NUTCH_INDEX_METADATA``), and anything an indexing filter of a project adds.
    """

    url: str
    host: str = ""
    title: str = ""
    content: str = ""
    anchor: list[str] = field(default_factory=list)
    type: str = ""
    tstamp: int = 0
    last_modified: int = 0
    digest: str = ""
    boost: float = 1.0
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The document's id: its URL, as in Nutch."""
        return self.url

    def fields(self) -> dict[str, Any]:
        """The document as Nutch's index fields: :data:`STANDARD_FIELDS`, times as ISO 8601
        UTC text (``None`` when unknown), then the metadata keys, each a field of its own."""
        out: dict[str, Any] = {
            "id": self.url,
            "url": self.url,
            "host": self.host,
            "title": self.title,
            "content": self.content,
            "anchor": list(self.anchor),
            "type": self.type,
            "tstamp": iso_time(self.tstamp),
            "lastModified": iso_time(self.last_modified),
            "digest": self.digest,
            "boost": self.boost,
        }
        for key, value in self.metadata.items():
            out.setdefault(key, value)  # a standard field keeps its value
        return out


def iso_time(ms: int) -> str | None:
    """*ms* since the epoch as ISO 8601 UTC text with milliseconds; ``None`` for 0 (unknown).

    >>> iso_time(0), iso_time(1)
    (None, '1970-01-01T00:00:00.001Z')
    """
    if ms <= 0:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
