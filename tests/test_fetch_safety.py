"""The address guard (NUTCH_ADDRESS_GUARD_ENABLED) in real ``scrapy crawl nutch`` runs.

Names answer through nutchy.testing.network's resolver (``meta.test`` → 169.254.169.254,
``private.test`` → 10.0.0.1, ...), which also logs every connection the crawl opens and sends
any connection off loopback to a closed loopback port: no packet leaves 127.0.0.0/8, and the
log shows whether the crawl tried. The loopback servers record every request they receive.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.settings import Settings
from sites import FetchProject, Site, prepare_batch
from twisted.internet.address import IPv4Address, IPv6Address

from nutchy._checks import check_settings
from nutchy.core.addresses import AddressPolicy
from nutchy.core.status import CrawlStatus, ProtocolStatusCode
from nutchy.core.urls import normalize_url
from nutchy.exceptions import ConfigError
from nutchy.resolver import (
    AddressGuard,
    AddressRefused,
    GuardedResolver,
    Refusal,
    check_address_guard,
)

H2, H3, H4 = "127.0.0.2", "127.0.0.3", "127.0.0.4"

#: What the test names answer, lookup after lookup.
HOSTS = {
    "meta.test": ["169.254.169.254"],
    "private.test": ["10.0.0.1"],
    "v6.test": ["::1"],
    "mapped.test": ["::ffff:10.0.0.1"],
    "loop.test": [H4],
    "mixed.test": [f"10.0.0.2,{H2}"],
    # Rebinding: a refused address first (robots.txt), then an allowed one (the page).
    "rebind.test": [H4, H2],
    "allowed.test": [H3],
}


@pytest.fixture(scope="module")
def site():
    with Site((H2, H3, H4)) as site:
        yield site


def _crawl(tmp_path: Path, site: Site, embedded_store_factory, guard: bool):
    p2, p3, p4 = (site.ports[h] for h in (H2, H3, H4))
    urls = {
        "ok": f"http://{H2}:{p2}/page/ok",
        "redirect": f"http://{H2}:{p2}/redirect/302?to=http://{H3}:{p3}/page/target",
        "literal": f"http://{H3}:{p3}/page/literal",
        "numeric": f"http://2130706436:{p4}/page/numeric",  # 127.0.0.4
        "meta": f"http://meta.test:{p2}/latest/meta-data/",
        "private": f"http://private.test:{p2}/page/private",
        "v6": f"http://v6.test:{p2}/page/v6",
        "mapped": f"http://mapped.test:{p2}/page/mapped",
        "loop": f"http://loop.test:{p4}/page/loop",
        "mixed": f"http://mixed.test:{p2}/page/mixed",
        "rebind": f"http://rebind.test:{p2}/page/rebind",
        "allowed": f"http://allowed.test:{p3}/page/allowed",
    }
    store = embedded_store_factory()
    store.create()
    table = prepare_batch(store, list(urls.values()))
    log = tmp_path / "network.log"
    project = FetchProject(
        tmp_path,
        store,
        NUTCH_ADDRESS_GUARD_ENABLED=guard,
        NUTCH_ADDRESS_GUARD_ALLOW=[H2, "allowed.test"],
        NUTCH_HTTP_REDIRECT_MAX=2,
        NUTCH_HTTP_TIMEOUT=2000,
        TWISTED_DNS_RESOLVER="nutchy.testing.network.MappedResolver",
        NUTCH_TESTING_HOSTS=HOSTS,
        NUTCH_TESTING_NETWORK_LOG=str(log),
    )
    site.clear()
    result = project.crawl(timeout=60)
    assert result.returncode == 0, result.log[-3000:]
    assert "Traceback" not in result.log
    rows = {page.url: page for page in table.scan(["status", "protocol_status"])}
    return urls, rows, log.read_text(encoding="utf-8").splitlines(), result


@pytest.mark.slow
def test_the_guard_refuses_before_any_connection(tmp_path, site, embedded_store_factory):
    urls, rows, network, result = _crawl(tmp_path, site, embedded_store_factory, guard=True)
    p3 = site.ports[H3]
    target = normalize_url(f"http://{H3}:{p3}/page/target")

    def outcome(url: str) -> tuple[int, int]:
        page = rows[normalize_url(url)]
        return page.status, page.protocol_status.code

    fetched = (CrawlStatus.FETCHED, ProtocolStatusCode.SUCCESS)
    refused = (CrawlStatus.GONE, ProtocolStatusCode.ACCESS_DENIED)
    expected = dict.fromkeys(urls, refused)
    expected.update(ok=fetched, mixed=fetched, rebind=fetched, allowed=fetched)
    expected["redirect"] = (CrawlStatus.REDIR_TEMP, ProtocolStatusCode.TEMP_MOVED)
    assert {name: outcome(url) for name, url in urls.items()} == expected
    # The redirect was followed within the fetch, and its target refused.
    assert outcome(target) == refused
    args = {
        name: rows[normalize_url(url)].protocol_status.args[0]
        for name, url in urls.items()
        if expected[name] == refused
    }
    assert args["meta"] == "address refused: meta.test is 169.254.169.254, link-local"
    assert args["private"] == "address refused: private.test is 10.0.0.1, private"
    assert args["v6"] == "address refused: v6.test is ::1, loopback"
    assert args["mapped"] == "address refused: mapped.test is ::ffff:10.0.0.1, private"
    assert args["literal"] == f"address refused: {H3} is loopback"
    assert args["numeric"] == f"address refused: {H4} is loopback"
    assert rows[target].protocol_status.args[0] == f"address refused: {H3} is loopback"

    # Nothing but the allowed addresses was connected to: not even by robots.txt requests, the
    # redirect, the rebinding name's first answer or the refused address of mixed.test.
    connected = {line.split()[1] for line in network if line.startswith("connect ")}
    assert connected == {H2, H3}
    # The servers agree: 127.0.0.4 saw nothing; 127.0.0.3 only what allowed.test asked for.
    assert site.paths(H4) == []
    assert sorted(site.paths(H3)) == ["/page/allowed", "/robots.txt"]
    assert "/page/rebind" in site.paths(H2) and "/page/mixed" in site.paths(H2)
    assert [line for line in network if line.startswith("lookup rebind.test")] == [
        f"lookup rebind.test {H4}",
        f"lookup rebind.test {H2}",
    ]
    assert result.stats["nutch/fetch/address_refused"] == 8
    assert result.stats["nutch/fetch/address_refused/loopback"] == 5


@pytest.mark.slow
def test_without_the_guard_the_same_crawl_connects_anywhere(tmp_path, site, embedded_store_factory):
    # The control: with the guard off, the crawl tries 10.0.0.1, 169.254.169.254 and the rest
    # (the test resolver sends those connections to a closed loopback port) and fetches what
    # 127.0.0.3 and 127.0.0.4 serve.
    urls, rows, network, _ = _crawl(tmp_path, site, embedded_store_factory, guard=False)
    connected = {line.split()[1] for line in network if line.startswith("connect ")}
    assert {"10.0.0.1", "169.254.169.254", "::1", H3, H4} <= connected
    assert "/page/loop" in site.paths(H4) and "/page/literal" in site.paths(H3)
    assert rows[normalize_url(urls["loop"])].status == CrawlStatus.FETCHED


# --- the pieces, without a crawl -----------------------------------------------------------------


class _Receiver:
    def __init__(self) -> None:
        self.addresses: list[str] = []
        self.complete = False

    def resolutionBegan(self, resolution) -> None:
        pass

    def addressResolved(self, address) -> None:
        self.addresses.append(address.host)

    def resolutionComplete(self) -> None:
        self.complete = True


class _Upstream:
    """A name resolver answering from a dict."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers

    def resolveHostName(self, receiver, name, port=0, types=None, semantics="TCP"):
        receiver.resolutionBegan(None)
        for address in self.answers.get(name.lower(), []):
            kind = IPv6Address if ":" in address else IPv4Address
            receiver.addressResolved(kind("TCP", address, port))
        receiver.resolutionComplete()


class _Reactor:
    def __init__(self, resolver) -> None:
        self.nameResolver = resolver

    def installNameResolver(self, resolver) -> None:
        self.nameResolver = resolver


def test_the_resolver_hands_on_only_allowed_addresses() -> None:
    guard = AddressGuard(AddressPolicy(["127.0.0.2"]))
    upstream = _Upstream(
        {"a.test": ["10.0.0.1", "93.184.215.14", "::1"], "b.test": ["10.0.0.1", "127.0.0.3"]}
    )
    resolver = GuardedResolver(upstream, guard)
    receiver = _Receiver()
    resolver.resolveHostName(receiver, "a.test", 80)
    assert receiver.addresses == ["93.184.215.14"] and receiver.complete
    assert guard.refusal_of("http://a.test/") is None  # one address was allowed
    receiver = _Receiver()
    resolver.resolveHostName(receiver, "B.test", 80)
    assert receiver.addresses == [] and receiver.complete
    assert guard.refusal_of("http://b.test:8080/x") == Refusal("b.test", "10.0.0.1", "private")
    # The next lookup answers an allowed address: the host is no longer refused.
    upstream.answers["b.test"] = ["127.0.0.2"]
    resolver.resolveHostName(_Receiver(), "b.test", 80)
    assert guard.refusal_of("http://b.test/") is None


def test_refused_hosts_are_remembered_within_bounds() -> None:
    guard = AddressGuard(AddressPolicy(), memory=2)
    resolver = GuardedResolver(_Upstream({f"h{i}.test": ["10.0.0.1"] for i in range(3)}), guard)
    for i in range(3):
        resolver.resolveHostName(_Receiver(), f"h{i}.test")
    assert [guard.refusal_of(f"http://h{i}.test/") is None for i in range(3)] == [
        True,
        False,
        False,
    ]


def test_install_wraps_whatever_resolver_the_reactor_has_once() -> None:
    guard = AddressGuard(AddressPolicy())
    first = _Upstream({})
    reactor = _Reactor(first)
    guard.install(reactor)
    installed = reactor.nameResolver
    assert isinstance(installed, GuardedResolver) and installed.upstream is first
    guard.install(reactor)
    assert reactor.nameResolver is installed
    # Another component installs its own resolver later: the guard wraps it on its next request.
    second = _Upstream({})
    reactor.installNameResolver(second)
    guard.install(reactor)
    assert isinstance(reactor.nameResolver, GuardedResolver)
    assert reactor.nameResolver.upstream is second
    # A second guard (another crawler of the process) stacks on the first: both policies hold.
    other = AddressGuard(AddressPolicy())
    other.install(reactor)
    other.install(reactor)
    assert reactor.nameResolver.guard is other
    assert reactor.nameResolver.upstream.guard is guard


def test_ip_hosts_are_refused_without_a_lookup() -> None:
    guard = AddressGuard(AddressPolicy(["127.0.0.2"]))
    with pytest.raises(AddressRefused, match=r"127\.0\.0\.3 is loopback") as refused:
        guard.check_url("http://127.0.0.3:8080/x")
    assert refused.value.refusal == Refusal("127.0.0.3", "127.0.0.3", "loopback")
    guard.check_url("http://127.0.0.2:8080/x")
    guard.check_url("http://example.com/")  # a name: the resolver decides
    guard.check_url("http://[::1/")  # not a URL Scrapy could fetch: not the guard's business


def test_settings_the_guard_cannot_work_with_are_refused() -> None:
    assert AddressGuard.from_settings(Settings({"NUTCH_ADDRESS_GUARD_ENABLED": False})) is None
    on = {"NUTCH_ADDRESS_GUARD_ENABLED": True}
    guard = AddressGuard.from_settings(
        Settings({**on, "NUTCH_ADDRESS_GUARD_ALLOW": "10.0.0.0/8, a.test"})
    )
    assert guard is not None and guard.policy.refusal("10.1.1.1") is None
    check_address_guard(_settings(on))
    check_address_guard(_settings({}))  # off: nothing to check
    bad = _settings({**on, "NUTCH_ADDRESS_GUARD_ALLOW": ["http://x/"]})
    with pytest.raises(ConfigError, match="NUTCH_ADDRESS_GUARD_ALLOW: 'http://x/'"):
        check_address_guard(bad)
    # Among the settings nutchy crawl and nutchy generate check before they write anything.
    with pytest.raises(ConfigError, match="NUTCH_ADDRESS_GUARD_ALLOW: 'http://x/'"):
        check_settings(bad)
    other = "scrapy.core.downloader.handlers.datauri.DataURIDownloadHandler"
    with pytest.raises(ConfigError, match=r"HTTP/1\.1 download handler only.*for https"):
        check_address_guard(_settings({**on, "DOWNLOAD_HANDLERS": {"https": other}}))
    # HTTP/2's handler (h2 is not even installed here) is refused as well.
    h2 = "scrapy.core.downloader.handlers.http2.H2DownloadHandler"
    with pytest.raises(ConfigError, match=r"HTTP/1\.1 download handler only.*for http\b"):
        check_address_guard(_settings({**on, "DOWNLOAD_HANDLERS": {"http": h2}}))
    with pytest.raises(ConfigError, match="needs the Twisted reactor"):
        check_address_guard(_settings({**on, "TWISTED_REACTOR_ENABLED": False}))
    # A scheme turned off is no hole.
    check_address_guard(_settings({**on, "DOWNLOAD_HANDLERS": {"https": None}}))


def _settings(values: dict[str, object]) -> Settings:
    settings = Settings()
    settings.setmodule("nutchy.default_settings", priority="default")
    settings.update(values, priority="project")
    return settings


@pytest.mark.slow
def test_a_crawl_with_an_unusable_guard_does_not_start(tmp_path, embedded_store_factory) -> None:
    store = embedded_store_factory()
    store.create()
    prepare_batch(store, ["http://127.0.0.2:9/page/x"])
    project = FetchProject(
        tmp_path,
        store,
        NUTCH_ADDRESS_GUARD_ENABLED=True,
        NUTCH_ADDRESS_GUARD_ALLOW=["http://x/"],
    )
    result = project.crawl(timeout=60)
    assert result.returncode == 1, result.log[-2000:]
    assert "NUTCH_ADDRESS_GUARD_ALLOW: 'http://x/' is neither" in result.log
    assert "Traceback" not in result.log
