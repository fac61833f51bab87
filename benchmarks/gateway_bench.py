"""Cost of the gateway (rate limits + ban check) on the authenticated GET path, in-process.

Three apps on one SQLite database: gateway off, gateway on process memory, gateway on Redis
(skipped when ``--redis`` does not answer). Rounds alternate so drift hits all; the best
round of each is compared with the gateway-off baseline of the same run. Also prints raw
``RateLimiter.hit`` calls per second on each storage.

    .venv/bin/python benchmarks/gateway_bench.py [--requests 500] [--rounds 3]
        [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from benchkit import bench_settings
from facegate.api.app import create_app
from facegate.database import session_scope
from facegate.ratelimit.limiter import RateLimiter, create_storage
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService


async def rate(client: httpx.AsyncClient, headers: dict[str, str], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        (await client.get("/v1/jobs", headers=headers)).raise_for_status()
    return n / (time.perf_counter() - started)


def hits_per_second(url: str | None, n: int = 2000) -> float:
    limiter = RateLimiter(create_storage(url, f"fgbench-{uuid.uuid4().hex[:8]}"))
    started = time.perf_counter()
    for _ in range(n):
        limiter.hit("tenant", "bench", 10_000_000)
    return n / (time.perf_counter() - started)


def redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


async def main(tmp: Path, requests: int, rounds: int, redis_url: str) -> None:
    logging.disable(logging.INFO)
    variants: dict[str, dict[str, Any]] = {
        "off": {"rate_limit_enabled": False},
        "memory": {"rate_limit_enabled": True},
    }
    if redis_answers(redis_url):
        prefix = f"fgbench-{uuid.uuid4().hex[:8]}"
        variants["redis"] = {
            "rate_limit_enabled": True,
            "redis_url": redis_url,
            "rate_limit_key_prefix": prefix,
        }
    apps = {
        name: create_app(bench_settings(tmp, **extra), services=[])
        for name, extra in variants.items()
    }
    results: dict[str, list[float]] = {name: [] for name in apps}
    contexts = [app.router.lifespan_context(app) for app in apps.values()]
    for context in contexts:
        await context.__aenter__()
    try:
        first = next(iter(apps.values()))
        with session_scope(first.state.facegate.session_factory) as session:
            service = TenancyService(session)
            spec = TenantSpec(id="bench", policy=PolicySpec(requests_per_minute=1_000_000))
            service.create_tenant(spec)
            token = service.create_key("bench", KeyCreate(scopes=["jobs:read"])).token
        headers = {"Authorization": f"Bearer {token}"}
        clients = {
            name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
            for name, app in apps.items()
        }
        for client in clients.values():
            await rate(client, headers, 50)  # warm-up
        for _ in range(rounds):
            for name, client in clients.items():
                results[name].append(await rate(client, headers, requests))
        for client in clients.values():
            await client.aclose()
    finally:
        for context in reversed(contexts):
            await context.__aexit__(None, None, None)
    baseline = max(results["off"])
    print(f"GET /v1/jobs (API key, SQLite), {requests} requests x {rounds} rounds each")
    for name, values in results.items():
        best = max(values)
        print(f"gateway {name:6}: {best:7.0f} req/s (best)  {best / baseline:.2f}x of off")
    print(f"RateLimiter.hit, memory: {hits_per_second(None):8.0f}/s")
    if "redis" in results:
        print(f"RateLimiter.hit, Redis:  {hits_per_second(redis_url):8.0f}/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="facegate-gateway-bench-") as tmp:
        asyncio.run(main(Path(tmp), args.requests, args.rounds, args.redis))
