"""URL normalization and the web table's row keys.

nutchy stores one row per URL, keyed exactly as Apache Nutch 2.x keys its ``webpage`` table: by
the *reversed URL* that ``org.apache.nutch.util.TableUtil.reverseUrl`` builds. The host's labels
come first in reverse order, then the scheme, then the port if one was written, then the path and
query as they are::

    <reversed host>:<scheme>[:<port>]<path>[?<query>]

>>> reverse_url("http://bar.foo.com:8983/to/index.html?a=b")
'com.foo.bar:http:8983/to/index.html?a=b'
>>> unreverse_url("com.foo.bar:http:8983/to/index.html?a=b")
'http://bar.foo.com:8983/to/index.html?a=b'
>>> reversed_host("com.foo.bar:http:8983/to/index.html?a=b")
'com.foo.bar'

Keys sort byte by byte, so all the rows of one host are adjacent: a scan with the prefix
``reverse_host(host) + ":"`` returns that host's rows and nothing else (every scheme and port).
Subdomains of a domain sort next to each other too, with one catch inherited from Nutch's format:
the domain's own key (``com.example:...``) and its subdomains' keys (``com.example.www:...``) are
separated by any reversed host that continues ``com.example`` with a digit, such as
``example1.com`` (because ``.`` < ``0``-``9`` < ``:`` in ASCII). Scanning a whole domain therefore
takes two prefixes, ``reverse_host(domain) + "."`` and ``reverse_host(domain) + ":"``.

The reversal does no normalization of its own (Nutch keeps the host's case, for instance), so two
spellings of one URL would get two rows. Every URL must therefore go through
:func:`normalize_url` before a key is built from it, wherever it comes from: seed files, outlinks
and redirect targets alike.

Do not confuse the row key with ``tldextract``'s ``reverse_domain_name``, which keeps the public
suffix in its original order (``co.uk.example``), whereas Nutch reverses every label
(``uk.co.example``).

Nothing in this module does I/O. :func:`domain_of` uses the Public Suffix List snapshot bundled
with ``tldextract``; it never downloads a newer list and never writes a cache.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Final

from w3lib.url import safe_url_string

if TYPE_CHECKING:
    import tldextract

__all__ = [
    "HOST_KEY_MODES",
    "InvalidURL",
    "domain_of",
    "host_key",
    "host_of",
    "normalize_url",
    "reverse_host",
    "reverse_url",
    "reversed_host",
    "unreverse_host",
    "unreverse_url",
]


class InvalidURL(ValueError):
    """A URL (or a row key) that nutchy cannot normalize, reverse or unreverse.

    :func:`reverse_url`, :func:`normalize_url`, :func:`host_of` and their siblings raise it. The
    offending text is in *url* and the human-readable cause in *reason*; both appear in the
    message.

    >>> str(InvalidURL("mailto:a@b.c", "unsupported scheme 'mailto'"))
    "invalid URL 'mailto:a@b.c': unsupported scheme 'mailto'"
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(url, reason)
        self.url = url
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid URL {self.url!r}: {self.reason}"


#: Schemes that get row keys: those Nutch's protocol plugins fetch (protocol-http, -ftp, -file).
_SCHEMES: Final = frozenset({"http", "https", "ftp", "file"})

#: Ports that :func:`normalize_url` removes because they are the scheme's default.
_DEFAULT_PORTS: Final = {"http": "80", "https": "443", "ftp": "21"}

#: Valid values of :func:`host_key`'s *mode*, i.e. of Nutch's ``generate.count.mode``.
HOST_KEY_MODES: Final = ("host", "domain")

# Any control character (C0, DEL, C1) or any Unicode whitespace. Keys are built from normalized
# URLs, which never contain one, so finding one means the input was not normalized.
_BAD_CHAR_RE: Final = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
_CONTROL_CHAR_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# RFC 3986, section 3.1.
_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")

# After "scheme:", the authority and then the path and query, up to the fragment. As in Java's
# parser, the authority ends at the first '/' or '?', so that of "http://foo.com?a=/b" is
# "foo.com" and not "foo.com?a=".
_AUTHORITY_AND_FILE_RE: Final = re.compile(r"//([^/?#]*)([^#]*)")

# What normalize_url strips from both ends of its input, as the URL Standard and w3lib do.
_C0_OR_SPACE: Final = "".join(map(chr, range(0x21)))

# After IDNA, a host must be dot-separated, non-empty labels of letters, digits, '-' and '_'
# (underscores are not valid in hostnames, but they occur in real DNS names and servers).
_ASCII_HOST_RE: Final = re.compile(r"[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*")

# The ASCII characters a host may contain before IDNA. Anything else (a backslash, '%', '<'…)
# is refused early, before w3lib could read the authority differently from nutchy.
_RAW_HOST_BAD_RE: Final = re.compile(r"[^A-Za-z0-9._\-\x80-\U0010ffff]")

_HEX_DIGITS: Final = frozenset("0123456789abcdef")

# An IPv4 host as the URL Standard serializes it: four decimal numbers 0-255, no leading zero.
_DOTTED_QUAD_RE: Final = re.compile(
    r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
)

# A percent sign followed, or not, by two hexadecimal digits.
_ESCAPE_RE: Final = re.compile(r"%([0-9A-Fa-f]{2})?")

_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# Escape (upper-cased hex) → its canonical spelling: the character itself when it is unreserved
# (RFC 3986, section 6.2.2.2), else the escape with upper-case hex digits (section 6.2.2.1).
_ESCAPE_CANON: Final = {
    f"{byte:02X}": (chr(byte) if chr(byte) in _UNRESERVED else f"%{byte:02X}")
    for byte in range(256)
}

# A path and query made only of characters that w3lib's safe_url_string leaves as they are, so
# that calling it would be wasted time (tests/test_core_urls.py checks this claim).
_W3LIB_SAFE_RE: Final = re.compile(
    r"[A-Za-z0-9\-._~!$&()*+,;=:@/%]*(?:\?[A-Za-z0-9\-._~!$&()*+,;=:@/?%]*)?"
)

# A URL that normalize_url would return unchanged: lower-case http(s) scheme and host, no default
# or zero-padded port, a path, and only characters that w3lib leaves alone and that need no
# canonical escaping. Anything else (escapes included) takes the full path.
_NORMALIZED_RE: Final = re.compile(
    r"(https?)://[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&()*+,;=:@/]*)(?:\?[A-Za-z0-9\-._~!$&()*+,;=:@/?]+)?"
)


def _split(
    url: str, shown: str | None = None, *, spaces: bool = False
) -> tuple[str, str, str, str]:
    """Split *url* the way ``java.net.URL`` does for ``reverseUrl``.

    Returns ``(scheme, host, port, file)``: the lower-cased scheme; the host as written; the port
    as a plain decimal string, or ``""`` when none (or an empty one) was written; and ``file``,
    the path plus ``?`` and query, with the fragment gone. Userinfo is skipped. *shown* is the
    text that error messages name (the caller's original input). With *spaces*, whitespace
    other than control characters is let through, for the caller to check or encode.
    """
    shown = url if shown is None else shown
    # isprintable() is a quick pre-test: it is False for every control and whitespace
    # character but ' ', and for a few harmless ones too, which the exact search then lets by.
    if not url.isprintable() or (not spaces and " " in url):
        bad = (_CONTROL_CHAR_RE if spaces else _BAD_CHAR_RE).search(url)
        if bad is not None:
            raise InvalidURL(
                shown,
                f"contains whitespace or a control character ({bad.group()!r}"
                f" at index {bad.start()})",
            )
    if url.startswith("http://"):
        scheme, colon = "http", 4
    elif url.startswith("https://"):
        scheme, colon = "https", 5
    else:
        colon = url.find(":")
        if colon <= 0 or _SCHEME_RE.fullmatch(url, 0, colon) is None:
            raise InvalidURL(shown, "no scheme (an absolute URL such as 'http://host/' is needed)")
        scheme = url[:colon].lower()
        if scheme not in _SCHEMES:
            raise InvalidURL(
                shown, f"unsupported scheme {scheme!r} (expected one of: ftp, file, http, https)"
            )
    parts = _AUTHORITY_AND_FILE_RE.match(url, colon + 1)
    if parts is None:
        raise InvalidURL(shown, f"'//' must follow '{scheme}:'")
    authority, file = parts.groups()

    at = authority.rfind("@")
    if at >= 0:
        if authority.find("@") != at:
            raise InvalidURL(shown, "more than one '@' in the authority")
        authority = authority[at + 1 :]
    if "[" in authority or "]" in authority:
        raise InvalidURL(
            shown,
            "IPv6 literal hosts are not supported: Nutch's unreverseUrl splits a row key on ':'"
            " and cannot rebuild them",
        )
    host, colon_found, port = authority.partition(":")
    if colon_found and port:
        if ":" in port:
            raise InvalidURL(shown, "more than one ':' in the authority (an unbracketed IPv6?)")
        if not (port.isascii() and port.isdigit()) or int(port) > 65535:
            raise InvalidURL(shown, f"invalid port {port!r} (expected a number from 0 to 65535)")
        port = str(int(port))
    if not host and scheme != "file":
        raise InvalidURL(shown, "no host")
    return scheme, host, port, file


def reverse_url(url: str) -> str:
    """Return the row key of *url*, exactly as Nutch's ``TableUtil.reverseUrl`` builds it.

    The host's dot-separated labels are written in reverse order, followed by ``:`` and the
    scheme, ``:`` and the port when one is written, then the path and the query. Nutch's own test
    table:

    >>> reverse_url("http://foo.com/")
    'com.foo:http/'
    >>> reverse_url("http://foo.com:8900/")
    'com.foo:http:8900/'
    >>> reverse_url("ftp://bar.baz.com/")
    'com.baz.bar:ftp/'
    >>> reverse_url("http://bar.baz.com:8983/to/index.html?a=b&c=d")
    'com.baz.bar:http:8983/to/index.html?a=b&c=d'
    >>> reverse_url("http://foo.com?a=/a/b&c=0")
    'com.foo:http/?a=/a/b&c=0'
    >>> reverse_url("http://foo.com")
    'com.foo:http'
    >>> reverse_url("file:///var/www/index.html")
    ':file/var/www/index.html'

    Like Nutch (which parses with ``java.net.URL``), this function normalizes nothing on purpose:
    the host keeps its case and a port is kept when written, even the default one. Pass URLs
    through :func:`normalize_url` first.

    :func:`unreverse_url` gives *url* back, except for what the key cannot hold: the userinfo
    (``user:password@``) and the fragment are dropped, the scheme is lower-cased, a ``/`` is
    inserted before a query that follows the host directly, empty host labels vanish (the
    trailing dot of ``example.com.`` among them), and the port is written as a plain decimal
    number (``:080`` becomes ``:80`` and an empty ``:`` disappears). URLs from
    :func:`normalize_url` are affected by none of these.

    :class:`InvalidURL` is raised, with the reason in its message, for a URL with no scheme; a
    scheme other than http, https, ftp and file; a missing ``//``; an http(s) or ftp URL with no
    host; a non-numeric or out-of-range port; more than one ``@``; whitespace or a control
    character anywhere; and IPv6 literal hosts. Nutch itself accepts the last ones, but its
    ``unreverseUrl`` splits the key on ``:`` and cannot rebuild them, so nutchy refuses to
    write such keys:

    >>> reverse_url("http://[::1]:8080/")
    Traceback (most recent call last):
    ...
    nutchy.core.urls.InvalidURL: invalid URL 'http://[::1]:8080/': IPv6 literal hosts are not \
supported: Nutch's unreverseUrl splits a row key on ':' and cannot rebuild them
    """
    scheme, host, port, file = _split(url)
    if file and file[0] != "/":
        file = "/" + file
    if port:
        return f"{reverse_host(host)}:{scheme}:{port}{file}"
    return f"{reverse_host(host)}:{scheme}{file}"


def unreverse_url(key: str) -> str:
    """Return the URL whose row key is *key*; the inverse of :func:`reverse_url`.

    The text before the first ``/`` (the whole key if there is none) is split on ``:`` into the
    reversed host, the scheme and, if present, the port; the rest of the key is the path and
    query, copied as it is.

    >>> unreverse_url("com.foo:http/")
    'http://foo.com/'
    >>> unreverse_url("com.foo:http:8900/")
    'http://foo.com:8900/'
    >>> unreverse_url("com.foo:http/?a=/a/b&c=0")
    'http://foo.com/?a=/a/b&c=0'
    >>> unreverse_url("com.foo:http")
    'http://foo.com'
    >>> unreverse_url(":file/var/www/index.html")
    'file:///var/www/index.html'

    :class:`InvalidURL` is raised when *key* does not have the ``host:scheme[:port]`` layout.
    """
    slash = key.find("/")
    head, tail = (key, "") if slash < 0 else (key[:slash], key[slash:])
    fields = head.split(":")
    if len(fields) not in (2, 3) or not fields[1]:
        raise InvalidURL(key, "not a row key: expected '<reversed host>:<scheme>[:<port>]'")
    if len(fields) == 3:
        return f"{fields[1]}://{unreverse_host(fields[0])}:{fields[2]}{tail}"
    return f"{fields[1]}://{unreverse_host(fields[0])}{tail}"


def reversed_host(key: str) -> str:
    """Return the reversed host of the row key *key*: the text before its first ``:``.

    >>> reversed_host("com.foo.bar:http:8983/to/index.html")
    'com.foo.bar'
    >>> reversed_host(":file/var/www/index.html")
    ''
    """
    colon = key.find(":")
    if colon < 0:
        raise InvalidURL(key, "not a row key: no ':' after the reversed host")
    return key[:colon]


def reverse_host(host: str) -> str:
    """Return *host* with its dot-separated labels in reverse order.

    Empty labels are dropped, as Nutch's ``StringUtils.split`` drops them, and a host made only
    of dots (or empty) comes back unchanged.

    >>> reverse_host("www.example.co.uk")
    'uk.co.example.www'
    >>> reverse_host("example.com.")
    'com.example'
    >>> reverse_host("")
    ''
    """
    labels = host.split(".")
    if "" in labels:
        labels = [label for label in labels if label]
        if not labels:
            return host
    labels.reverse()
    return ".".join(labels)


def unreverse_host(rev: str) -> str:
    """Return the host whose reversed form is *rev*; the inverse of :func:`reverse_host`.

    Reversing the labels is its own inverse, so this is the same operation under a name that
    says which way the data flows.

    >>> unreverse_host("uk.co.example.www")
    'www.example.co.uk'
    """
    return reverse_host(rev)


def _canonical_escapes(text: str) -> str:
    """Decode escaped unreserved characters, upper-case the other escapes, escape stray ``%``."""
    if "%" not in text:
        return text
    return _ESCAPE_RE.sub(_canonical_escape, text)


def _canonical_escape(match: re.Match[str]) -> str:
    digits = match.group(1)
    # A '%' that starts no escape can only stand for itself, whose one valid spelling is %25.
    return "%25" if digits is None else _ESCAPE_CANON[digits.upper()]


def _remove_dot_segments(path: str) -> str:
    """Resolve the ``.`` and ``..`` segments of an absolute *path* (RFC 3986, section 5.2.4)."""
    if "/." not in path:
        return path
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:-1]:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    last = segments[-1]
    if last == "..":
        if kept:
            kept.pop()
        kept.append("")
    elif last == ".":
        kept.append("")
    else:
        kept.append(last)
    return "/" + "/".join(kept)


def _ascii_host(host: str, scheme: str, url: str) -> str:
    """Return *host* lower-cased, punycoded and checked, without a trailing dot."""
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise InvalidURL(url, f"host {host!r} cannot be converted to IDNA: {exc}") from exc
    host = host.lower()
    host = host.removesuffix(".")
    if not host:
        if scheme == "file":
            return host
        raise InvalidURL(url, "no host")
    if _ASCII_HOST_RE.fullmatch(host) is None:
        if "" in host.split("."):
            raise InvalidURL(url, f"empty label in host {host!r}")
        raise InvalidURL(url, f"invalid character in host {host!r}")
    if _ends_in_a_number(host):
        return _ipv4_host(host, url)
    return host


def _ends_in_a_number(host: str) -> bool:
    """Whether the URL Standard reads *host* (ASCII, lower-case, no trailing dot) as an IPv4
    address: its last label is decimal digits, or a number ``0x`` followed by hex digits."""
    last = host.rpartition(".")[2]
    if last.isdigit():
        return True
    return last.startswith("0x") and all(c in _HEX_DIGITS for c in last[2:])


def _ipv4_number(part: str) -> int | None:
    """One part of a numeric IPv4 host by the URL Standard: ``0x`` hex, ``0`` octal, else
    decimal; ``None`` when it is not a number."""
    if not part:
        return None
    radix = 10
    if len(part) >= 2 and part.startswith("0x"):
        part, radix = part[2:], 16
    elif len(part) >= 2 and part.startswith("0"):
        part, radix = part[1:], 8
    if not part:
        return 0
    try:
        return int(part, radix) if part.isalnum() else None
    except ValueError:
        return None


def _ipv4_host(host: str, url: str) -> str:
    """*host*, which ends in a number, as the dotted quad the URL Standard's IPv4 parser makes
    of it (so ``2130706433``, ``0x7f.1``, ``127.1`` and ``0177.0.0.1`` are one host,
    ``127.0.0.1``); :class:`InvalidURL` when it is not a valid IPv4 address."""
    parts = host.split(".")
    numbers = [_ipv4_number(part) for part in parts] if len(parts) <= 4 else [None]
    if any(n is None for n in numbers):
        raise InvalidURL(url, f"host {host!r} ends in a number but is not an IPv4 address")
    values = [n for n in numbers if n is not None]
    last = values.pop()
    if any(n > 255 for n in values) or last >= 256 ** (4 - len(values)):
        raise InvalidURL(url, f"IPv4 host {host!r} is out of range")
    address = last
    for i, n in enumerate(values):
        address += n << (8 * (3 - i))
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def _normalize_fast(url: str) -> str | None:
    """Return *url* if it is recognizably normalized already, else ``None``."""
    match = _NORMALIZED_RE.fullmatch(url)
    if match is None or "/." in match.group(3):
        return None
    host = url[match.end(1) + 3 : match.start(3) if match.group(2) is None else match.start(2) - 1]
    if host.rpartition(".")[2][:1].isdigit() and not _DOTTED_QUAD_RE.fullmatch(host):
        return None  # a numeric host to read as an IPv4 address, or to refuse
    port = match.group(2)
    if port is not None and (int(port) > 65535 or port == _DEFAULT_PORTS[match.group(1)]):
        return None
    return url


def _normalize_full(url: str) -> str:
    """:func:`normalize_url` without the shortcut for URLs that are normalized already."""
    text = url.strip(_C0_OR_SPACE)
    scheme, host, port, file = _split(text, shown=url, spaces=True)
    if _RAW_HOST_BAD_RE.search(host) is not None:
        raise InvalidURL(url, f"invalid character in host {host!r}")
    host = _ascii_host(host, scheme, url)
    if port == _DEFAULT_PORTS.get(scheme):
        port = ""
    authority = f"{scheme}://{host}:{port}" if port else f"{scheme}://{host}"

    path, question, query = file.partition("?")
    if "\\" in path:
        # The URL Standard reads '\' as '/' in the path of these schemes, as browsers do.
        path = path.replace("\\", "/")
    rest = f"{path}{question}{query}"
    if _W3LIB_SAFE_RE.fullmatch(rest) is None:
        try:
            safe = safe_url_string(f"{authority}{rest}")
        except ValueError as exc:  # the parts were validated above
            raise InvalidURL(url, f"w3lib cannot make it safe: {exc}") from exc
        if not safe.startswith(authority):  # defensive: never seen
            raise InvalidURL(url, f"w3lib rewrote the authority as {safe!r}")
        rest = safe[len(authority) :]

    path, _, query = rest.partition("?")
    path = _remove_dot_segments(_canonical_escapes(path)) or "/"
    query = _canonical_escapes(query)
    return f"{authority}{path}?{query}" if query else f"{authority}{path}"


def normalize_url(url: str) -> str:
    """Return nutchy's canonical spelling of *url*, the form row keys are built from.

    Every URL goes through this function before :func:`reverse_url`, whether it comes from a
    seed file, an outlink or a redirect. It plays the part of Nutch's ``urlnormalizer-basic``,
    so that one resource gets one row:

    - whitespace and control characters around the URL are stripped; inside it, control
      characters (tab and newline included) are refused and spaces are percent-encoded;
    - the scheme and the host are lower-cased and an internationalized host is converted to
      punycode (IDNA 2003 through the standard library's codec, as w3lib and Scrapy do);
    - a trailing dot after the host is removed;
    - a host that ends in a number is an IPv4 address, read as the URL Standard (and so every
      browser) reads it, one to four parts, each decimal, octal (``0`` first) or hex (``0x``),
      and written as a dotted quad; one that is not a valid address is refused;
    - the default port (80 for http, 443 for https, 21 for ftp) is removed and any other port
      loses its leading zeros;
    - the userinfo and the fragment are removed, since a row key can hold neither;
    - w3lib's ``safe_url_string`` percent-encodes what is unsafe (spaces, non-ASCII characters
      as UTF-8, ``|``…); then escapes of unreserved characters are decoded, the hex digits of
      the remaining escapes are upper-cased, and a ``%`` that starts no escape becomes ``%25``;
    - ``.`` and ``..`` path segments are resolved (after decoding, so ``%2E%2E`` counts), ``\\``
      in the path reads as ``/``, and an empty path becomes ``/``;
    - an empty query (a bare ``?``) is removed.

    >>> normalize_url("HTTP://www.Example.COM:80/a/./b/../c%7e/%c3%a9t%C3%A9?q=x y&a=1#top")
    'http://www.example.com/a/c~/%C3%A9t%C3%A9?q=x%20y&a=1'
    >>> normalize_url("https://bücher.example:0443")
    'https://xn--bcher-kva.example/'
    >>> normalize_url("http://0x7f.1/"), normalize_url("http://2130706433/")
    ('http://127.0.0.1/', 'http://127.0.0.1/')

    The query keeps its parameters in their original order. ``w3lib.url.canonicalize_url``
    sorts them (and rewrites ``?a`` as ``?a=``), but the order is part of the URL the server
    sees, and some servers answer differently when it changes; nutchy would rather store two
    rows for one page than fetch a URL that no link points at.

    The result is safe for Scrapy (``Request`` leaves it as it is, so the URL that comes back in
    a response still has the same key) and normalizing again changes nothing.

    :class:`InvalidURL` is raised for what cannot be normalized: anything :func:`reverse_url`
    would refuse, a host that cannot be converted to IDNA, a host with empty labels, a host
    with characters other than letters, digits, ``-``, ``_`` and ``.``, and a host that ends in a
    number but is not an IPv4 address.
    """
    return _normalize_fast(url) or _normalize_full(url)


def host_of(url: str) -> str:
    """Return the lower-cased host of *url*, without port or userinfo.

    >>> host_of("http://user@WWW.Example.com:8080/x")
    'www.example.com'

    The host is returned as written apart from its case, so pass a normalized URL to get the
    punycode form. :class:`InvalidURL` is raised as by :func:`reverse_url`.
    """
    return _split(url)[1].lower()


@functools.cache
def _suffix_extractor() -> tldextract.TLDExtract:
    # Imported here because tldextract pulls in requests, which most users of this module
    # never need. No suffix list URLs and no cache directory: the bundled snapshot is used, so
    # nothing is downloaded and nothing is written.
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


@functools.lru_cache(maxsize=1 << 16)
def _domain_of_host(host: str) -> str:
    parts = _suffix_extractor()(host)
    if parts.domain and parts.suffix:
        return f"{parts.domain}.{parts.suffix}"
    return host


def domain_of(url: str) -> str:
    """Return the registered domain of *url*'s host, such as ``example.co.uk``.

    The domain is the host's label just above its public suffix, together with that suffix,
    looked up in the Public Suffix List snapshot that ships with ``tldextract`` (ICANN section
    only, so ``user.github.io`` belongs to ``github.io``). An IP address, a host with no public
    suffix and a host that is itself a public suffix are returned whole.

    >>> domain_of("http://www.bbc.co.uk/news")
    'bbc.co.uk'
    >>> domain_of("http://192.168.0.1:8080/")
    '192.168.0.1'
    >>> domain_of("http://localhost/")
    'localhost'
    """
    host = host_of(url)
    return _domain_of_host(host) if host else host


def host_key(url: str, mode: str) -> str:
    """Return what *url* is counted under when generate limits URLs per host or per domain.

    *mode* is the value of Nutch's ``generate.count.mode``: ``"host"`` gives :func:`host_of`,
    ``"domain"`` gives :func:`domain_of`. Nutch 2.x has no per-IP count, so any other mode
    raises :class:`ValueError`.

    >>> host_key("http://news.bbc.co.uk/", "host"), host_key("http://news.bbc.co.uk/", "domain")
    ('news.bbc.co.uk', 'bbc.co.uk')
    """
    if mode == "host":
        return host_of(url)
    if mode == "domain":
        return domain_of(url)
    raise ValueError(f"unknown host key mode {mode!r}; valid modes are 'host' and 'domain'")
