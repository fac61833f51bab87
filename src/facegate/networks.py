"""Networks an operator names in a setting, each with the ports it opens
(``FACEGATE_WEBHOOK_ALLOWED_NETWORKS``): read here so the settings refuse a bad entry at
start-up and the webhook sender matches the same parse.

An entry is a network (CIDR or one address) and optionally ``:PORTS`` — a comma-separated
list of ports and ``FIRST-LAST`` ranges, or ``*`` for every port; an IPv6 network with ports
goes in brackets. Without ports an entry opens only the ports a webhook uses, 80 and 443:
allow-listing an internal receiver must not open the database, the admin consoles and
every other service on the same network.

    10.20.0.0/16            ports 80 and 443
    10.20.0.0/16:8443       port 8443 only
    10.20.0.5:8000-8010,9000
    [fd12:3456::/32]:8443
    192.168.7.0/24:*        every port (explicit)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = frozenset({80, 443})


@dataclass(frozen=True)
class AllowedNetwork:
    """A network and the ports it opens (None: every port)."""

    network: IPNetwork
    ports: frozenset[int] | None = DEFAULT_PORTS

    def admits(self, address: IPAddress, port: int) -> bool:
        return address in self.network and (self.ports is None or port in self.ports)


def parse_allowed(values: Sequence[str]) -> tuple[AllowedNetwork, ...]:
    """Each entry parsed; ValueError naming the first bad one."""
    return tuple(parse_entry(value) for value in values)


def parse_entry(value: str) -> AllowedNetwork:
    text = value.strip()
    network_text, ports_text = _split(text)
    try:
        network = ipaddress.ip_network(network_text, strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not a network (CIDR, optionally :ports)") from None
    if ports_text is None:
        return AllowedNetwork(network)
    return AllowedNetwork(network, _ports(ports_text, value))


def _split(text: str) -> tuple[str, str | None]:
    """(network, ports or None): ``[v6]:ports``, ``v4:ports``, or a bare network."""
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return text, None  # ip_network refuses it, naming the entry
        return inside, rest[1:] if rest else None
    if text.count(":") == 1:  # IPv4 with ports (an IPv6 network has two colons at least)
        network, _, ports = text.partition(":")
        return network, ports
    return text, None


def _ports(text: str, entry: str) -> frozenset[int] | None:
    if text.strip() == "*":
        return None
    ports: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last if dash else first)
        except ValueError:
            raise ValueError(f"{entry!r}: {part.strip()!r} is not a port or range") from None
        if not 1 <= low <= high <= 65535:
            raise ValueError(f"{entry!r}: ports are 1-65535, a range low-high")
        ports.update(range(low, high + 1))
    return frozenset(ports)
