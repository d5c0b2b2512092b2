"""A resolver for tests: names answer the addresses a test gives, and no packet leaves loopback.

``TWISTED_DNS_RESOLVER = "nutchy.testing.network.MappedResolver"`` makes a crawl's name lookups
answer from the setting ``NUTCH_TESTING_HOSTS``: a dict from a host name to its answers, one per
lookup in turn (the last one repeats), each a comma-separated string of IPv4 or IPv6 addresses
(``{"meta.test": ["169.254.169.254"], "rebind.test": ["127.0.0.4", "127.0.0.2"]}``). A host
written as an IP address answers itself; any other name answers nothing (a DNS failure), so no
lookup ever reaches a DNS server.

It also guards the test itself: every TCP connection the reactor opens is written to the file
``NUTCH_TESTING_NETWORK_LOG`` names (``connect <host> <port>``, and ``lookup <name> <answer>``
for each lookup), and one to an address outside 127.0.0.0/8 and ::1 goes to a closed loopback
port instead, so a crawl that should have refused ``10.0.0.1`` sends nothing there even when it
fails to refuse it; the log tells.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver
from zope.interface import implementer

__all__ = ["MappedResolver"]

#: Where a connection to an address off loopback goes instead: nothing listens on port 1.
_NOWHERE = ("127.0.0.1", 1)


class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:
        pass


@implementer(IHostnameResolver)
class MappedResolver:
    """The reactor's name resolver for a test (see the module docstring)."""

    def __init__(self, reactor: Any, hosts: dict[str, Any], log: str | None) -> None:
        self.reactor = reactor
        self.answers = {
            name.lower(): [answers] if isinstance(answers, str) else list(answers)
            for name, answers in hosts.items()
        }
        self.lookups: dict[str, int] = {}
        self.log = Path(log) if log else None

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> MappedResolver:
        settings = crawler.settings
        return cls(
            reactor,
            settings.getdict("NUTCH_TESTING_HOSTS"),
            settings.get("NUTCH_TESTING_NETWORK_LOG"),
        )

    def install_on_reactor(self) -> None:
        self.reactor.installNameResolver(self)
        connect = self.reactor.connectTCP

        def connect_on_loopback(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            self._write(f"connect {host} {port}")
            if not _on_loopback(host):
                host, port = _NOWHERE
            return connect(host, port, *args, **kwargs)

        self.reactor.connectTCP = connect_on_loopback

    def resolveHostName(
        self,
        resolutionReceiver: Any,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Any = None,
        transportSemantics: str = "TCP",
    ) -> Any:
        name = hostName.lower()
        resolution = _Resolution(name)
        resolutionReceiver.resolutionBegan(resolution)
        answers = self.answers.get(name)
        if answers is not None:
            turn = self.lookups.get(name, 0)
            self.lookups[name] = turn + 1
            answer = answers[min(turn, len(answers) - 1)]
        else:
            answer = name if _is_address(name) else ""
        self._write(f"lookup {name} {answer}")
        for address in filter(None, (a.strip() for a in answer.split(","))):
            kind = IPv6Address if ":" in address else IPv4Address
            resolutionReceiver.addressResolved(kind("TCP", address, portNumber))
        resolutionReceiver.resolutionComplete()
        return resolution

    def _write(self, line: str) -> None:
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as file:
                file.write(line + "\n")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _on_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback
