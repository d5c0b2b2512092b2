"""Inject: seed lines into rows of the web table.

A seed file holds one URL per line, in Nutch's format: the URL, then optional tab-separated
``name=value`` tokens. Two names are Nutch's own, ``nutch.score`` (a float) and
``nutch.fetchInterval`` (seconds); any other name is metadata, stored in the row as
``mtdt:<name>`` = the UTF-8 bytes of the value. Blank lines and lines starting with ``#`` are
skipped.

>>> parse_seed_line("http://www.nutch.org/\\tnutch.score=10\\tnutch.fetchInterval=2592000\\tuserType=open_source")
SeedLine(url='http://www.nutch.org/', score=10.0, fetch_interval=2592000, metadata={'userType': 'open_source'})
>>> seed = make_seed(parse_seed_line("HTTP://Example.COM:80/a/../b"))
>>> seed.url, seed.key
('http://example.com/b', 'com.example:http/b')

nutchy is stricter than Nutch, which silently ignores a token it cannot read and injects the URL
anyway. A line that says something nutchy cannot honour is *malformed* and is not injected, so
that no URL enters the table with a score or interval other than the one its author wrote;
:class:`MalformedSeed` says why. Besides URLs that :func:`~nutchy.core.urls.normalize_url`
refuses (no scheme, control characters, a bad host…), these lines are malformed:

- a URL containing a space (a sign that fields were separated by spaces instead of tabs);
- ``nutch.score`` that is not a finite float that fits in 32 bits, or ``nutch.fetchInterval``
  that is not a whole number of seconds from 1 to 2**31 - 1;
- a token that is not ``name=value`` with a non-empty name, or a name reserved for nutchy's and
  Nutch's own keys (starting and ending with ``_``, such as ``_csh_``);
- Nutch 2.4's sitemap tokens (``-sitemap``, ``sitemaps:``), which nutchy does not support;
- bytes that are not UTF-8, and lines longer than :data:`MAX_LINE_BYTES`.

As in Nutch, ``nutch.score=-1`` means "no score given" (the default is used).

What inject does to the table is :func:`seed_change`: a URL not in the table becomes a new row;
one already there is kept as it is unless the caller asks to overwrite or update it.
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass
from typing import Final, NamedTuple

from nutchy.core.generate import GENERATE_TIME_KEY, PARTITION_KEY
from nutchy.core.status import Mark, Metadata
from nutchy.core.urls import InvalidURL, normalize_url, reverse_url

__all__ = [
    "MAX_LINE_BYTES",
    "InjectMode",
    "InjectOutcome",
    "MalformedSeed",
    "RowChange",
    "Seed",
    "SeedLine",
    "decode_seed_line",
    "make_seed",
    "parse_seed_line",
    "seed_change",
]

#: The longest seed line accepted, in bytes (line ending excluded). Longer lines are malformed:
#: no sensible URL is that long, and the limit keeps one bad file from filling the memory.
MAX_LINE_BYTES: Final = 65536

#: The largest value of a 4-byte float, the type of ``s:s``.
_FLOAT32_MAX: Final = 3.4028234663852886e38
_INT32_MAX: Final = 2**31 - 1

_SCORE: Final = "nutch.score"
_INTERVAL: Final = "nutch.fetchInterval"
# What Java's String.trim() removes (every character up to and including the space), and the
# byte order mark some editors put at the start of a UTF-8 file.
_TRIM: Final = "".join(map(chr, range(0x21))) + "\ufeff"


class MalformedSeed(ValueError):
    """A seed line that cannot be injected; the message says why."""


class SeedLine(NamedTuple):
    """One parsed seed line, before normalization.

    *score* and *fetch_interval* are ``None`` when the line does not give them. *metadata* maps
    names to the values written on the line.
    """

    url: str
    score: float | None
    fetch_interval: int | None
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class Seed:
    """A seed ready to be injected: its normalized URL, the row key, and the line's options."""

    url: str
    key: str
    score: float | None = None
    fetch_interval: int | None = None
    metadata: tuple[tuple[str, str], ...] = ()


def decode_seed_line(raw: bytes) -> str:
    """Decode one line of a seed file, read as bytes, to text.

    The line must be UTF-8 and at most :data:`MAX_LINE_BYTES` long (its ending ``\\n`` or
    ``\\r\\n`` excluded); otherwise :class:`MalformedSeed`.

    >>> decode_seed_line(b"http://example.com/\\r\\n")
    'http://example.com/'
    >>> decode_seed_line(b"http://example.com/\\xe9")
    Traceback (most recent call last):
    ...
    nutchy.core.inject.MalformedSeed: not UTF-8: byte 0xe9 at offset 19 cannot be decoded
    """
    line = raw.rstrip(b"\r\n")
    if len(line) > MAX_LINE_BYTES:
        raise MalformedSeed(f"line is longer than {MAX_LINE_BYTES} bytes")
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedSeed(
            f"not UTF-8: byte 0x{line[exc.start]:02x} at offset {exc.start} cannot be decoded"
        ) from None


def parse_seed_line(text: str) -> SeedLine | None:
    """Parse one seed line; return ``None`` for a blank or ``#`` comment line.

    The line is trimmed first (as Java's ``String.trim`` does: every character up to the space),
    then split on tabs. Raises :class:`MalformedSeed` as the module docstring describes.

    >>> parse_seed_line("  # a comment") is None, parse_seed_line("") is None
    (True, True)
    >>> parse_seed_line("http://example.com/ nutch.score=2")
    Traceback (most recent call last):
    ...
    nutchy.core.inject.MalformedSeed: the URL contains a space; separate the URL and its \
name=value fields with tabs
    >>> parse_seed_line("http://example.com/\\tnutch.score=high")
    Traceback (most recent call last):
    ...
    nutchy.core.inject.MalformedSeed: nutch.score='high' is not a number
    """
    line = text.strip(_TRIM)
    if not line or line[0] == "#":
        return None
    url, *tokens = line.split("\t")
    url = url.strip(_TRIM)
    if not url:
        raise MalformedSeed("no URL before the first tab")
    if " " in url:
        raise MalformedSeed(
            "the URL contains a space; separate the URL and its name=value fields with tabs"
        )
    score: float | None = None
    interval: int | None = None
    metadata: dict[str, str] = {}
    for raw_token in tokens:
        token = raw_token.strip(_TRIM)
        if not token:
            continue  # two tabs in a row
        name, equals, value = token.partition("=")
        if name == _SCORE and equals:
            score = _parse_score(value)
        elif name == _INTERVAL and equals:
            interval = _parse_interval(value)
        elif token == "-sitemap" or token.startswith("sitemaps:"):
            raise MalformedSeed(f"sitemap seeds ({token.split(':')[0]!r}) are not supported")
        elif not equals or not name:
            raise MalformedSeed(f"field {token!r} is not name=value")
        elif len(name) > 1 and name[0] == "_" and name[-1] == "_":
            raise MalformedSeed(
                f"metadata name {name!r} is reserved (names starting and ending with '_' are"
                " nutchy's and Nutch's own keys)"
            )
        else:
            metadata[name] = value
    return SeedLine(url, score, interval, metadata)


def _parse_score(value: str) -> float | None:
    try:
        score = float(value)
    except ValueError:
        raise MalformedSeed(f"{_SCORE}={value!r} is not a number") from None
    if not math.isfinite(score) or abs(score) > _FLOAT32_MAX:
        raise MalformedSeed(f"{_SCORE}={value!r} is not a finite 32-bit float")
    return None if score == -1 else score


def _parse_interval(value: str) -> int:
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= _INT32_MAX:
        raise MalformedSeed(
            f"{_INTERVAL}={value!r} is not a whole number of seconds from 1 to {_INT32_MAX}"
        )
    return int(text)


def make_seed(line: SeedLine) -> Seed:
    """Normalize the URL of *line* and build its row key; :class:`MalformedSeed` if impossible."""
    try:
        url = normalize_url(line.url)
        key = reverse_url(url)
    except InvalidURL as exc:
        raise MalformedSeed(exc.reason) from None
    return Seed(url, key, line.score, line.fetch_interval, tuple(line.metadata.items()))


class InjectMode(enum.Enum):
    """What inject does to a URL that is already in the table."""

    #: Leave the row as it is (Nutch 1.x's default).
    KEEP = "keep"
    #: Reset the row's schedule, score and batch marks as for a new seed (``-overwrite``).
    OVERWRITE = "overwrite"
    #: Apply only what the seed line gives explicitly: score, interval, metadata (``-update``).
    UPDATE = "update"


class InjectOutcome(enum.Enum):
    """What happened to one seed."""

    INJECTED = "injected"
    KNOWN = "known"
    OVERWRITTEN = "overwritten"
    UPDATED = "updated"


class RowChange(NamedTuple):
    """The change inject makes to one row, in :func:`nutchy.store.schema.build_update` terms.

    *fields* are scalar fields to set, *entries* single map entries to set (``None`` deletes
    one). Both are empty when the row is left alone.
    """

    outcome: InjectOutcome
    fields: dict[str, int | float]
    entries: dict[str, dict[str, str | bytes | None]]


#: The batch marks overwrite clears, so that the row can be generated at once.
_BATCH_MARKS: Final = (Mark.GENERATE, Mark.FETCH, Mark.PARSE)
#: nutchy's metadata about the current generate mark, cleared with it.
_GENERATE_METADATA: Final = (GENERATE_TIME_KEY, PARTITION_KEY)


def seed_change(
    seed: Seed, *, exists: bool, mode: InjectMode, now: int, fetch_interval: int, score: float
) -> RowChange:
    """The change inject makes to the row of *seed*.

    *exists* tells whether the row is already in the table; *now* is the inject time (ms);
    *fetch_interval* and *score* are the defaults for seeds that give none
    (``db.fetch.interval.default``, ``db.score.injected``).

    Every change is made of single entries, never a whole family: whatever else the row holds
    (inlinks, outlinks, content, other metadata and markers) survives.

    A new row gets what Nutch's injector writes: ``f:ts`` = *now* (due at once), ``f:fi``,
    ``s:s``, ``mtdt:_csh_`` = the score (OPIC's injected cash), the seed's metadata, and the
    markers ``dist`` = ``"0"`` and ``_injmrk_`` = ``"y"``. Its status stays unset (0).

    >>> new = Seed("http://a.com/", "com.a:http/", metadata=(("lang", "en"),))
    >>> change = seed_change(new, exists=False, mode=InjectMode.KEEP, now=5, fetch_interval=60,
    ...                      score=1.0)
    >>> change.outcome, change.fields
    (<InjectOutcome.INJECTED: 'injected'>, {'fetch_time': 5, 'fetch_interval': 60, 'score': 1.0})
    >>> change.entries
    {'metadata': {'lang': b'en', '_csh_': b'?\\x80\\x00\\x00'}, 'markers': {'dist': '0', '_injmrk_': 'y'}}

    A row that exists is, by *mode*:

    - ``KEEP``: left alone;
    - ``OVERWRITE``: given the new row's fetch time, interval, score, cash, metadata and markers,
      and its batch marks (``_gnmrk_``, ``_ftcmrk_``, ``__prsmrk__``, with nutchy's ``_ngt_`` and
      ``_npt_``) are removed so that the next generate can select it. Status, content, parse
      results, links, ``_updmrk_``, ``_idxmrk_`` and other metadata are kept;
    - ``UPDATE``: given only what the line states: ``nutch.score`` (``s:s``),
      ``nutch.fetchInterval`` (``f:fi``) and metadata. A line with none of them leaves the row
      alone and counts as known.

    >>> seed_change(new, exists=True, mode=InjectMode.KEEP, now=5, fetch_interval=60, score=1.0)
    RowChange(outcome=<InjectOutcome.KNOWN: 'known'>, fields={}, entries={})
    >>> seed_change(new, exists=True, mode=InjectMode.UPDATE, now=5, fetch_interval=60,
    ...             score=1.0).entries
    {'metadata': {'lang': b'en'}}
    """
    if exists and mode is InjectMode.KEEP:
        return RowChange(InjectOutcome.KNOWN, {}, {})
    metadata: dict[str, str | bytes | None] = {
        name: value.encode() for name, value in seed.metadata
    }
    if exists and mode is InjectMode.UPDATE:
        fields: dict[str, int | float] = {}
        if seed.score is not None:
            fields["score"] = seed.score
        if seed.fetch_interval is not None:
            fields["fetch_interval"] = seed.fetch_interval
        if not fields and not metadata:
            return RowChange(InjectOutcome.KNOWN, {}, {})
        return RowChange(InjectOutcome.UPDATED, fields, {"metadata": metadata} if metadata else {})
    row_score = score if seed.score is None else seed.score
    fields = {
        "fetch_time": now,
        "fetch_interval": fetch_interval if seed.fetch_interval is None else seed.fetch_interval,
        "score": row_score,
    }
    metadata[Metadata.CASH] = struct.pack(">f", row_score)
    markers: dict[str, str | bytes | None] = {
        Mark.DISTANCE: "0",
        Mark.INJECT: Mark.INJECT_SEED,
    }
    if not exists:
        return RowChange(InjectOutcome.INJECTED, fields, {"metadata": metadata, "markers": markers})
    for name in _GENERATE_METADATA:
        metadata[name] = None
    for mark in _BATCH_MARKS:
        markers[mark] = None
    return RowChange(InjectOutcome.OVERWRITTEN, fields, {"metadata": metadata, "markers": markers})
