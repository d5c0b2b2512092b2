"""Which network addresses a crawl of the open web may connect to: the address guard's policy.

A crawler that follows links and redirects from pages anyone can write must not be steered into
the network it runs in (server-side request forgery): a link or a redirect to
``http://169.254.169.254/`` (a cloud's metadata service), ``http://10.0.0.1/admin`` or
``http://127.0.0.1:9999/`` would otherwise be fetched and stored. :class:`AddressPolicy` tells
which addresses are refused: every address that is not public (loopback, private, link-local,
multicast, reserved, unspecified, shared, documentation and the other special-purpose ranges of
IANA's registries), IPv4 addresses written inside IPv6 ones (``::ffff:10.0.0.1``, NAT64
``64:ff9b::a00:1``, 6to4 ``2002:a00:1::``) judged as the IPv4 address they carry, except what an
allow list lets through: networks (``10.1.0.0/16``, ``127.0.0.1``) and host names
(``intranet.example``, or ``.example`` for a domain and every host below it).

>>> policy = AddressPolicy(["10.1.0.0/16", ".corp.example"])
>>> policy.refusal("10.0.0.1"), policy.refusal("10.1.2.3"), policy.refusal("93.184.215.14")
('private', None, None)
>>> policy.refusal("::ffff:169.254.169.254"), policy.refusal("10.9.9.9", "db.corp.example")
('link-local', None)

Nothing here resolves a name: the fetch checks the addresses its resolver answers, each time it
connects (see nutchy/resolver.py and docs/fetch.md, "Safety").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["AddressPolicy", "non_public_reason"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: 100.64.0.0/10, shared address space (carrier-grade NAT, RFC 6598): not public, not "private".
_SHARED: Final = ipaddress.IPv4Network("100.64.0.0/10")
#: The NAT64 well-known prefix (RFC 6052): the last 32 bits are an IPv4 address.
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")

#: Answers an :class:`AddressPolicy` remembers (it forgets them all when it has this many).
_CACHED_ANSWERS: Final = 4096

# A host name of an allow list: labels of letters, digits, '-' and '_', a leading '.' for a domain.
_NAME_RE: Final = re.compile(r"\.?[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, when it stands for one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def non_public_reason(address: IPAddress) -> str | None:
    """Why *address* is not a public address (a short phrase), or ``None`` when it is public.

    >>> [non_public_reason(ipaddress.ip_address(a)) for a in
    ...  ("127.0.0.2", "::1", "0.0.0.0", "224.0.0.1", "100.64.0.1", "192.0.2.1", "8.8.8.8")]
    ['loopback', 'loopback', 'unspecified', 'multicast', 'shared', 'private', None]
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return non_public_reason(embedded)
        if address.is_site_local:
            return "site-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "shared"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "not global"
    return None


class AddressPolicy:
    """The addresses a fetch may connect to: public ones, and those *allow* names.

    Each entry of *allow* is an IP address or network (``127.0.0.1``, ``10.0.0.0/8``,
    ``fd00::/8``: a host's bits may be set, ``10.1.2.3/8`` is ``10.0.0.0/8``), or a host name,
    whose addresses are all allowed: ``intranet.example`` for that host, ``.example`` for the
    domain and every host below it. Names are compared lower-case. An entry that is neither
    raises :exc:`ValueError` naming it.

    >>> AddressPolicy(["localhost", "::1"]).refusal("::1"), AddressPolicy().refusal("::1")
    (None, 'loopback')
    >>> AddressPolicy(["http://x/"])
    Traceback (most recent call last):
    ...
    ValueError: 'http://x/' is neither an IP address or network nor a host name
    """

    def __init__(self, allow: Iterable[str] = ()) -> None:
        networks: list[IPNetwork] = []
        names: set[str] = set()
        domains: list[str] = []
        for raw in allow:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            name = entry.lower().removesuffix(".")
            if _NAME_RE.fullmatch(name) is None:
                raise ValueError(f"{raw!r} is neither an IP address or network nor a host name")
            if name.startswith("."):
                domains.append(name)
                names.add(name[1:])
            else:
                names.add(name)
        self.networks = tuple(networks)
        self.names = frozenset(names)
        self.domains = tuple(domains)
        # (address, host) -> refusal: a crawl connects to few addresses, each many times.
        self._answers: dict[tuple[str, str], str | None] = {}

    def allows_host(self, host: str) -> bool:
        """Whether the allow list names *host*, so that any address of it is allowed."""
        host = host.lower().removesuffix(".")
        return host in self.names or host.endswith(self.domains)

    def refusal(self, address: str, host: str = "") -> str | None:
        """Why the fetch may not connect to *address* (a textual IP address, an IPv6 one with
        or without a ``%zone``) for the host *host*: a short phrase such as ``"private"``;
        ``None`` when it may. A text that is no IP address is refused (``"not an IP address"``).
        """
        key = (address, host)
        try:
            return self._answers[key]
        except KeyError:
            pass
        if len(self._answers) >= _CACHED_ANSWERS:
            self._answers.clear()
        answer = self._answers[key] = self._refusal(address, host)
        return answer

    def _refusal(self, address: str, host: str) -> str | None:
        if host and self.allows_host(host):
            return None
        try:
            ip: IPAddress = ipaddress.ip_address(address)
        except ValueError:
            return "not an IP address"
        reason = non_public_reason(ip)
        if reason is None:
            return None
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.scope_id is not None:
                candidates.append(ipaddress.IPv6Address(address.partition("%")[0]))
            embedded = _embedded_ipv4(ip)
            if embedded is not None:
                candidates.append(embedded)
        for network in self.networks:
            if any(c.version == network.version and c in network for c in candidates):
                return None
        return reason
