"""A tenant's keys in Redis: its request counters (``limits``' keys,
``<prefix>:{facegate/tenant/<tenant>/<per minute>/1/minute}`` and the previous window's).
Erasing a tenant deletes them; the erasure receipt's scan counts what is left (nothing).

Every other key of the installation (bans, the IP counters) is keyed by an address, never
by a tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class KeyScanner(Protocol):
    """The few ``redis.Redis`` calls used here (typed for the tests' sake)."""

    def scan_iter(self, match: str, count: int) -> Iterator[bytes]: ...

    def delete(self, *names: bytes) -> int: ...


def tenant_pattern(prefix: str, tenant_id: str) -> str:
    # Tenant ids are [a-z0-9-] (tenancy's slug): nothing in them is a glob character.
    return f"{prefix}:{{facegate/tenant/{tenant_id}/*"


def tenant_keys(client: KeyScanner, prefix: str, tenant_id: str) -> list[bytes]:
    return sorted(client.scan_iter(match=tenant_pattern(prefix, tenant_id), count=1000))


def delete_tenant_keys(client: KeyScanner, prefix: str, tenant_id: str) -> int:
    """Delete the tenant's keys; how many there were."""
    found = tenant_keys(client, prefix, tenant_id)
    for start in range(0, len(found), 500):
        client.delete(*found[start : start + 500])
    return len(found)
