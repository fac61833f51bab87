"""Where a webhook may be sent: the URL's host resolved once, every address it resolves to
checked, and the connection then made to the checked address (no second lookup a DNS
rebinding could answer differently).

Refused: loopback, private, link-local (cloud metadata among them), multicast, reserved,
unspecified and any other non-global address, IPv4 and IPv6 alike, an IPv4 address hidden
in an IPv6 one (mapped, NAT64, 6to4) judged as that IPv4 address — unless the operator's
allow-list (``FACEGATE_WEBHOOK_ALLOWED_NETWORKS``) contains it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[IPAddress]]

SCHEMES = {"http": 80, "https": 443}
# Instance metadata services: link-local or private anyway, named for a clearer refusal.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """The URL may not be called; ``reason`` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Destination:
    """A URL whose host was resolved and checked: connect to ``address``, present ``host``
    (Host header, TLS server name)."""

    scheme: str
    host: str
    port: int
    address: IPAddress
    target: str  # path and query

    @property
    def connect_url(self) -> str:
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{self.scheme}://{literal}:{self.port}{self.target}"

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"


def parse_networks(values: Sequence[str]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)


def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (a literal address resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressRefused(f"the host does not resolve ({exc})") from None
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (IPv4-mapped, NAT64, 6to4), if any."""
    if address.version == 4:
        return None
    assert isinstance(address, ipaddress.IPv6Address)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def refusal(address: IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why ``address`` may not be called (None: it may)."""
    if any(address in network for network in allowed):
        return None
    inner = embedded_ipv4(address)
    if inner is not None:
        if any(inner in network for network in allowed):
            return None
        why = refusal(inner)
        return f"{why} (inside {address})" if why else None
    if address in METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address"
    for kind, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if flag:
            return f"{address} is a {kind} address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def check_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path+query) of a URL a webhook may have; AddressRefused for
    another scheme, credentials in it, no host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressRefused(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise AddressRefused("only http and https URLs are called")
    if parts.username is not None or parts.password is not None:
        raise AddressRefused("credentials in the URL are not allowed")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise AddressRefused("the URL has no host")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port or SCHEMES[scheme], target


def literal_refusal(url: str, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why a URL is refused without resolving anything: its form, or its host being an
    address that is refused (a name is judged when it is resolved, at each delivery)."""
    try:
        _, host, _, _ = check_url(url)
    except AddressRefused as exc:
        return exc.reason
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return refusal(address, allowed)


def destination(
    url: str, allowed: Sequence[IPNetwork] = (), resolver: Resolver | None = None
) -> Destination:
    """Resolve and check ``url``'s host: every address it resolves to must be allowed
    (one refused answer refuses the URL), and the first is the one connected to."""
    scheme, host, port, target = check_url(url)
    addresses = (resolver or resolve_host)(host, port)
    if not addresses:
        raise AddressRefused("the host resolves to no address")
    for address in addresses:
        why = refusal(address, allowed)
        if why is not None:
            raise AddressRefused(why if address == _literal(host) else f"{host}: {why}")
    return Destination(scheme, host, port, addresses[0], target)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
