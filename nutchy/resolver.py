"""The address guard of the fetch: no connection to an address that is not public.

With ``NUTCH_ADDRESS_GUARD_ENABLED``, every connection the crawl makes is checked against
:class:`~nutchy.core.addresses.AddressPolicy` (public addresses, and what
``NUTCH_ADDRESS_GUARD_ALLOW`` lets through) *on the address it connects to*:

- :class:`GuardedResolver` wraps the reactor's name resolver (whatever ``TWISTED_DNS_RESOLVER``
  installed, with Scrapy's DNS cache) and hands on only the allowed addresses of each answer.
  Scrapy's HTTP/1.1 download handler connects through Twisted's ``HostnameEndpoint``, which asks
  the reactor's name resolver for every connection it opens, a host written as an IP address
  included: pages, robots.txt, every redirect hop, whatever component sent the request. A name
  that answers a public address to one lookup and a private one to the next (DNS rebinding) is
  refused at the lookup that would connect there, since the address checked is the address
  connected to; there is no earlier check whose answer could go stale.
- :class:`AddressGuard` installs that resolver (from the fetch middleware, before the first
  request goes out, and again should something install another resolver later), refuses a URL
  whose host is an IP address before anything is sent (so also through a proxy), and remembers
  which hosts the resolver refused, so that the fetch records ACCESS_DENIED for them
  (:exc:`AddressRefused`) and not a DNS failure.

Scrapy's other HTTP handlers (HTTP/2, and those not built on Twisted) resolve names their own
way, so :func:`check_address_guard` refuses to start a crawl that uses one for http or https with
the guard on. Through an HTTP proxy the proxy resolves the names: only IP-address hosts are
checked then (docs/fetch.md, "Safety").
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.misc import load_object
from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from zope.interface import implementer, provider  # type: ignore[import-untyped]

from nutchy._imports import import_download_handler
from nutchy.core.addresses import AddressPolicy
from nutchy.exceptions import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.settings import BaseSettings
    from twisted.internet.interfaces import IAddress, IHostResolution

__all__ = [
    "AddressGuard",
    "AddressRefused",
    "GuardedResolver",
    "Refusal",
    "check_address_guard",
]

logger = logging.getLogger(__name__)

#: The download handler the guard covers: its connections resolve through the reactor.
_HTTP11 = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"


class Refusal(NamedTuple):
    """A host the guard refused: the *address* it would have connected to, and why."""

    host: str
    address: str
    reason: str

    def __str__(self) -> str:
        if self.address == self.host:
            return f"{self.address} is {self.reason}"
        return f"{self.host} is {self.address}, {self.reason}"


class AddressRefused(IgnoreRequest):
    """A request the address guard refused (*refusal*): nothing was sent.

    Raised from :meth:`AddressGuard.check_url` for a host written as an IP address;
    :class:`~nutchy.middlewares.NutchFetchMiddleware` records it as ACCESS_DENIED (crawl status
    GONE), as it records a robots.txt denial.
    """

    def __init__(self, url: str, refusal: Refusal) -> None:
        super().__init__(f"{url}: address refused, {refusal}")
        self.url = url
        self.refusal = refusal


class AddressGuard:
    """The guard of one crawl: its *policy*, the resolver it installs, and the hosts that
    resolver refused lately (at most *memory* of them, the latest kept)."""

    def __init__(self, policy: AddressPolicy, *, memory: int = 4096) -> None:
        self.policy = policy
        self.memory = memory
        self._refused: OrderedDict[str, Refusal] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AddressGuard | None:
        """The guard *settings* ask for, or ``None`` when ``NUTCH_ADDRESS_GUARD_ENABLED`` is
        off; :exc:`~nutchy.exceptions.ConfigError` for an allow list entry that is neither an
        address, a network nor a host name."""
        if not settings.getbool("NUTCH_ADDRESS_GUARD_ENABLED"):
            return None
        try:
            policy = AddressPolicy(settings.getlist("NUTCH_ADDRESS_GUARD_ALLOW"))
        except ValueError as exc:
            raise ConfigError(f"NUTCH_ADDRESS_GUARD_ALLOW: {exc}") from exc
        return cls(policy)

    # --- the resolver --------------------------------------------------------------------------

    def install(self, reactor: Any) -> None:
        """Make sure the name resolver of *reactor* is guarded by this guard: wrap the one it
        has unless this guard's :class:`GuardedResolver` is in its chain already."""
        resolver = reactor.nameResolver
        while isinstance(resolver, GuardedResolver):
            if resolver.guard is self:
                return
            resolver = resolver.upstream
        reactor.installNameResolver(GuardedResolver(reactor.nameResolver, self))

    def resolved(self, host: str, refused: list[Refusal], allowed: int) -> None:
        """What one lookup of *host* gave: the *refused* addresses and the number *allowed*.
        A host none of whose addresses is allowed is remembered as refused."""
        if refused and not allowed:
            self._refused[host] = refused[0]
            self._refused.move_to_end(host)
            while len(self._refused) > self.memory:
                self._refused.popitem(last=False)
        else:
            self._refused.pop(host, None)
        for refusal in refused:
            logger.debug("Address refused: %(refusal)s", {"refusal": refusal})

    # --- the fetch's questions -----------------------------------------------------------------

    def check_url(self, url: str) -> None:
        """Raise :exc:`AddressRefused` for *url* when its host is an IP address the policy
        refuses: known without any lookup, and refused before anything is sent."""
        host = _host(url)
        if host is None or not (host[-1].isdigit() or ":" in host):
            return  # a name (an IPv4 address ends in a digit, an IPv6 one has colons)
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return  # a name: the resolver checks its addresses
        reason = self.policy.refusal(host, host)
        if reason is not None:
            raise AddressRefused(url, Refusal(host, host, reason))

    def refusal_of(self, url: str) -> Refusal | None:
        """The refusal of *url*'s host by the resolver, if its last lookup was refused: what
        a failed name lookup of that host really was."""
        host = _host(url)
        return None if host is None else self._refused.get(host)


def _host(url: str) -> str | None:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host or None


@implementer(IHostnameResolver)
class GuardedResolver:
    """A name resolver that answers what *upstream* answers, less the addresses *guard*'s
    policy refuses (see the module docstring)."""

    def __init__(self, upstream: IHostnameResolver, guard: AddressGuard) -> None:
        # Any: zope interfaces declare their methods without self, which mypy misreads.
        self.upstream: Any = upstream
        self.guard = guard

    def resolveHostName(
        self,
        resolutionReceiver: IResolutionReceiver,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> IHostResolution:
        receiver = _GuardedReceiver(resolutionReceiver, hostName.lower(), self.guard)
        result: IHostResolution = self.upstream.resolveHostName(
            receiver, hostName, portNumber, addressTypes, transportSemantics
        )
        return result


@provider(IResolutionReceiver)
class _GuardedReceiver:
    """Passes on to *receiver* the addresses *guard* allows for *host*."""

    def __init__(self, receiver: IResolutionReceiver, host: str, guard: AddressGuard) -> None:
        self.receiver: Any = receiver
        self.host = host
        self.guard = guard
        self.refused: list[Refusal] = []
        self.allowed = 0

    def resolutionBegan(self, resolution: IHostResolution) -> None:
        self.receiver.resolutionBegan(resolution)

    def addressResolved(self, address: IAddress) -> None:
        text = str(getattr(address, "host", ""))
        reason = self.guard.policy.refusal(text, self.host)
        if reason is not None:
            self.refused.append(Refusal(self.host, text, reason))
            return
        self.allowed += 1
        self.receiver.addressResolved(address)

    def resolutionComplete(self) -> None:
        self.guard.resolved(self.host, self.refused, self.allowed)
        self.receiver.resolutionComplete()


def check_address_guard(settings: BaseSettings) -> None:
    """Raise :exc:`~nutchy.exceptions.ConfigError` when the guard is on and cannot hold: an
    allow list entry it cannot read, no Twisted reactor, or a download handler for http or
    https other than Scrapy's HTTP/1.1 one (the others do not resolve through the reactor)."""
    if AddressGuard.from_settings(settings) is None:
        return
    if not settings.getbool("TWISTED_REACTOR_ENABLED", True):
        raise ConfigError(
            "NUTCH_ADDRESS_GUARD_ENABLED needs the Twisted reactor (TWISTED_REACTOR_ENABLED):"
            " it guards the reactor's name resolver"
        )
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    import_download_handler()  # Scrapy's import of it costs more (nutchy._imports)
    expected = load_object(_HTTP11)
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        if path is None:
            continue  # the scheme is not fetched at all
        try:
            handler = load_object(path) if isinstance(path, str) else path
        except (ImportError, AttributeError, NameError, ValueError):
            handler = None  # it cannot be HTTP/1.1's (and the crawl would fail on it)
        if not (isinstance(handler, type) and issubclass(handler, expected)):
            raise ConfigError(
                f"NUTCH_ADDRESS_GUARD_ENABLED covers Scrapy's HTTP/1.1 download handler only,"
                f" whose connections resolve names through the reactor; DOWNLOAD_HANDLERS uses"
                f" {path!r} for {scheme}"
            )
