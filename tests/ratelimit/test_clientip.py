"""Client IP: the socket peer, X-Forwarded-For only through trusted proxies."""

from __future__ import annotations

from typing import Any

import pytest

from facegate.ratelimit.clientip import UNKNOWN_CLIENT, client_ip, client_key, parse_networks

PROXIES = parse_networks(["10.0.0.0/8", "::1"])


def scope_of(peer: str | None, forwarded: str | None = None) -> dict[str, Any]:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    return {"client": (peer, 5000) if peer else None, "headers": headers}


@pytest.mark.parametrize(
    ("peer", "forwarded", "expected"),
    [
        ("203.0.113.9", None, "203.0.113.9"),
        ("203.0.113.9", "1.2.3.4", "203.0.113.9"),  # untrusted peer: header ignored
        ("10.1.2.3", "198.51.100.7", "198.51.100.7"),
        ("10.1.2.3", "6.6.6.6, 198.51.100.7, 10.9.9.9", "198.51.100.7"),  # spoofed left part
        ("10.1.2.3", "10.2.2.2, 10.3.3.3", "10.2.2.2"),  # all proxies: the leftmost
        ("10.1.2.3", "not-an-ip, 198.51.100.7", "198.51.100.7"),
        ("10.1.2.3", "198.51.100.7, garbage", "10.1.2.3"),  # stop at garbage
        ("10.1.2.3", None, "10.1.2.3"),
        ("::1", "2001:db8::5", "2001:db8::5"),
        ("::ffff:203.0.113.9", None, "203.0.113.9"),  # v4-mapped: one client, one key
        (None, "1.2.3.4", UNKNOWN_CLIENT),
    ],
)
def test_client_ip(peer: str | None, forwarded: str | None, expected: str) -> None:
    assert client_ip(scope_of(peer, forwarded), PROXIES) == expected


def test_no_trusted_proxies_means_the_peer() -> None:
    assert client_ip(scope_of("10.1.2.3", "198.51.100.7")) == "10.1.2.3"


def test_bad_proxy_config_is_refused() -> None:
    with pytest.raises(ValueError, match="does not appear"):
        parse_networks(["10.0.0.0/33x"])


@pytest.mark.parametrize(
    ("ip", "prefix", "expected"),
    [
        ("203.0.113.9", 64, "203.0.113.9"),  # IPv4: the address
        ("2001:db8:1:2:aaaa::1", 64, "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"),  # the same /64
        ("2001:db8:1:3::1", 64, "2001:db8:1:3::/64"),  # the next one: another client
        ("2001:db8:1:2:aaaa::1", 48, "2001:db8:1::/48"),
        ("2001:db8::5", 128, "2001:db8::5"),  # 128: the full address, as before
        (UNKNOWN_CLIENT, 64, UNKNOWN_CLIENT),
    ],
)
def test_client_key_groups_ipv6_by_its_prefix(ip: str, prefix: int, expected: str) -> None:
    assert client_key(ip, prefix) == expected
