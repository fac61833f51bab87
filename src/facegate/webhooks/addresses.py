"""Where a webhook may be sent: the URL's host resolved once, every address it resolves to
checked, and the connection then made to the checked address (no second lookup a DNS
rebinding could answer differently).

Refused: every address that is not globally reachable — loopback, private, link-local (cloud
metadata among them), multicast, reserved, unspecified, shared (CGN), documentation,
benchmarking, the deprecated site-local ``fec0::/10`` and IPv4-compatible ``::/96``, the IETF
protocol blocks (Teredo among them), local-use NAT64 — IPv4 and IPv6 alike (the IANA
special-purpose registries, beside Python's ``is_global``, which misses some), an IPv4
address hidden in an IPv6 one (mapped, NAT64, 6to4) judged as that IPv4 address — unless the
operator's allow-list (``FACEGATE_WEBHOOK_ALLOWED_NETWORKS``, facegate.networks) admits the
address *and the port*.

What a refusal tells the tenant (the delivery log) never says what a name resolved to: a
tenant could otherwise map the installation's internal DNS. The operator's log line does.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from facegate.networks import AllowedNetwork, IPAddress, IPNetwork, parse_allowed

__all__ = ["AllowedNetwork", "IPAddress", "IPNetwork"]

Resolver = Callable[[str, int], list[IPAddress]]

SCHEMES = {"http": 80, "https": 443}
# Instance metadata services: link-local or private anyway, named for a clearer refusal.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# What a tenant reads when a name is refused, whatever the reason: "does not resolve" and
# "resolves to 10.0.0.7" must read the same, or the delivery log answers DNS questions.
NAME_REFUSED = "the host does not resolve to an allowed public address"

# Not globally reachable (IANA IPv4/IPv6 special-purpose address registries, RFC 6890 and
# later), named for the refusal. Checked before Python's flags, which in 3.11 still call
# fec0::/10, 3fff::/20 and 192.88.99.0/24 global.
_SPECIAL: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(cidr), kind)
    for cidr, kind in (
        ("0.0.0.0/8", "a this-network"),
        ("100.64.0.0/10", "a shared (carrier-grade NAT)"),
        ("192.0.0.0/24", "an IETF protocol-assignment"),
        ("192.0.2.0/24", "a documentation"),
        ("192.88.99.0/24", "a deprecated 6to4 relay"),
        ("198.18.0.0/15", "a benchmarking"),
        ("198.51.100.0/24", "a documentation"),
        ("203.0.113.0/24", "a documentation"),
        ("240.0.0.0/4", "a reserved"),
        ("::/96", "a deprecated IPv4-compatible"),
        ("::ffff:0:0:0/96", "an IPv4-translated"),
        ("64:ff9b:1::/48", "a local-use NAT64"),
        ("100::/64", "a discard-only"),
        ("2001::/32", "a Teredo"),
        ("2001::/23", "an IETF protocol-assignment"),
        ("2001:db8::/32", "a documentation"),
        ("3fff::/20", "a documentation"),
        ("5f00::/16", "a segment-routing"),
        ("fc00::/7", "a private"),
        ("fec0::/10", "a deprecated site-local"),
    )
)


class AddressRefused(Exception):
    """The URL may not be called. ``reason`` says why in a few words, for the operator's
    log; ``public`` is what the tenant's delivery log says (no resolved address in it)."""

    def __init__(self, reason: str, public: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.public = public if public is not None else reason


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


def parse_networks(values: Sequence[str]) -> tuple[AllowedNetwork, ...]:
    """The operator's allow-list (facegate.networks: CIDR, optionally :ports)."""
    return parse_allowed(values)


def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (a literal address resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressRefused(f"{host} does not resolve ({exc})", NAME_REFUSED) from None
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


def refusal(
    address: IPAddress, allowed: Sequence[AllowedNetwork] = (), *, port: int | None = None
) -> str | None:
    """Why ``address`` may not be called (None: it may). An allow-list entry admits it only
    with ``port`` among the entry's ports (no port given: the allow-list does not apply)."""
    if port is not None and any(entry.admits(address, port) for entry in allowed):
        return None
    inner = embedded_ipv4(address)
    if inner is not None:
        if port is not None and any(entry.admits(inner, port) for entry in allowed):
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
    ):
        if flag:
            return f"{address} is a {kind} address"
    for network, kind in _SPECIAL:
        if address.version == network.version and address in network:
            return f"{address} is {kind} address"
    for kind, flag in (("reserved", address.is_reserved), ("private", address.is_private)):
        if flag:
            return f"{address} is a {kind} address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def allow_listed_port_refusal(
    address: IPAddress, port: int, allowed: Sequence[AllowedNetwork]
) -> str | None:
    """Said instead of the address's own refusal when an allow-list entry holds the address
    but not the port (the operator's log: which entry to widen)."""
    inner = embedded_ipv4(address) or address
    if any(inner in entry.network or address in entry.network for entry in allowed):
        return f"port {port} is not open on the allow-listed network of {address}"
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


def literal_refusal(url: str, allowed: Sequence[AllowedNetwork] = ()) -> str | None:
    """Why a URL is refused without resolving anything: its form, or its host being an
    address that is refused (a name is judged when it is resolved, at each delivery)."""
    try:
        _, host, port, _ = check_url(url)
    except AddressRefused as exc:
        return exc.reason
    address = _literal(host)
    if address is None:
        return None
    why = refusal(address, allowed, port=port)
    if why is not None:
        return allow_listed_port_refusal(address, port, allowed) or why
    return None


def destination(
    url: str, allowed: Sequence[AllowedNetwork] = (), resolver: Resolver | None = None
) -> Destination:
    """Resolve and check ``url``'s host: every address it resolves to must be allowed
    (one refused answer refuses the URL), and the first is the one connected to.

    The refusal's ``reason`` names the address (the operator's log); its ``public`` text
    names it only when the URL itself is that address, else it is :data:`NAME_REFUSED`."""
    scheme, host, port, target = check_url(url)
    literal = _literal(host)
    try:
        addresses = (resolver or resolve_host)(host, port)
    except AddressRefused as exc:
        raise AddressRefused(exc.reason, exc.public if literal else NAME_REFUSED) from None
    if not addresses:
        raise AddressRefused(f"{host} resolves to no address", NAME_REFUSED)
    for address in addresses:
        why = refusal(address, allowed, port=port)
        if why is not None:
            why = allow_listed_port_refusal(address, port, allowed) or why
            if address == literal:
                raise AddressRefused(why)
            raise AddressRefused(f"{host}: {why}", NAME_REFUSED)
    return Destination(scheme, host, port, addresses[0], target)


def recorded_url(url: str) -> str:
    """The URL as the audit trail keeps it: scheme, host, port and path, without the query,
    the fragment or credentials (receivers put tokens there)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
