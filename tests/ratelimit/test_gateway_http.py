"""The gateway through HTTP on memory and on a real Redis: RateLimit headers, 429 with
Retry-After, bans after bad keys (doubling, admin unban), and Redis outages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from ratelimitfactories import backend_url, closed_port, unique_prefix
from tests.conftest import Harness, MakeClient

from facegate.api.deps import PrincipalDep
from facegate.jobs.endpoints import ReadPrincipal

BACKENDS = ["memory", pytest.param("redis", marks=pytest.mark.redis)]
GatewayClient = Callable[..., AbstractAsyncContextManager[Harness]]


def from_ip(ip: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    # The test transport's peer is 127.0.0.1, configured as a trusted proxy below.
    return {"X-Forwarded-For": ip, **(headers or {})}


@pytest.fixture
def gateway_client(make_client: MakeClient) -> GatewayClient:
    """``gateway_client(backend, **settings)``: an app with the gateway on, behind a
    trusted proxy, its Redis keys under a prefix of its own."""

    @asynccontextmanager
    async def factory(backend: str, **overrides: Any) -> AsyncIterator[Harness]:
        values: dict[str, Any] = {
            "rate_limit_enabled": True,
            "redis_url": backend_url(backend),
            "rate_limit_key_prefix": unique_prefix(),
            "trusted_proxies": ["127.0.0.1/32"],
        }
        values.update(overrides)
        async with make_client(**values) as harness:
            yield harness

    return factory


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["type"].endswith("/" + slug)
    return body


@pytest.mark.parametrize("backend", BACKENDS)
async def test_tenant_limit_headers_and_429(gateway_client: GatewayClient, backend: str) -> None:
    async with gateway_client(backend) as h:
        h.create_tenant("slow", requests_per_minute=3)
        slow = from_ip("198.51.100.1", h.headers("slow"))
        for remaining in (2, 1, 0):
            response = await h.client.get("/v1/me", headers=slow)
            assert response.status_code == 200
            assert response.headers["RateLimit-Policy"] == '"tenant";q=3;w=60'
            assert response.headers["RateLimit"].startswith(f'"tenant";r={remaining};t=')
        refused = await h.client.get("/v1/me", headers=slow)
        body = assert_problem(refused, 429, "rate-limited")
        assert body["limit"] == "tenant"
        assert body["limit_value"] == 3
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.headers["RateLimit"].startswith('"tenant";r=0;t=')
        # another tenant, same IP: its own budget
        other = await h.client.get("/v1/me", headers=from_ip("198.51.100.1", h.headers("fast")))
        assert other.status_code == 200


async def test_a_request_counts_once_however_many_dependencies_ask_for_the_caller(
    gateway_client: GatewayClient,
) -> None:
    # A scoped dependency resolves the principal itself; a route that also takes
    # PrincipalDep must not count the request twice against the tenant's limit.
    async with gateway_client("memory") as h:

        async def both(principal: PrincipalDep, scoped: ReadPrincipal) -> dict[str, str]:
            assert principal is scoped
            return {"tenant": principal.tenant_id}

        h.app.add_api_route("/v1/test-both", both, methods=["GET"])
        h.create_tenant("slow", requests_per_minute=3)
        slow = from_ip("198.51.100.9", h.headers("slow"))
        for remaining in (2, 1, 0):
            response = await h.client.get("/v1/test-both", headers=slow)
            assert response.status_code == 200, response.text
            assert response.headers["RateLimit"].startswith(f'"tenant";r={remaining};t=')


@pytest.mark.parametrize("backend", BACKENDS)
async def test_ip_limit_for_unauthenticated_calls(
    gateway_client: GatewayClient, backend: str
) -> None:
    async with gateway_client(backend, rate_limit_ip_per_minute=2) as h:
        for _ in range(2):
            response = await h.client.get("/openapi.json", headers=from_ip("198.51.100.2"))
            assert response.status_code == 200
            assert response.headers["RateLimit-Policy"] == '"ip";q=2;w=60'
        refused = await h.client.get("/openapi.json", headers=from_ip("198.51.100.2"))
        assert assert_problem(refused, 429, "rate-limited")["limit"] == "ip"
        assert int(refused.headers["Retry-After"]) >= 1
        fresh = await h.client.get("/openapi.json", headers=from_ip("198.51.100.3"))
        assert fresh.status_code == 200
        for _ in range(5):  # probes are never limited
            assert (await h.client.get("/healthz", headers=from_ip("198.51.100.2"))).is_success


@pytest.mark.parametrize("backend", BACKENDS)
async def test_bad_keys_ban_the_ip_and_bans_double(
    gateway_client: GatewayClient, backend: str
) -> None:
    async with gateway_client(backend) as h:
        good = h.headers("acme")
        admin = from_ip("192.0.2.200", h.headers("ops", scopes=["admin"]))
        bad = from_ip("203.0.113.5", {"Authorization": "Bearer not-a-real-key"})
        for _ in range(5):
            assert_problem(await h.client.get("/v1/me", headers=bad), 401, "unauthorized")
        banned = await h.client.get("/v1/me", headers=from_ip("203.0.113.5", good))
        body = assert_problem(banned, 403, "banned")
        assert banned.headers["Retry-After"] == "600"
        assert body["retry_after"] == 600
        # the ban is per IP: the same key from elsewhere works
        assert (await h.client.get("/v1/me", headers=from_ip("203.0.113.6", good))).is_success

        listed = (await h.client.get("/v1/admin/bans", headers=admin)).json()
        assert [(ban["ip"], ban["strikes"]) for ban in listed] == [("203.0.113.5", 1)]
        assert (
            await h.client.delete("/v1/admin/bans/203.0.113.5", headers=admin)
        ).status_code == 204
        assert (await h.client.get("/v1/me", headers=from_ip("203.0.113.5", good))).is_success

        for _ in range(5):
            await h.client.get("/v1/me", headers=bad)
        again = await h.client.get("/v1/me", headers=bad)
        assert_problem(again, 403, "banned")
        assert 1195 <= int(again.headers["Retry-After"]) <= 1200  # doubled
        missing = await h.client.delete("/v1/admin/bans/203.0.113.77", headers=admin)
        assert_problem(missing, 404, "not-found")
        invalid = await h.client.delete("/v1/admin/bans/not-an-ip", headers=admin)
        assert_problem(invalid, 400, "bad-request")
        refused = await h.client.get("/v1/admin/bans", headers=from_ip("192.0.2.1", good))
        assert_problem(refused, 403, "forbidden")

        # each ban is a sensitive action on the audit chain
        audit = await h.client.get("/v1/audit", params={"action": "ip.ban"}, headers=admin)
        bans = [e for e in audit.json()["events"] if e["target"] == "ip:203.0.113.5"]
        assert [e["details"]["strikes"] for e in bans] == [1, 2]
        # and so is the admin's unban, with the admin as its actor
        unbans = await h.client.get("/v1/audit", params={"action": "ip.unban"}, headers=admin)
        assert [(e["target"], e["actor"][:4]) for e in unbans.json()["events"]] == [
            ("ip:203.0.113.5", "key:")
        ]


async def test_unreachable_redis_fail_open(gateway_client: GatewayClient) -> None:
    dead = f"redis://127.0.0.1:{closed_port()}/0"
    async with gateway_client("memory", redis_url=dead, rate_limit_fail_mode="open") as h:
        h.create_tenant("acme", requests_per_minute=1)
        headers = from_ip("198.51.100.4", h.headers("acme"))
        for _ in range(8):  # past the limit and past the breaker's threshold
            response = await h.client.get("/v1/me", headers=headers)
            assert response.status_code == 200
            assert "RateLimit" not in response.headers
        bad = from_ip("198.51.100.4", {"Authorization": "Bearer nope"})
        for _ in range(7):  # no bans without their storage, but still 401
            assert (await h.client.get("/v1/me", headers=bad)).status_code == 401


async def test_unreachable_redis_fail_closed(gateway_client: GatewayClient) -> None:
    dead = f"redis://127.0.0.1:{closed_port()}/0"
    settings = {"redis_url": dead, "rate_limit_fail_mode": "closed", "breaker_failure_threshold": 2}
    async with gateway_client("memory", **settings) as h:
        headers = from_ip("198.51.100.4", h.headers("acme"))
        for _ in range(4):
            response = await h.client.get("/v1/me", headers=headers)
            body = assert_problem(response, 503, "service-unavailable")
            assert body["dependency"] == "redis"
            assert int(response.headers["Retry-After"]) >= 1
        state = h.app.state.gateway.breaker.state
        assert state == "open"  # later calls fail fast without touching the network


@pytest.mark.parametrize("backend", BACKENDS)
async def test_ipv6_clients_share_limits_and_bans_per_64(
    gateway_client: GatewayClient, backend: str
) -> None:
    """One /64 is one client (``FACEGATE_CLIENT_IPV6_PREFIX``): its addresses share the
    per-IP rate limit and the ban, an admin lifts the ban by any of them; the next /64 is
    someone else. At 128 every address is its own client again."""
    async with gateway_client(backend, rate_limit_ip_per_minute=2) as h:
        for host in ("::1", "::2"):
            ok = await h.client.get("/openapi.json", headers=from_ip(f"2001:db8:a:b{host}"))
            assert ok.status_code == 200
        third = await h.client.get("/openapi.json", headers=from_ip("2001:db8:a:b:c:d:e:f"))
        assert assert_problem(third, 429, "rate-limited")["limit"] == "ip"
        other = await h.client.get("/openapi.json", headers=from_ip("2001:db8:a:c::1"))
        assert other.status_code == 200
    async with gateway_client(backend) as h:
        good = h.headers("acme")
        admin = from_ip("192.0.2.200", h.headers("ops", scopes=["admin"]))
        for number in range(5):
            bad = from_ip(f"2001:db8:1:2::{number + 1}", {"Authorization": "Bearer nope"})
            assert_problem(await h.client.get("/v1/me", headers=bad), 401, "unauthorized")
        banned = await h.client.get("/v1/me", headers=from_ip("2001:db8:1:2:ffff::1", good))
        assert_problem(banned, 403, "banned")
        assert (await h.client.get("/v1/me", headers=from_ip("2001:db8:1:3::1", good))).is_success
        listed = (await h.client.get("/v1/admin/bans", headers=admin)).json()
        assert [ban["ip"] for ban in listed] == ["2001:db8:1:2::/64"]
        lifted = await h.client.delete("/v1/admin/bans/2001:db8:1:2::99", headers=admin)
        assert lifted.status_code == 204
        assert (await h.client.get("/v1/me", headers=from_ip("2001:db8:1:2::1", good))).is_success
    async with gateway_client(backend, rate_limit_ip_per_minute=1, client_ipv6_prefix=128) as h:
        for host in ("::1", "::2"):
            ok = await h.client.get("/openapi.json", headers=from_ip(f"2001:db8:a:b{host}"))
            assert ok.status_code == 200
