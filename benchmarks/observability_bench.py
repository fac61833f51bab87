"""Cost of metrics + logging on the authenticated GET path, in-process (httpx ASGITransport).

Two apps on one SQLite database: observability on (HTTP metrics middleware, JSON access log
rendered and written to /dev/null, so rendering is counted but not a terminal) and off
(``metrics_enabled=false``, log level warning). Rounds alternate between them so drift hits
both; the best round of each is compared. Target: overhead <= 10 %.

    .venv/bin/python benchmarks/observability_bench.py [--requests 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

import httpx

from benchkit import bench_settings
from facegate.api.app import create_app
from facegate.database import session_scope
from facegate.observability.logging import configure_logging, set_log_output
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

TARGET_OVERHEAD = 0.10


async def rate(client: httpx.AsyncClient, headers: dict[str, str], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        (await client.get("/v1/jobs", headers=headers)).raise_for_status()
    return n / (time.perf_counter() - started)


async def main(tmp: Path, requests: int, rounds: int) -> None:
    logging.disable(logging.INFO)
    on = create_app(bench_settings(tmp, metrics_enabled=True, log_level="info"), services=[])
    off = create_app(bench_settings(tmp, metrics_enabled=False, log_level="warning"), services=[])
    sink = open("/dev/null", "w")  # lives for the whole run
    results: dict[str, list[float]] = {"on": [], "off": []}
    async with on.router.lifespan_context(on), off.router.lifespan_context(off):
        with session_scope(on.state.facegate.session_factory) as session:
            service = TenancyService(session)
            # A rate limit high enough that the rounds measure the path, not 429s.
            policy = PolicySpec(requests_per_minute=1_000_000)
            service.create_tenant(TenantSpec(id="bench", policy=policy))
            token = service.create_key("bench", KeyCreate(scopes=["jobs:read"])).token
        headers = {"Authorization": f"Bearer {token}"}
        clients = {
            name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
            for name, app in (("on", on), ("off", off))
        }
        for client in clients.values():
            await rate(client, headers, 50)  # warm-up
        for _ in range(rounds):
            for name in ("off", "on"):
                # Logging is process-wide: each round sets the level of its side.
                level = "info" if name == "on" else "warning"
                configure_logging(level, stream=sink, cache=True)
                results[name].append(await rate(clients[name], headers, requests))
        for client in clients.values():
            await client.aclose()
    set_log_output(None)
    best_on, best_off = max(results["on"]), max(results["off"])
    overhead = 1 - best_on / best_off
    print(f"GET /v1/jobs (API key, SQLite), {requests} requests x {rounds} rounds each")
    print(f"observability off: {best_off:8.0f} req/s (best), rounds {_fmt(results['off'])}")
    print(f"observability on:  {best_on:8.0f} req/s (best), rounds {_fmt(results['on'])}")
    verdict = "OK" if overhead <= TARGET_OVERHEAD else "MISSED"
    print(f"overhead: {overhead * 100:.1f} %  (target <= {TARGET_OVERHEAD * 100:.0f} %)  {verdict}")


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:.0f}" for v in values)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="facegate-obs-bench-") as tmp:
        asyncio.run(main(Path(tmp), args.requests, args.rounds))
