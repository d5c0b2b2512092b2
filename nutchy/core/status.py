"""Nutch 2.x status codes, markers and fixed metadata keys.

The numbers are the ones Nutch 2.x stores, so a table written by nutchy reads the same in Nutch and
the other way round.

>>> CrawlStatus.FETCHED, int(CrawlStatus.RETRY)
(<CrawlStatus.FETCHED: 2>, 34)
>>> crawl_status_name(0), crawl_status_name(0x26), crawl_status_name(7), crawl_status_name(99)
('status_injected', 'status_notmodified', 'status_duplicate', 'status_unknown_99')
>>> ProtocolStatus(ProtocolStatusCode.NOTFOUND, ("http://example.com/x",)).name
'NOTFOUND'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class CrawlStatus(IntEnum):
    """The crawl status of a row, stored in ``f:st`` as a 4-byte big-endian int.

    A freshly injected row has no ``f:st`` column; it reads as 0, which Nutch has no constant for.
    nutchy calls it ``INJECTED``.

    ``DUPLICATE`` is Nutch 1.x's ``STATUS_DB_DUPLICATE``, with its value (0x07), which Nutch 2.x
    has no constant for: ``nutchy dedup`` writes it on a fetched page whose content another page
    of the table has too and keeps (:mod:`nutchy.core.dedup`). Nutch 2.x reads it as a status
    it does not know, which none of its jobs acts on (docs/index.md, "How a duplicate is
    stored").
    """

    INJECTED = 0x00
    UNFETCHED = 0x01
    FETCHED = 0x02
    GONE = 0x03
    REDIR_TEMP = 0x04
    REDIR_PERM = 0x05
    DUPLICATE = 0x07
    RETRY = 0x22
    NOTMODIFIED = 0x26


def crawl_status_name(code: int) -> str:
    """Nutch's name of a crawl status (``status_fetched``), also for codes Nutch does not know."""
    try:
        return f"status_{CrawlStatus(code).name.lower()}"
    except ValueError:
        return f"status_unknown_{code}"


class ProtocolStatusCode(IntEnum):
    """The outcome of one fetch, stored as the ``code`` of the ``f:prot`` record."""

    SUCCESS = 1
    FAILED = 2
    PROTO_NOT_FOUND = 10
    GONE = 11
    MOVED = 12
    TEMP_MOVED = 13
    NOTFOUND = 14
    RETRY = 15
    EXCEPTION = 16
    ACCESS_DENIED = 17
    ROBOTS_DENIED = 18
    REDIR_EXCEEDED = 19
    NOTFETCHING = 20
    NOTMODIFIED = 21
    WOULDBLOCK = 22
    BLOCKED = 23


@dataclass(frozen=True, slots=True)
class ProtocolStatus:
    """The Avro record Nutch keeps in ``f:prot``: a code, its arguments, and a time Nutch always
    leaves at 0."""

    code: int
    args: tuple[str, ...] = ()
    last_modified: int = 0

    @property
    def name(self) -> str:
        try:
            return ProtocolStatusCode(self.code).name
        except ValueError:
            return f"UNKNOWN_{self.code}"


class ParseStatusMajor(IntEnum):
    NOTPARSED = 0
    SUCCESS = 1
    FAILED = 2


class ParseStatusMinor(IntEnum):
    SUCCESS_OK = 0
    SUCCESS_REDIRECT = 100
    FAILED_EXCEPTION = 200
    FAILED_TRUNCATED = 202
    FAILED_INVALID_FORMAT = 203
    FAILED_MISSING_PARTS = 204
    FAILED_MISSING_CONTENT = 205


@dataclass(frozen=True, slots=True)
class ParseStatus:
    """The Avro record Nutch keeps in ``p:st``."""

    major: int
    minor: int = 0
    args: tuple[str, ...] = ()


class Mark:
    """Qualifiers of the ``mk`` family: the state machine of the crawl cycle."""

    INJECT = "_injmrk_"
    GENERATE = "_gnmrk_"
    FETCH = "_ftcmrk_"
    PARSE = "__prsmrk__"
    UPDATEDB = "_updmrk_"
    INDEX = "_idxmrk_"
    SITEMAP = "_stmmrk_"
    DISTANCE = "dist"

    #: Values of the inject mark: a normal seed, or a sitemap seed.
    INJECT_SEED = "y"
    INJECT_SITEMAP = "s"


class Metadata:
    """Fixed keys of the ``mtdt`` family."""

    #: OPIC cash, a 4-byte big-endian float.
    CASH = "_csh_"
    #: Response time in ms, a 4-byte big-endian int.
    RESPONSE_TIME = "_rs_"
    #: Server IP address, UTF-8.
    IP = "_ip_"
    #: ``y`` when a redirect was found at fetch or parse time; updatedb removes it.
    REDIRECT_DISCOVERED = "___rdrdsc__"
    #: (nutchy only) The URL of the page kept in place of a duplicate, UTF-8: written with the
    #: DUPLICATE status by ``nutchy dedup``, it outlives the fetch's new status so that updatedb
    #: can tell a duplicate whose content did not change (it stays a duplicate) from one whose
    #: content did (it stops being one).
    DUPLICATE_OF = "_dup_"
    #: (nutchy only) When the row was last fetched, ms since the epoch, an 8-byte big-endian
    #: long: ``f:ts`` holds it only until updatedb schedules the next fetch. The host database
    #: (:mod:`nutchy.core.hostdb`) reads it.
    FETCHED_AT = "_nft_"
    #: (nutchy only) The links of the page left unread at parse when ``db.max.outlinks.per.page``
    #: was reached, a decimal number in ASCII; removed by a parse that kept them all.
    OUTLINKS_CUT = "_olcut_"
