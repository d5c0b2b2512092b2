"""Tests for nutchy.core.urls: Nutch row keys, normalization, hosts and domains."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
from itertools import groupby
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from w3lib.url import safe_url_string

from nutchy.core import urls
from nutchy.core.urls import (
    HOST_KEY_MODES,
    InvalidURL,
    domain_of,
    host_key,
    host_of,
    normalize_url,
    reverse_host,
    reverse_url,
    reversed_host,
    unreverse_host,
    unreverse_url,
)

# TestTableUtil.java in Nutch 2.x: (URL, reversed URL, what unreverseUrl gives back).
NUTCH_TABLE = [
    ("http://foo.com/", "com.foo:http/", "http://foo.com/"),
    ("http://foo.com:8900/", "com.foo:http:8900/", "http://foo.com:8900/"),
    ("ftp://bar.baz.com/", "com.baz.bar:ftp/", "ftp://bar.baz.com/"),
    (
        "http://bar.baz.com:8983/to/index.html?a=b&c=d",
        "com.baz.bar:http:8983/to/index.html?a=b&c=d",
        "http://bar.baz.com:8983/to/index.html?a=b&c=d",
    ),
    ("http://foo.com?a=/a/b&c=0", "com.foo:http/?a=/a/b&c=0", "http://foo.com/?a=/a/b&c=0"),
    ("http://foo.com", "com.foo:http", "http://foo.com"),
    ("file:///var/www/index.html", ":file/var/www/index.html", "file:///var/www/index.html"),
]


@pytest.mark.parametrize(("url", "key", "back"), NUTCH_TABLE)
def test_nutch_table(url: str, key: str, back: str) -> None:
    assert reverse_url(url) == key
    assert unreverse_url(key) == back


@pytest.mark.parametrize(
    ("url", "key"),
    [
        # Nutch keeps the host's case and an explicit default port.
        ("http://Foo.COM:80/A", "COM.Foo:http:80/A"),
        ("https://foo.com:443/", "com.foo:https:443/"),
        # What the key cannot hold is dropped: userinfo, fragment, scheme case.
        ("http://user:pw@foo.com/x", "com.foo:http/x"),
        ("http://foo.com/x?q#frag?x", "com.foo:http/x?q"),
        ("HTTP://foo.com/", "com.foo:http/"),
        # Empty host labels vanish, as with Nutch's StringUtils.split.
        ("http://foo.com./", "com.foo:http/"),
        ("http://foo..com/", "com.foo:http/"),
        # The port is written as a number; an empty one is no port.
        ("http://foo.com:0080/", "com.foo:http:80/"),
        ("http://foo.com:/", "com.foo:http/"),
        # A query with no path gets a '/', an empty query is kept.
        ("http://foo.com?", "com.foo:http/?"),
        ("http://foo.com/x?", "com.foo:http/x?"),
        # No normalization of the path.
        ("http://foo.com/a/../b//c%7e", "com.foo:http/a/../b//c%7e"),
        ("file://localhost/etc/hosts", "localhost:file/etc/hosts"),
        ("http://192.168.1.20:8080/", "20.1.168.192:http:8080/"),
        ("http://bücher.de/", "de.bücher:http/"),
    ],
)
def test_reverse_url_follows_nutch(url: str, key: str) -> None:
    assert reverse_url(url) == key


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("foo.com/index.html", "no scheme"),
        ("//foo.com/", "no scheme"),
        ("", "no scheme"),
        ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
        ("javascript:void(0)", "unsupported scheme 'javascript'"),
        ("ws://foo.com/", "unsupported scheme 'ws'"),
        ("http:foo.com/", "'//' must follow 'http:'"),
        ("file:/var/www/index.html", "'//' must follow 'file:'"),
        ("http:///path", "no host"),
        ("https://:8080/", "no host"),
        ("ftp://user@/", "no host"),
        ("http://[::1]/", "IPv6 literal hosts are not supported"),
        ("http://[2001:db8::1]:8080/x", "IPv6 literal hosts are not supported"),
        ("http://2001:db8::1/", "more than one ':'"),
        ("http://foo.com:http/", "invalid port 'http'"),
        ("http://foo.com:65536/", "invalid port '65536'"),
        ("http://foo.com:-1/", "invalid port '-1'"),
        ("http://foo.com:+80/", "invalid port '+80'"),
        ("http://foo.com:\u0668\u0660/", "invalid port"),  # Arabic-Indic digits
        ("http://a@b@foo.com/", "more than one '@'"),
        ("http://foo.com/a b", "whitespace or a control character (' ' at index 16)"),
        (" http://foo.com/", "whitespace or a control character"),
        ("http://foo.com/\t", "whitespace or a control character ('\\t'"),
        ("http://foo.com/\n", "whitespace or a control character"),
        ("http://foo.com/\x00", "whitespace or a control character"),
        ("http://foo.com/\x7f", "whitespace or a control character"),
        ("http://foo.com/\x85", "whitespace or a control character"),
        ("http://foo.com/\u00a0", "whitespace or a control character"),
        ("http://foo.com/\u2028", "whitespace or a control character"),
    ],
)
def test_reverse_url_rejects(url: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        reverse_url(url)
    assert info.value.url == url
    assert reason in info.value.reason
    assert repr(url) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_reverse_url_accepts_harmless_nonprintable_characters() -> None:
    # isprintable() is only a pre-test: a format character such as a soft hyphen is no reason
    # to refuse a URL.
    assert reverse_url("http://foo.com/a\u00adb") == "com.foo:http/a\u00adb"


def test_ipv6_would_break_nutch_unreverse() -> None:
    # Why reverse_url refuses IPv6: Nutch would write "[::1]:http:8080/", which splits on ':'
    # into nonsense. unreverse_url refuses such a key as well.
    with pytest.raises(InvalidURL, match="not a row key"):
        unreverse_url("[::1]:http:8080/")


@pytest.mark.parametrize("key", ["com.foo", "com.foo/x", "com.foo:http:80:1/", "com.foo:/x", ""])
def test_unreverse_url_rejects_malformed_keys(key: str) -> None:
    with pytest.raises(InvalidURL, match="not a row key"):
        unreverse_url(key)


def test_reversed_host() -> None:
    assert reversed_host("com.foo.bar:http:8983/to/index.html?a=b&c=d") == "com.foo.bar"
    assert reversed_host(":file/var/www/index.html") == ""
    with pytest.raises(InvalidURL, match="no ':'"):
        reversed_host("com.foo")


@pytest.mark.parametrize(
    ("host", "rev"),
    [
        ("www.example.com", "com.example.www"),
        ("localhost", "localhost"),
        ("127.0.0.1", "1.0.0.127"),
        ("example.com.", "com.example"),
        (".example..com", "com.example"),
        ("", ""),
        ("..", ".."),
    ],
)
def test_reverse_host(host: str, rev: str) -> None:
    assert reverse_host(host) == rev
    assert unreverse_host(rev) == reverse_host(rev)


@given(st.lists(st.from_regex(r"[a-z0-9-]{1,5}", fullmatch=True), min_size=1, max_size=5))
def test_unreverse_host_inverts_reverse_host(labels: list[str]) -> None:
    host = ".".join(labels)
    assert unreverse_host(reverse_host(host)) == host


def test_invalid_url_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(InvalidURL("http://x", "no host")))
    assert (error.url, error.reason, str(error)) == (
        "http://x",
        "no host",
        "invalid URL 'http://x': no host",
    )


# --- normalize_url ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("http://www.example.com/a/b.html?x=1&y=2", "http://www.example.com/a/b.html?x=1&y=2"),
        ("HTTP://WWW.EXAMPLE.COM/Path", "http://www.example.com/Path"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com?q=1", "http://example.com/?q=1"),
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("ftp://example.com:21/pub", "ftp://example.com/pub"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:08080/", "http://example.com:8080/"),
        ("http://example.com:/", "http://example.com/"),
        ("http://example.com./x", "http://example.com/x"),
        ("http://user:secret@example.com/x", "http://example.com/x"),
        ("http://example.com/x#section-2", "http://example.com/x"),
        ("http://example.com/x?#", "http://example.com/x"),
        ("http://example.com/x?", "http://example.com/x"),
        # Query order and spelling are kept: no sorting, no '?a' → '?a='.
        ("http://example.com/?b=2&a=1&a", "http://example.com/?b=2&a=1&a"),
        ("http://example.com/?q=a+b", "http://example.com/?q=a+b"),
        # Dot segments, including escaped ones.
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/../../x", "http://example.com/x"),
        ("http://example.com/a/%2E%2e/b", "http://example.com/b"),
        ("http://example.com/.well-known/x", "http://example.com/.well-known/x"),
        ("http://example.com/a\\b\\..\\c?d\\e", "http://example.com/a/c?d%5Ce"),
        # Escapes: unreserved decoded, others upper-cased, stray '%' escaped.
        ("http://example.com/%7euser/%41%2f%3a", "http://example.com/~user/A%2F%3A"),
        ("http://example.com/?q=%e2%82%ac&r=%7E", "http://example.com/?q=%E2%82%AC&r=~"),
        ("http://example.com/100%/x?p=5%", "http://example.com/100%25/x?p=5%25"),
        ("http://example.com/%%41", "http://example.com/%25A"),
        # Unsafe characters are percent-encoded by w3lib.
        ("http://example.com/a b?c d", "http://example.com/a%20b?c%20d"),
        ("http://example.com/café?q=ü", "http://example.com/caf%C3%A9?q=%C3%BC"),
        ("http://example.com/a|b", "http://example.com/a%7Cb"),
        ("http://example.com/it's?it's", "http://example.com/it's?it%27s"),
        # IDN hosts become punycode.
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://пример.испытание/", "http://xn--e1afmkfd.xn--80akhbyknj4f/"),
        ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
        # Surrounding whitespace is stripped.
        ("  http://example.com/x\n", "http://example.com/x"),
        ("http://192.168.0.1:8080/", "http://192.168.0.1:8080/"),
        ("file:///var/www/../index.html", "file:///var/index.html"),
        ("FILE://LocalHost/x", "file://localhost/x"),
        ("file://", "file:///"),
        ("http://my_host.example.com/", "http://my_host.example.com/"),
    ],
)
def test_normalize_url(url: str, normalized: str) -> None:
    assert normalize_url(url) == normalized
    assert normalize_url(normalized) == normalized


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("example.com/", "no scheme"),
        ("mailto:a@example.com", "unsupported scheme"),
        ("data:text/plain,hi", "unsupported scheme"),
        ("http://", "no host"),
        ("http://./", "no host"),
        ("http://[::1]/", "IPv6"),
        ("http://example.com:99999/", "invalid port"),
        ("http://example.com:8o/", "invalid port"),
        ("http://exa mple.com/", "invalid character in host"),
        ("http://exa%6dple.com/", "invalid character in host"),
        ("http://example.com\\evil.com/", "invalid character in host"),
        ("http://a\uff0fb.example/", "invalid character in host 'a/b.example'"),
        ("http://a..example.com/", "empty label in host"),
        ("http://.example.com/", "empty label in host"),
        ("http://" + "ü" * 64 + ".com/", "cannot be converted to IDNA"),
        ("http://example.com/a\tb", "control character"),
        ("http://example.com/a\nb", "control character"),
        ("http://example.com/a\x00b", "control character"),
    ],
)
def test_normalize_url_rejects(url: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        normalize_url(url)
    assert info.value.url == url
    assert reason in info.value.reason


def test_normalize_fast_path_is_taken_for_typical_urls() -> None:
    url = "https://www.example.com/news/2024/story-1.html?page=2&sort=new"
    assert urls._normalize_fast(url) == url
    for not_normalized in (
        "http://www.example.com:80/",
        "http://www.example.com/a/../b",
        "http://www.example.com/a%20b",
        "http://www.example.com/x?",
        "http://www.example.com",
        "HTTP://www.example.com/",
    ):
        assert urls._normalize_fast(not_normalized) is None


# --- properties ---------------------------------------------------------------------------------

LABEL = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
TLD = st.sampled_from(["com", "org", "net", "de", "co.uk", "xn--p1ai"])
HOST = st.builds(
    lambda labels, tld: ".".join([*labels, tld]), st.lists(LABEL, min_size=1, max_size=4), TLD
)
PORT = st.one_of(st.just(""), st.integers(0, 65535).map(lambda p: f":{p}"))
PATH_CHAR = st.sampled_from(
    "abcXYZ019-._~!$&'()*+,;=:@/ %|\\\"<>[]^`{}é€\u00a0\U0001f600%41%2f%2E%e2%82%ac"
)
PATH = st.lists(PATH_CHAR, max_size=20).map(lambda chars: "/" + "".join(chars))
QUERY = st.one_of(
    st.just(""), st.lists(PATH_CHAR | st.just("?"), max_size=15).map(lambda c: "?" + "".join(c))
)


@st.composite
def http_urls(draw: st.DrawFn) -> str:
    """Absolute http(s) URLs made of labels, an optional port, a path and a query."""
    scheme = draw(st.sampled_from(["http", "https"]))
    return f"{scheme}://{draw(HOST)}{draw(PORT)}{draw(PATH)}{draw(QUERY)}"


@st.composite
def messy_urls(draw: st.DrawFn) -> str:
    """URLs as they come: odd case, userinfo, IDN labels, default ports, fragments, any text."""
    scheme = draw(st.sampled_from(["http", "HTTP", "https", "HttpS", "ftp", "file"]))
    userinfo = draw(st.sampled_from(["", "user@", "u:p%41@"]))
    label = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True) | st.sampled_from(
        ["bücher", "ПРИМЕР", "例え", "ÉCOLE", "straße", "xn--bcher-kva"]
    )
    host = ".".join(draw(st.lists(label, min_size=1, max_size=4)))
    host += draw(st.sampled_from(["", "."]))
    port = draw(st.sampled_from(["", ":", ":80", ":443", ":21", ":8080", ":0080", ":65535"]))
    text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=25)
    path = "/" + draw(text)
    query = draw(st.one_of(st.just(""), text.map(lambda t: "?" + t)))
    fragment = draw(st.one_of(st.just(""), text.map(lambda t: "#" + t)))
    return f"{scheme}://{userinfo}{host}{port}{path}{query}{fragment}"


@given(http_urls())
@example("http://foo.com/?a=/a/b&c=0")
@example("http://foo.com/%2e%2e/x")
def test_round_trip_of_normalized_urls(url: str) -> None:
    normalized = normalize_url(url)
    assert unreverse_url(reverse_url(normalized)) == normalized


@settings(deadline=None)
@given(messy_urls())
@example("http://example.com/%%41")
@example("http://example.com/a/b/%2e%2E/")
@example("http://straße.de/")
def test_normalize_is_idempotent_safe_and_reversible(url: str) -> None:
    try:
        normalized = normalize_url(url)
    except InvalidURL:
        assume(False)
        raise
    assert normalized.isascii()
    assert normalize_url(normalized) == normalized
    assert urls._normalize_full(normalized) == normalized
    # Scrapy's Request runs safe_url_string on its URL: it must not change the row key.
    assert safe_url_string(normalized) == normalized
    assert unreverse_url(reverse_url(normalized)) == normalized


FAST_CHAR = st.sampled_from("abXY09-._~!$&()*+,;=:@/")


@given(
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z0-9_-]{1,5}(?:\.[a-z0-9_-]{1,5}){0,3}", fullmatch=True),
    st.one_of(st.just(""), st.sampled_from([80, 443, 1, 8080, 65535, 99999]).map(":{}".format)),
    st.lists(FAST_CHAR, max_size=15).map("".join),
    st.one_of(st.just(""), st.lists(FAST_CHAR | st.just("?"), max_size=10).map("".join)),
)
def test_fast_path_agrees_with_full_normalization(
    scheme: str, host: str, port: str, path: str, query: str
) -> None:
    url = f"{scheme}://{host}{port}/{path}" + (f"?{query}" if query else "")
    fast = urls._normalize_fast(url)
    if fast is not None:
        assert fast == urls._normalize_full(url) == url


@given(
    st.lists(st.sampled_from("abXY09-._~!$&()*+,;=:@/%"), max_size=20).map("".join),
    st.lists(st.sampled_from("abXY09-._~!$&()*+,;=:@/%?"), min_size=1, max_size=20).map("".join),
)
def test_w3lib_leaves_the_skipped_characters_alone(path: str, query: str) -> None:
    # _normalize_full skips safe_url_string when the path and query match _W3LIB_SAFE_RE.
    for rest in (f"/{path}", f"/{path}?{query}"):
        assert urls._W3LIB_SAFE_RE.fullmatch(rest)
        assert safe_url_string(f"http://example.com{rest}") == f"http://example.com{rest}"


@given(messy_urls())
def test_reverse_url_key_is_a_fixed_point(url: str) -> None:
    # Whatever reverse_url drops, it drops once: the key of the unreversed key is the key.
    try:
        key = reverse_url(url)
    except InvalidURL:
        assume(False)
        raise
    assert reverse_url(unreverse_url(key)) == key


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z0-9]{1,3}", fullmatch=True),  # domain label
            st.sampled_from(["com", "org", "co.uk"]),  # public suffix
            st.sampled_from(["", "www.", "a.", "a.b.", "0.", "z-9."]),  # subdomain
            st.sampled_from(["http", "https"]),
            st.sampled_from(["", ":8080"]),
            st.sampled_from(["/", "/x", "/x/y?q=1", "/%C3%A9"]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_keys_group_hosts_then_domains(
    rows: list[tuple[str, str, str, str, str, str]],
) -> None:
    entries = []
    for label, suffix, sub, scheme, port, path in rows:
        domain = f"{label}.{suffix}"
        host = f"{sub}{domain}"
        entries.append((reverse_url(f"{scheme}://{host}{port}{path}"), host, domain))
    entries.sort()
    keys = [key for key, _, _ in entries]

    for key, host, _ in entries:
        assert key.startswith(reverse_host(host) + ":")
        assert reversed_host(key) == reverse_host(host)
    # Every host is one contiguous run.
    hosts_in_order = [host for host, _ in groupby(host for _, host, _ in entries)]
    assert len(hosts_in_order) == len(set(hosts_in_order))

    # Every domain is one contiguous run, except that a domain whose reversed form continues
    # this one's with a digit (example.com / example1.com) sorts between the domain's own key
    # and its subdomains' keys.
    for domain in {domain for _, _, domain in entries}:
        positions = [i for i, (_, _, d) in enumerate(entries) if d == domain]
        rev = reverse_host(domain)
        for i in range(positions[0], positions[-1] + 1):
            other = entries[i][2]
            if other != domain:
                follows = reverse_host(other)[len(rev) : len(rev) + 1]
                assert reverse_host(other).startswith(rev) and follows.isdigit(), keys


def test_key_order_caveat_of_nutch_format() -> None:
    keys = sorted(
        reverse_url(u)
        for u in ("http://example.com/", "http://www.example.com/", "http://example1.com/")
    )
    assert keys == ["com.example.www:http/", "com.example1:http/", "com.example:http/"]


# --- hosts and domains --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host", "domain"),
    [
        ("http://www.example.com/", "www.example.com", "example.com"),
        ("http://user@WWW.Example.COM:8080/x", "www.example.com", "example.com"),
        ("http://news.bbc.co.uk/", "news.bbc.co.uk", "bbc.co.uk"),
        ("http://a.b.c.example.org/", "a.b.c.example.org", "example.org"),
        ("https://someone.github.io/", "someone.github.io", "github.io"),
        ("http://xn--bcher-kva.de/", "xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("http://www.xn--e1afmkfd.xn--p1ai/", "www.xn--e1afmkfd.xn--p1ai", "xn--e1afmkfd.xn--p1ai"),
        ("http://192.168.0.1:8080/", "192.168.0.1", "192.168.0.1"),
        ("http://localhost:6800/", "localhost", "localhost"),
        ("http://intranet.corp/", "intranet.corp", "intranet.corp"),
        ("http://co.uk/", "co.uk", "co.uk"),
        ("file:///etc/hosts", "", ""),
    ],
)
def test_host_and_domain(url: str, host: str, domain: str) -> None:
    assert host_of(url) == host
    assert domain_of(url) == domain
    assert host_key(url, "host") == host
    assert host_key(url, "domain") == domain


@pytest.mark.parametrize("mode", ["ip", "byHost", "HOST", ""])
def test_host_key_rejects_other_modes(mode: str) -> None:
    with pytest.raises(ValueError, match="valid modes are 'host' and 'domain'"):
        host_key("http://example.com/", mode)
    assert HOST_KEY_MODES == ("host", "domain")


def test_host_of_rejects_what_reverse_url_rejects() -> None:
    with pytest.raises(InvalidURL, match="no host"):
        host_of("http:///x")


def test_domain_lookup_uses_only_the_bundled_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("domain_of tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path))
    monkeypatch.setenv("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "http://192.0.2.1/list.dat")
    urls._suffix_extractor.cache_clear()
    urls._domain_of_host.cache_clear()
    try:
        assert domain_of("http://forums.bbc.co.uk/") == "bbc.co.uk"
    finally:
        urls._suffix_extractor.cache_clear()
        urls._domain_of_host.cache_clear()
    assert list(tmp_path.iterdir()) == []


def test_core_modules_import_without_frameworks() -> None:
    code = (
        "import sys\n"
        "for name in ('scrapy', 'twisted', 'happybase', 'redis', 'scrapy_redis'):\n"
        "    sys.modules[name] = None\n"
        "import nutchy.core.urls, nutchy.core.urlfilter\n"
        "assert 'tldextract' not in sys.modules, 'tldextract is imported lazily'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# --- numeric hosts (the URL Standard's IPv4 parser) ---------------------------------------------


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("http://2130706434/", "http://127.0.0.2/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://0177.0.0.2/", "http://127.0.0.2/"),
        ("http://0X7F000001:80/a", "http://127.0.0.1/a"),
        ("http://127.0.0.1./", "http://127.0.0.1/"),
        ("http://169.254.43518/", "http://169.254.169.254/"),
        ("http://0xa.0/", "http://10.0.0.0/"),
        ("http://010.0.0.1/", "http://8.0.0.1/"),  # octal, as browsers read it
        ("http://192.168.257/", "http://192.168.1.1/"),
        ("http://1.0x10.3/", "http://1.16.0.3/"),
        ("http://0x/", "http://0.0.0.0/"),
        ("http://4294967295:8080/", "http://255.255.255.255:8080/"),
        ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
        # Not numeric: a label that is not a number ends them.
        ("http://1a/", "http://1a/"),
        ("http://0xg/", "http://0xg/"),
        ("http://1.1.1.1e/", "http://1.1.1.1e/"),
    ],
)
def test_numeric_hosts_are_one_dotted_quad(url: str, normalized: str) -> None:
    assert normalize_url(url) == normalized
    assert normalize_url(normalized) == normalized


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://1.2.3.4.5/", "not an IPv4 address"),
        ("http://1.2.3.09/", "not an IPv4 address"),  # 09 is no octal number
        ("http://foo.0x/", "not an IPv4 address"),
        ("http://example.99/", "not an IPv4 address"),
        ("http://256.1.1.1/", "out of range"),
        ("http://1.2.65536/", "out of range"),
        ("http://4294967296/", "out of range"),
    ],
)
def test_hosts_ending_in_a_number_must_be_ipv4(url: str, reason: str) -> None:
    with pytest.raises(InvalidURL, match=reason):
        normalize_url(url)


@st.composite
def ipv4_spellings(draw: st.DrawFn) -> tuple[int, str]:
    """An address and one of the ways a URL may write it: one to four parts, each decimal,
    octal (leading 0) or hex (0x), the last part holding the remaining bytes."""
    address = draw(st.integers(0, 2**32 - 1))
    count = draw(st.integers(1, 4))
    octets = address.to_bytes(4, "big")
    numbers = [*octets[: count - 1], int.from_bytes(octets[count - 1 :], "big")]
    parts = []
    for n in numbers:
        form = draw(st.sampled_from(["{}", "0{:o}", "0x{:x}", "0X{:X}"]))
        parts.append(form.format(n))
    return address, ".".join(parts) + draw(st.sampled_from(["", "."]))


@given(ipv4_spellings())
def test_every_spelling_of_an_address_is_its_dotted_quad(spelled: tuple[int, str]) -> None:
    address, host = spelled
    assert normalize_url(f"http://{host}/p") == f"http://{ipaddress.IPv4Address(address)}/p"
