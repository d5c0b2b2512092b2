"""Duplicate detection: which of the pages with the same signature is kept (Nutch 1.x's
``DeduplicationJob``).

Every fetched page (status FETCHED or NOTMODIFIED, and DUPLICATE, so that a duplicate whose
group changed can be kept again) with a signature becomes one :func:`entry`: a tuple whose order
is the whole decision. Entries sort by group (the signature, and the host or domain with a group
mode), then best first by the compare order, then by row key. Sorted, the first entry of each
group is the page kept and every other one is a duplicate of it (:func:`decide`), so a job can
sort the entries with any sort it likes (in memory, or an external merge sort that spills runs to
disk) and decide group by group, holding one group's first entry at a time.

The compare order is Nutch's ``-compareOrder`` list, a comma-separated choice of:

- ``score``: the highest score is kept;
- ``fetchTime``: the latest fetch time (``f:ts``) is kept;
- ``urlLength``: the shortest URL is kept, its length counted once percent-escapes are decoded;
- ``httpsOverHttp``: an ``https://`` URL is kept over an ``http://`` one.

The row key ends every order, so exactly one page of a group is kept, the same one each run.

>>> order = parse_compare_order("score,urlLength,fetchTime")
>>> sig = bytes(16)
>>> a = entry("com.a:http/", sig, 1.0, 5, FETCHED, None, order=order)
>>> b = entry("com.a:http/index.html", sig, 1.0, 9, FETCHED, None, order=order)
>>> c = entry("com.a:http/x", b"other", 1.0, 9, FETCHED, None, order=order)
>>> [(d.key, d.status, d.duplicate_of) for d in decide(sorted([b, c, a]))]
[('com.a:http/index.html', 7, 'http://a.com/')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote_plus

from nutchy.core.status import CrawlStatus
from nutchy.core.urls import InvalidURL, domain_of, host_of, unreverse_url

__all__ = [
    "CANDIDATES",
    "COMPARE_KEYS",
    "GROUP_MODES",
    "Decision",
    "decide",
    "entry",
    "parse_compare_order",
]

FETCHED = int(CrawlStatus.FETCHED)
DUPLICATE = int(CrawlStatus.DUPLICATE)

#: What a page's content is compared within: the whole table, its host, or its domain (Nutch's
#: ``-group``).
GROUP_MODES = ("none", "host", "domain")
#: The criteria of a compare order, as Nutch names them.
COMPARE_KEYS = ("score", "fetchTime", "urlLength", "httpsOverHttp")
#: The statuses of the pages dedup compares.
CANDIDATES = frozenset({CrawlStatus.FETCHED, CrawlStatus.NOTMODIFIED, CrawlStatus.DUPLICATE})

#: One page's entry: ``(signature, scope, *rank, key, status, fetch_time, duplicate_of)``.
Entry = tuple[object, ...]


def parse_compare_order(text: str) -> tuple[str, ...]:
    """The criteria of a compare order such as ``"score,fetchTime,urlLength"``.

    Nutch requires ``score``, ``fetchTime`` and ``urlLength`` to be there; so does nutchy, and
    each at most once.

    >>> parse_compare_order(" score , urlLength,fetchTime ")
    ('score', 'urlLength', 'fetchTime')
    >>> parse_compare_order("score,urlLength")
    Traceback (most recent call last):
    ...
    ValueError: a compare order needs score, fetchTime and urlLength, got 'score,urlLength'
    """
    order = tuple(part.strip() for part in text.split(","))
    unknown = [part for part in order if part not in COMPARE_KEYS]
    if unknown:
        raise ValueError(
            f"unknown criterion {unknown[0]!r} in compare order {text!r};"
            f" use {', '.join(COMPARE_KEYS)}"
        )
    if len(set(order)) != len(order):
        raise ValueError(f"a criterion appears twice in compare order {text!r}")
    if not {"score", "fetchTime", "urlLength"} <= set(order):
        raise ValueError(f"a compare order needs score, fetchTime and urlLength, got {text!r}")
    return order


def _url(key: str) -> str:
    try:
        return unreverse_url(key)
    except InvalidURL:
        return key


def _scope(url: str, mode: str) -> str:
    if mode == "none":
        return ""
    try:
        return host_of(url) if mode == "host" else domain_of(url)
    except InvalidURL:
        return ""


def _https(key: str) -> bool:
    """Whether the row key *key* is an ``https`` URL's (its scheme follows the first ``:``)."""
    return key.startswith("https", key.find(":") + 1)


def entry(
    key: str,
    signature: bytes,
    score: float,
    fetch_time: int,
    status: int,
    duplicate_of: str | None,
    *,
    order: tuple[str, ...],
    group_mode: str = "none",
) -> Entry:
    """The entry of the page of row *key*: its group, its rank by *order* (lower is better),
    then what :func:`decide` needs to know of it.

    The URL length is counted on the key, which is the URL with its host labels reversed and
    ``scheme://`` written ``:scheme``: two characters shorter, whatever the URL, so the order of
    lengths is the same without unreversing every key.

    >>> entry("com.a:https/%7Ex", b"s", 0.5, 3, 2, None, order=("urlLength", "httpsOverHttp"))
    (b's', '', 14, 0, 'com.a:https/%7Ex', 2, 3, None)
    >>> len("https://a.com/~x")
    16
    """
    rank: list[object] = []
    for criterion in order:
        if criterion == "score":
            rank.append(-score)
        elif criterion == "fetchTime":
            rank.append(-fetch_time)
        elif criterion == "urlLength":
            rank.append(len(unquote_plus(key)) if "%" in key or "+" in key else len(key))
        else:
            rank.append(0 if _https(key) else 1)
    scope = "" if group_mode == "none" else _scope(_url(key), group_mode)
    return (signature, scope, *rank, key, status, fetch_time, duplicate_of)


class Decision(NamedTuple):
    """What becomes of one row: its new *status*, and the URL of the page kept in its place
    (``None``: it is not a duplicate, and ``mtdt:_dup_`` is deleted)."""

    key: str
    status: int
    duplicate_of: str | None
    #: The status and fetch time the row had: it is changed only if it still has them (a
    #: fetch writes both; a new signature comes only with a fetch).
    was: int
    fetch_time: int


@dataclass(slots=True)
class DedupCounts:
    """What a dedup run found: *pages* compared, *groups* of two pages or more, pages *marked*
    duplicate now, pages *kept* again after being duplicates, and duplicates *unchanged*."""

    pages: int = 0
    groups: int = 0
    marked: int = 0
    kept: int = 0
    unchanged: int = 0


def decide(entries: Iterable[Entry], counts: DedupCounts | None = None) -> Iterator[Decision]:
    """The rows to change, from *entries* in sorted order: the first of each group is kept (and
    becomes FETCHED again if it was a duplicate), every other one becomes a duplicate of it.
    Rows already as they should be are left out. *counts*, when given, is added to.

    >>> sig = b"s"
    >>> was_dup = (sig, "", 0, "com.a:http/", DUPLICATE, 5, "http://a.com/x")
    >>> also = (sig, "", 1, "com.a:http/x", FETCHED, 5, None)
    >>> [tuple(d[:3]) for d in decide([was_dup, also])]
    [('com.a:http/', 2, None), ('com.a:http/x', 7, 'http://a.com/')]
    """
    counts = DedupCounts() if counts is None else counts
    group: tuple[object, ...] | None = None
    kept_key = kept_url = ""
    size = 0
    for item in entries:
        counts.pages += 1
        key, status, fetch_time, duplicate_of = item[-4:]
        assert isinstance(key, str) and isinstance(status, int) and isinstance(fetch_time, int)
        if item[:2] != group:
            group, kept_key, kept_url, size = item[:2], key, "", 1
            if status == DUPLICATE or duplicate_of is not None:
                counts.kept += 1
                restored = FETCHED if status == DUPLICATE else status
                yield Decision(key, restored, None, status, fetch_time)
            continue
        size += 1
        if size == 2:
            counts.groups += 1
            kept_url = _url(kept_key)
        if status == DUPLICATE and duplicate_of == kept_url:
            counts.unchanged += 1
            continue
        counts.marked += 1
        yield Decision(key, DUPLICATE, kept_url, status, fetch_time)
