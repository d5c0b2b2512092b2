"""Parsing a fetched page: title, text, outlinks with anchors, and the parse status.

This is Nutch's ``ParseUtil`` with ``parse-html`` and ``parse-text``, over libxml2's HTML parser
(``lxml.etree.HTMLParser``, whose events go to a parser target: no tree is built; docs/parse.md
says where it reads broken markup otherwise than ``html.parser``, which nutchy used before).
HTML pages give their title, their visible text, and their
links (``a`` and ``area`` ``href``, ``frame`` and ``iframe`` ``src``) resolved against
``<base href>``; ``<meta name="robots">`` ``noindex`` empties text and title and ``nofollow``
drops the links; a ``<meta http-equiv="refresh">`` makes the parse a redirect. Plain text gives
its text. Other content types are not parsed.

>>> html = b'''<html><head><title> Hi </title><base href="http://example.com/dir/"></head>
... <body><p>Hello <b>world</b></p><a href="page.html">A  page</a>
... <script>var x = 1;</script><a href="mailto:x@y">mail</a></body></html>'''
>>> r = parse_content("http://example.com/", html, "text/html")
>>> r.status.major, r.title, r.text
(1, 'Hi', 'Hello world A page mail')
>>> r.outlinks
{'http://example.com/dir/page.html': 'A page'}
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urljoin, urlsplit

from lxml import etree
from w3lib.encoding import (
    html_body_declared_encoding,
    html_to_unicode,
    http_content_type_encoding,
    read_bom,
)

from nutchy.core.fetch import TRUNCATED_KEY, RowChange
from nutchy.core.signature import Signature
from nutchy.core.status import Mark, Metadata, ParseStatus, ParseStatusMajor, ParseStatusMinor
from nutchy.core.urls import host_of, normalize_url
from nutchy.core.webpage import WebPage

__all__ = [
    "PARSE_FIELDS",
    "ParseConfig",
    "ParseResult",
    "ParseTimeout",
    "is_truncated",
    "parse_change",
    "parse_content",
]

HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml", "application/xml+xhtml"})
TEXT_TYPES: Final = frozenset({"text/plain", "text/markdown", "text/x-markdown"})

#: Elements whose content is not text a reader sees.
_INVISIBLE: Final = frozenset({"script", "style", "noscript", "template"})
#: Elements whose ``title`` is not the page's.
_FOREIGN: Final = frozenset({"svg", "math"})
#: Link-bearing attributes, by element.
_LINK_ATTRS: Final = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}
#: The elements whose start (end) the parser target acts on; the others only end a text node.
_ENDS: Final = frozenset({"title", "a", *_FOREIGN, *_INVISIBLE})
_STARTS: Final = frozenset({*_ENDS, "base", "meta", *_LINK_ATTRS})
#: How much markup is parsed between two checks of the time limit.
_CHUNK: Final = 16384
#: What makes ``urljoin`` rewrite a path from the root (see :func:`_resolver`).
_REWRITTEN: Final = re.compile(r"/\.|[;\t\r\n]|\?#")
_REFRESH: Final = re.compile(
    r"^\s*(\d+(?:\.\d*)?)?\s*[;,]?\s*(?:url\s*=\s*)?(.*?)\s*$", re.IGNORECASE
)


class ParseTimeout(Exception):
    """The time limit of one parse (``parser.timeout``) ran out."""


def _status(
    major: ParseStatusMajor,
    minor: ParseStatusMinor = ParseStatusMinor.SUCCESS_OK,
    args: tuple[str, ...] = (),
) -> ParseStatus:
    return ParseStatus(int(major), int(minor), args)


def _default_accept(url: str) -> str | None:
    try:
        return normalize_url(url)
    except ValueError:  # InvalidURL, or what urllib raises on a broken URL
        return None


@dataclass(frozen=True, slots=True)
class ParseConfig:
    """The settings of parsing.

    *accept* normalizes and filters an outlink (``None`` drops it); by default it only
    normalizes. *max_outlinks* is ``db.max.outlinks.per.page`` (< 0: no limit), *max_anchor_length*
    ``db.max.anchor.length``, *max_target_length* ``parser.html.outlinks.max.target.length``;
    *ignore_internal_links* and *ignore_external_links* drop links to the page's own host and to
    other hosts. *deadline* and *clock* bound the time of one parse: the parse fails when
    ``clock()`` passes *deadline* (no limit without a clock).
    """

    accept: Callable[[str], str | None] = _default_accept
    max_outlinks: int = 100
    max_anchor_length: int = 100
    max_target_length: int = 3000
    ignore_internal_links: bool = False
    ignore_external_links: bool = False
    deadline: float | None = None
    clock: Callable[[], float] | None = None


@dataclass(frozen=True, slots=True)
class ParseResult:
    """The outcome of parsing one page.

    *status* is the parse status (``p:st``). On success (minor ``SUCCESS_OK``) *title*, *text*
    and *outlinks* (target → anchor) are the page's; on a meta refresh (minor
    ``SUCCESS_REDIRECT``, args: target and delay) *outlinks* holds only the refresh target.
    """

    status: ParseStatus
    title: str = ""
    text: str = ""
    outlinks: dict[str, str] = field(default_factory=dict)
    #: links of the page left unread when ``db.max.outlinks.per.page`` was reached
    outlinks_cut: int = 0


class _HTMLExtractor:
    """The parser target of :func:`_parse_html`: what the page holds, from lxml's events.

    libxml2's HTML parser reads the markup as a browser's tokenizer does and balances the
    elements (implied ``html``/``head``/``body``, elements closed where their parent ends), then
    hands each start, end, text and comment to this object, which builds no tree. A text node
    may come in several ``data`` calls (libxml2 cuts it at character references and at the end
    of a fed chunk); they are joined into one before the text node is kept, so that text nodes,
    as in Nutch's ``DOMContentUtils``, are what is separated by a space. The title is the text
    of the first ``title`` element that is not an SVG's or MathML's, as a browser's
    ``document.title``; any other ``title`` (an SVG icon's, a second one) is text like any
    other element's.
    """

    def __init__(self) -> None:
        self.title: list[str] = []
        self.text: list[str] = []
        self.links: list[tuple[str, list[str]]] = []
        self.base: str | None = None
        self.robots: set[str] = set()
        self.refresh: str | None = None
        self._invisible = 0
        #: 0 before the page's title, 1 inside it, 2 after it
        self._title = 0
        self._foreign = 0  # inside svg or math
        self._anchor: list[str] | None = None
        self._pending: list[str] = []

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else "".join(pending)
        pending.clear()
        if self._title == 1:
            self.title.append(data)
        elif not self._invisible:
            self.text.append(data)
            if self._anchor is not None:
                self._anchor.append(data)

    def start(self, tag: str, attrib: dict[str, str | None]) -> None:
        if self._pending:
            self._flush()
        if tag not in _STARTS:
            return
        if tag == "title":
            if not self._title and not self._foreign:
                self._title = 1
        elif tag in _FOREIGN:
            self._foreign += 1
        elif tag in _INVISIBLE:
            self._invisible += 1
        elif tag == "base":
            if self.base is None and attrib.get("href"):
                self.base = (attrib["href"] or "").strip()
        elif tag == "meta":
            name = (attrib.get("name") or "").lower()
            if name == "robots":
                content = (attrib.get("content") or "").lower()
                self.robots.update(p.strip() for p in content.split(","))
            elif self.refresh is None and (attrib.get("http-equiv") or "").lower() == "refresh":
                self.refresh = attrib.get("content") or ""
        link = _LINK_ATTRS.get(tag)
        if link is not None:
            target = attrib.get(link)
            # Nutch's DOMContentUtils skips a link whose rel is exactly "nofollow" (any case); a
            # list such as "nofollow ugc" is followed, as there.
            if target and (attrib.get("rel") or "").lower() != "nofollow":
                anchor: list[str] = []
                self.links.append((target.strip(), anchor))
                if tag == "a":
                    self._anchor = anchor
                elif attrib.get("alt"):
                    anchor.append(attrib["alt"] or "")

    def end(self, tag: str) -> None:
        if self._pending:
            self._flush()
        if tag not in _ENDS:
            return
        if tag == "title":
            if self._title == 1:
                self._title = 2
        elif tag in _FOREIGN:
            self._foreign = max(0, self._foreign - 1)
        elif tag in _INVISIBLE:
            self._invisible = max(0, self._invisible - 1)
        elif tag == "a":
            self._anchor = None

    def data(self, data: str) -> None:
        self._pending.append(data)

    def comment(self, text: str) -> None:
        if self._pending:
            self._flush()

    def pi(self, target: str, data: str | None = None) -> None:
        if self._pending:
            self._flush()

    def close(self) -> None:
        self._flush()


def _squash(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split())


def _meta_refresh(content: str, base: str) -> tuple[str, str] | None:
    match = _REFRESH.match(content)
    if match is None or not match.group(2):
        return None
    try:
        target = urljoin(base, match.group(2).strip("'\""))
    except ValueError:
        return None
    return target, match.group(1) or "0"


def _resolver(base: str) -> Callable[[str], str]:
    """``urljoin(base, href)`` as a function of *href*, quicker for the commonest link.

    A path from the root (``/docs/page.html``) on an ``http``/``https`` base is the base's
    scheme and host followed by the path, unless the path holds what ``urljoin`` rewrites:
    dot segments, parameters (``;``), an empty query or fragment, or the tab and newlines
    that ``urlsplit`` removes. Any other link goes through ``urljoin`` (which may raise
    ``ValueError``). The result is ``urljoin``'s in every case (a property test checks it).

    >>> resolve = _resolver("http://example.com:8080/a/b.html?q")
    >>> resolve("/c/d.html"), resolve("/c/../d.html"), resolve("e.html")
    ('http://example.com:8080/c/d.html', 'http://example.com:8080/d.html', 'http://example.com:8080/a/e.html')
    """
    try:
        parts = urlsplit(base)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        return lambda href: urljoin(base, href)
    prefix = f"{parts.scheme}://{parts.netloc}"

    def resolve(href: str) -> str:
        if (
            href[:1] == "/"
            and href[1:2] != "/"
            and _REWRITTEN.search(href) is None
            and not href.endswith(("?", "#"))
        ):
            return prefix + href
        return urljoin(base, href)

    return resolve


def _host(url: str) -> str | None:
    try:
        return host_of(url)
    except ValueError:
        return None


def _select_outlinks(
    url: str, links: list[tuple[str, str]], config: ParseConfig
) -> tuple[dict[str, str], int]:
    """The outlinks kept: valid, normalized, filtered, deduplicated, within the limits; and how
    many links were left unread when *max_outlinks* was reached.

    Up to *max_outlinks* are *stored*, as in Nutch 2.3.1 (2.4 counts the skipped ones too).
    """
    outlinks: dict[str, str] = {}
    # Hosts are compared only when a link may be dropped for its host (6% of a parse otherwise).
    by_host = config.ignore_internal_links or config.ignore_external_links
    host = _host(url) if by_host else None
    for read, (target, anchor) in enumerate(links):
        if 0 <= config.max_outlinks <= len(outlinks):
            return outlinks, len(links) - read
        if len(target) > config.max_target_length:
            continue
        accepted = config.accept(target)
        if accepted is None or accepted in outlinks:
            continue
        if by_host:
            same_host = _host(accepted) == host
            if (same_host and config.ignore_internal_links) or (
                not same_host and config.ignore_external_links
            ):
                continue
        outlinks[accepted] = anchor[: config.max_anchor_length]
    return outlinks, 0


def _parse_html(url: str, text: str, config: ParseConfig) -> ParseResult:
    extractor = _HTMLExtractor()
    parser = etree.HTMLParser(target=extractor, encoding="utf-8", no_network=True)
    markup = text.encode("utf-8", "replace")
    clock, deadline = config.clock, config.deadline
    try:
        for start in range(0, len(markup), _CHUNK):
            parser.feed(markup[start : start + _CHUNK])
            if clock is not None and deadline is not None and clock() > deadline:
                raise ParseTimeout(url)
        parser.close()
    except etree.LxmlError:
        # The recovering parser gives up on nothing but a document with no element (an empty
        # page, only a comment): what it read is the page.
        extractor.close()
    base = url
    if extractor.base:
        with contextlib.suppress(ValueError):
            base = urljoin(url, extractor.base)
    if extractor.refresh is not None:
        refresh = _meta_refresh(extractor.refresh, base)
        if refresh is not None:
            target = config.accept(refresh[0])
            if target is not None and target != url:
                # Like a redirect at fetch: to another host, with db.ignore.external.links on,
                # it is recorded without its target (Nutch 1.x; Nutch 2.x keeps the target).
                external = config.ignore_external_links and _host(target) != _host(url)
                return ParseResult(
                    _status(ParseStatusMajor.SUCCESS, ParseStatusMinor.SUCCESS_REDIRECT, refresh),
                    outlinks={} if external else {target: ""},
                )
    noindex = bool(extractor.robots & {"noindex", "none"})
    nofollow = bool(extractor.robots & {"nofollow", "none"})
    links: list[tuple[str, str]] = []
    if not nofollow:
        resolve = _resolver(base)
        for href, anchor in extractor.links:
            if href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
                continue
            try:
                target = resolve(href)
            except ValueError:  # "Invalid IPv6 URL" and the like
                continue
            links.append((target, _squash(anchor)))
    outlinks, cut = _select_outlinks(url, links, config)
    return ParseResult(
        _status(ParseStatusMajor.SUCCESS, ParseStatusMinor.SUCCESS_OK),
        title="" if noindex else _squash(extractor.title),
        text="" if noindex else _squash(extractor.text),
        outlinks=outlinks,
        outlinks_cut=cut,
    )


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def parse_content(
    url: str,
    content: bytes | None,
    content_type: str | None,
    config: ParseConfig | None = None,
) -> ParseResult:
    """Parse *content* fetched from *url* with *content_type* (its ``Content-Type`` header).

    A content type nutchy cannot parse gives status ``NOTPARSED``; content that is missing or
    breaks the parser, or a parse over its time limit, gives ``FAILED``.

    >>> parse_content("http://a/", b"plain words", "text/plain; charset=utf-8").text
    'plain words'
    >>> parse_content("http://a/", b"%PDF", "application/pdf").status
    ParseStatus(major=0, minor=0, args=())
    >>> r = parse_content("http://a/", b'<meta http-equiv="refresh" content="0; url=/b">', "text/html")
    >>> r.status.minor, r.status.args, r.outlinks
    (100, ('http://a/b', '0'), {'http://a/b': ''})
    """
    config = config or ParseConfig()
    media = _media_type(content_type)
    if media not in HTML_TYPES and media not in TEXT_TYPES:
        return ParseResult(_status(ParseStatusMajor.NOTPARSED))
    if content is None:
        return ParseResult(
            _status(ParseStatusMajor.FAILED, ParseStatusMinor.FAILED_MISSING_CONTENT)
        )
    _, text = html_to_unicode(_charset_header(content_type, content), content)
    if media in TEXT_TYPES:
        return ParseResult(
            _status(ParseStatusMajor.SUCCESS, ParseStatusMinor.SUCCESS_OK), text=text.strip()
        )
    try:
        return _parse_html(url, text, config)
    except ParseTimeout:
        return ParseResult(
            _status(ParseStatusMajor.FAILED, ParseStatusMinor.FAILED_EXCEPTION, ("timeout",))
        )


def _charset_header(content_type: str | None, content: bytes) -> str | None:
    """*content_type*, or ``text/html; charset=utf-8`` when the page's only declaration of its
    encoding is a ``<meta>`` naming UTF-16 or UTF-32: as the HTML standard's prescan says, a
    document whose bytes can be read to find a ``<meta>`` in ASCII is not UTF-16 (a UTF-16 page
    starts with a byte order mark, or is declared so by its HTTP header), so a meta-declared
    UTF-16 means UTF-8; UTF-32 is no encoding a browser knows.

    >>> _charset_header("text/html", b'<meta charset="utf-16"><title>Hi</title>')
    'text/html; charset=utf-8'
    >>> _charset_header("text/html; charset=utf-16", b'<meta charset="utf-16">')
    'text/html; charset=utf-16'
    """
    if read_bom(content)[0] is not None or http_content_type_encoding(content_type):
        return content_type
    declared = html_body_declared_encoding(content)
    if declared is not None and declared.startswith(("utf-16", "utf-32")):
        return "text/html; charset=utf-8"
    return content_type


#: The fields :func:`parse_change` reads.
PARSE_FIELDS: Final = (
    "status",
    "base_url",
    "content",
    "content_type",
    "headers",
    "signature",
    "prev_signature",
    "outlinks",
    "metadata",
    "markers",
)


def is_truncated(page: WebPage) -> bool:
    """Whether the stored content of *page* is cut short (``parser.skip.truncated`` skips it).

    It is when the fetcher said so, or when ``Content-Length`` is larger than the content.

    >>> is_truncated(WebPage("a:http/", content=b"abc", headers={"Content-Length": "9"}))
    True
    """
    if page.metadata.get(TRUNCATED_KEY) == b"true":
        return True
    for name, value in page.headers.items():
        if name.lower() == "content-length":
            try:
                return int(value.strip()) > len(page.content or b"")
            except ValueError:
                return False
    return False


def parse_change(page: WebPage, result: ParseResult, signature: Signature) -> RowChange:
    """The columns a parse of *page* with *result* writes (reference §7).

    A successful parse writes title, text, the signature (the old one moves to ``p:psig``), the
    outlinks (replacing the old ones) and the parse mark. Content that is not parsed gets its
    status, its signature and the mark, so that updatedb can still tell a changed file. A meta
    refresh adds its target to the outlinks and flags the redirect; a failure writes its status
    only. Parsing the same fetch again changes nothing: ``p:psig`` only moves when the row does
    not already carry this batch's parse mark.
    """
    fields: dict[str, object] = {"parse_status": result.status}
    entries: dict[str, dict[str, object]] = {}
    replace: dict[str, dict[str, object]] = {}
    batch = page.markers.get(Mark.FETCH)
    major, minor = result.status.major, result.status.minor
    if major == ParseStatusMajor.SUCCESS and minor == ParseStatusMinor.SUCCESS_REDIRECT:
        entries["outlinks"] = dict(result.outlinks)
        entries["metadata"] = {Metadata.REDIRECT_DISCOVERED: b"y"}
        return RowChange(fields, entries, replace)
    if major not in (ParseStatusMajor.SUCCESS, ParseStatusMajor.NOTPARSED):
        return RowChange(fields, entries, replace)
    new_signature = signature.calculate(page.content, result.text, page.base_url or page.url)
    already_parsed = batch is not None and page.markers.get(Mark.PARSE) == batch
    if not already_parsed and page.signature is not None:
        fields["prev_signature"] = page.signature
    fields["signature"] = new_signature
    if major == ParseStatusMajor.SUCCESS:
        fields["title"] = result.title
        fields["text"] = result.text
        replace["outlinks"] = dict(result.outlinks)
        # set, or removed when a parse keeps every link (as the fetch does with truncation)
        cut = str(result.outlinks_cut).encode() if result.outlinks_cut else None
        entries["metadata"] = {Metadata.OUTLINKS_CUT: cut}
    if batch is not None:
        entries["markers"] = {Mark.PARSE: batch}
    return RowChange(fields, entries, replace)
