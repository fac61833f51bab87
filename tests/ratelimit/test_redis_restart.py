"""Stop the real Redis while the API runs: the configured fail mode holds (open passes,
closed answers 503); start it again: limits resume.

Stopping a shared Redis is disruptive, so this runs only under CI=true or
FACEGATE_TEST_REDIS_RESTART=1 (and needs the test Redis, see ratelimitfactories)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from ratelimitfactories import require_redis, unique_prefix
from tests.conftest import MakeClient

RESTART_COMMAND = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]


def wait_for(url: str, *, up: bool, seconds: float = 15.0) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            alive = bool(client.ping())
        except redis.RedisError:
            alive = False
        if alive == up:
            client.close()
            return
        time.sleep(0.1)
    raise AssertionError(f"Redis did not go {'up' if up else 'down'} in {seconds} s")


@pytest.fixture
def restartable_redis() -> Iterator[tuple[str, list[bool]]]:
    """The test Redis URL and a flag list the test sets when it stopped Redis; Redis is
    started again afterwards whatever happened."""
    if os.environ.get("CI") != "true" and os.environ.get("FACEGATE_TEST_REDIS_RESTART") != "1":
        pytest.skip("stops the shared Redis: set FACEGATE_TEST_REDIS_RESTART=1 (or CI=true)")
    url = require_redis()
    stopped: list[bool] = []
    try:
        yield url, stopped
    finally:
        if stopped:
            subprocess.run(RESTART_COMMAND, check=True, timeout=30)
            wait_for(url, up=True)


@pytest.mark.redis
async def test_fail_modes_hold_while_redis_is_down_and_limits_resume(
    make_client: MakeClient, restartable_redis: tuple[str, list[bool]]
) -> None:
    url, stopped = restartable_redis
    settings = {
        "rate_limit_enabled": True,
        "redis_url": url,
        "rate_limit_key_prefix": unique_prefix(),
        "rate_limit_fail_mode": "closed",
        "breaker_failure_threshold": 1,
        "breaker_reset_seconds": 0.2,
    }
    async with make_client(**settings) as h:
        h.create_tenant("acme", requests_per_minute=3)
        headers = h.headers("acme")
        gateway = h.app.state.gateway
        first = await h.client.get("/v1/me", headers=headers)
        assert first.headers["RateLimit"].startswith('"tenant";r=2;')

        stopped.append(True)
        subprocess.run(["redis-cli", "-u", url, "shutdown", "nosave"], check=False, timeout=30)
        wait_for(url, up=False)
        closed = await h.client.get("/v1/me", headers=headers)
        assert closed.status_code == 503
        assert closed.json()["dependency"] == "redis"
        gateway.fail_mode = "open"
        for _ in range(5):  # over the limit, but nothing can count it: let through
            opened = await h.client.get("/v1/me", headers=headers)
            assert opened.status_code == 200
            assert "RateLimit" not in opened.headers
        # An operator's view of the ban list never fails open (an empty list would lie).
        bans = await h.client.get("/v1/admin/bans", headers=h.headers("ops", ["admin"]))
        assert bans.status_code == 503
        assert bans.json()["dependency"] == "redis"

        subprocess.run(RESTART_COMMAND, check=True, timeout=30)
        stopped.clear()
        wait_for(url, up=True)
        time.sleep(0.3)  # the breaker's cool-down, then its trial call reaches Redis
        # "nosave": the counters restarted empty; the limit counts again from zero
        for remaining in (2, 1, 0):
            response = await h.client.get("/v1/me", headers=headers)
            assert response.headers["RateLimit"].startswith(f'"tenant";r={remaining};')
        assert (await h.client.get("/v1/me", headers=headers)).status_code == 429
        assert gateway.breaker.state == "closed"
