"""The address guard's policy (nutchy.core.addresses): which addresses are public, and the
allow list."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.addresses import AddressPolicy, non_public_reason


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%2", "link-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("100.64.0.1", "shared"),
        ("192.0.2.1", "private"),  # documentation
        ("198.18.0.1", "private"),  # benchmarking
        ("240.0.0.1", "private"),  # reserved, "private" to Python's ipaddress
        ("255.255.255.255", "private"),
        ("0.1.2.3", "private"),  # "this network"
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "site-local"),
        ("2001:db8::1", "private"),
        ("::127.0.0.1", "reserved"),  # IPv4-compatible, deprecated
        # IPv4 inside IPv6: judged as the IPv4 address
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 169.254.169.254
        ("2002:a00:1::", "private"),  # 6to4 10.0.0.1
        # public
        ("93.184.215.14", None),
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
    ],
)
def test_what_is_not_public(address: str, reason: str | None) -> None:
    assert AddressPolicy().refusal(address) == reason
    assert non_public_reason(ipaddress.ip_address(address)) == reason


def test_allow_list_of_networks_and_names() -> None:
    policy = AddressPolicy(
        ["127.0.0.2", "10.1.0.0/16", "fd00::/8", " intranet.example. ", ".corp.example", ""]
    )
    assert policy.refusal("127.0.0.2") is None
    assert policy.refusal("127.0.0.3") == "loopback"
    assert policy.refusal("10.1.200.3") is None
    assert policy.refusal("10.2.0.1") == "private"
    assert policy.refusal("::ffff:10.1.0.9") is None  # the IPv4 address inside counts
    assert policy.refusal("fd00::5") is None
    # A name allows every address it answers, whatever the address.
    assert policy.refusal("10.9.9.9", "intranet.example") is None
    assert policy.refusal("10.9.9.9", "INTRANET.example.") is None
    assert policy.refusal("10.9.9.9", "www.intranet.example") == "private"
    assert policy.refusal("10.9.9.9", "corp.example") is None
    assert policy.refusal("10.9.9.9", "a.b.corp.example") is None
    assert policy.refusal("10.9.9.9", "notcorp.example") == "private"
    assert policy.refusal("not an address") == "not an IP address"
    # a network written with its host bits set is the network
    assert AddressPolicy(["10.1.2.3/8"]).refusal("10.200.0.1") is None


@pytest.mark.parametrize("entry", ["http://10.0.0.1/", "10.0.0.0/33", "a b", "*.example", "x/y"])
def test_allow_list_entries_that_are_neither_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="neither an IP address or network nor a host name"):
        AddressPolicy([entry])


@given(st.ip_addresses())
def test_refused_exactly_when_not_a_public_unicast_address(address) -> None:
    # An independent statement of the rule through ipaddress's attributes.
    ip = address
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in ipaddress.IPv6Network("64:ff9b::/96"):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            ip = inner
    public = (
        ip.is_global
        and not ip.is_multicast
        and not ip.is_reserved  # IPv6 space IANA has not allocated, ::/8 among it
        and not getattr(ip, "is_site_local", False)
    )
    assert (AddressPolicy().refusal(str(address)) is None) == public
