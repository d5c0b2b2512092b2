"""The WebPage: one row of the web table, decoded.

Field names follow Nutch's ``webpage.avsc`` in snake case. A field missing from the table reads as
its Avro default: 0 for numbers, ``None`` for nullable fields, an empty dict for maps.

A page also remembers which fields were read from the table (:attr:`WebPage.loaded`). Writing a
whole map back is only allowed for maps that were read, so a job can never wipe entries it did not
know about (NUTCH-2222).

>>> page = WebPage("com.example.www:http/")
>>> page.url
'http://www.example.com/'
>>> page.status, page.score, page.markers
(0, 0.0, {})
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nutchy.core.status import ParseStatus, ProtocolStatus
from nutchy.core.urls import unreverse_url

#: Every field of a page, in the order of Nutch's schema.
SCALAR_FIELDS = (
    "base_url",
    "status",
    "prev_fetch_time",
    "fetch_time",
    "fetch_interval",
    "retries_since_fetch",
    "repr_url",
    "content",
    "content_type",
    "protocol_status",
    "modified_time",
    "prev_modified_time",
    "batch_id",
    "title",
    "text",
    "parse_status",
    "signature",
    "prev_signature",
    "score",
    "stm_priority",
)
MAP_FIELDS = ("headers", "outlinks", "inlinks", "metadata", "markers", "sitemaps")
ALL_FIELDS = SCALAR_FIELDS + MAP_FIELDS


@dataclass(slots=True, eq=True)
class WebPage:
    """One URL of the crawl, with Nutch's fields.

    *key* is the row key: the reversed URL (see :func:`nutchy.core.urls.reverse_url`).
    Times are milliseconds since the epoch; intervals are seconds.
    """

    key: str
    base_url: str | None = None
    status: int = 0
    prev_fetch_time: int = 0
    fetch_time: int = 0
    fetch_interval: int = 0
    retries_since_fetch: int = 0
    repr_url: str | None = None
    content: bytes | None = None
    content_type: str | None = None
    protocol_status: ProtocolStatus | None = None
    modified_time: int = 0
    prev_modified_time: int = 0
    batch_id: str | None = None
    title: str | None = None
    text: str | None = None
    parse_status: ParseStatus | None = None
    signature: bytes | None = None
    prev_signature: bytes | None = None
    score: float = 0.0
    stm_priority: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    outlinks: dict[str, str] = field(default_factory=dict)
    inlinks: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, bytes] = field(default_factory=dict)
    markers: dict[str, str] = field(default_factory=dict)
    sitemaps: dict[str, str] = field(default_factory=dict)
    #: The fields that were read from the table (all of them for a page built in memory).
    loaded: frozenset[str] = field(default=frozenset(ALL_FIELDS), compare=False, repr=False)

    @property
    def url(self) -> str:
        """The URL of the page, unreversed from its key."""
        return unreverse_url(self.key)
