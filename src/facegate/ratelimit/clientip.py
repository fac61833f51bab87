"""The client's IP: the socket peer, or ``X-Forwarded-For`` when the peer is a trusted proxy.

A client can write any ``X-Forwarded-For`` it likes, so the header is believed only when
the request came from a configured proxy, and only as far as the chain of trusted proxies
goes: walking the header from the right, the first address that is not a trusted proxy is
the client (everything left of it was written by the client itself).

Limits, bans and in-flight shares key a client by :func:`client_key`: an IPv4 address as it
is, an IPv6 address by its network (a /64 by default). One subscriber, one ISP customer or
one cloud VM is routinely handed a whole /64, so keying by the full address would give it
2**64 identities for the ban, the rate limit and the in-flight share.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN_CLIENT = "unknown"
#: The IPv6 prefix length a client is keyed by unless configured otherwise.
DEFAULT_IPV6_PREFIX = 64


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) of trusted proxies; raises ValueError on a bad one."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)


# Parsed two to four times per request (the shedding and the gateway middleware each find
# the client, then its key), ~10 us each: the same few addresses, remembered (pure).
@functools.lru_cache(maxsize=4096)
def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, nets: Sequence[Network]
) -> bool:
    return any(address in network for network in nets)


def client_ip(scope: Mapping[str, Any], trusted_proxies: Sequence[Network] = ()) -> str:
    """The IP the ASGI ``scope`` comes from, as a normalised string (``UNKNOWN_CLIENT`` when the
    server has no peer address, e.g. a test transport)."""
    client = scope.get("client")
    peer = _address(client[0]) if client else None
    if peer is None:
        return UNKNOWN_CLIENT
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return str(peer)
    forwarded: list[str] = []
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            forwarded.extend(part for part in value.decode("latin-1").split(",") if part.strip())
    for hop in reversed(forwarded):
        address = _address(hop)
        if address is None:
            break  # garbage in the chain: trust nothing left of it
        if not _trusted(address, trusted_proxies):
            return str(address)
        peer = address
    return str(peer)


def client_key(ip: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """The identity of the client at ``ip`` for limits, bans and shares: an IPv4 address
    itself, an IPv6 address by its ``/ipv6_prefix`` network (``2001:db8:1:2::/64``; the
    bare address at 128). Anything else (``UNKNOWN_CLIENT``) is returned as it is."""
    address = _address(ip)
    if not isinstance(address, ipaddress.IPv6Address) or ipv6_prefix >= 128:
        return str(address) if address is not None else ip
    return str(ipaddress.IPv6Network((address, ipv6_prefix), strict=False))
