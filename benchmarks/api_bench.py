"""Jobs API speed, in-process (httpx ASGITransport, no network), one run:

1. authenticated ``GET /v1/jobs/{id}`` throughput against a bare FastAPI endpoint that
   returns a dict (the baseline, same transport, same run) — target ratio ≥ 0.5;
2. submitting a ~100 KB JPEG job (``POST /v1/jobs``: auth, policy checks, safe decode,
   storing the input, inserting the job; no worker, so the swap itself is not counted) —
   target p50 ≤ 10 ms.

    .venv/bin/python benchmarks/api_bench.py [--requests 2000] [--submits 100]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from fastapi import FastAPI
from PIL import Image

from facegate.api.app import create_app
from facegate.database import session_scope
from facegate.settings import Settings
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

FACES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
TARGET_RATIO = 0.5
TARGET_SUBMIT_P50_MS = 10.0


def bare_app() -> FastAPI:
    app = FastAPI()

    @app.get("/items/{item_id}")
    def read_item(item_id: str) -> dict[str, str]:
        return {"id": item_id, "status": "queued"}

    return app


def image_of_about(size: int) -> bytes:
    """A JPEG of a real face photo close to ``size`` bytes."""
    source = Image.open(FACES / "woman_astronaut_frontal.jpg").convert("RGB")
    best = b""
    for width in range(300, 1200, 20):
        out = io.BytesIO()
        source.resize((width, width)).save(out, "JPEG", quality=90)
        best = out.getvalue()
        if len(best) >= size:
            break
    return best


async def throughput(client: httpx.AsyncClient, url: str, headers: dict[str, str], n: int) -> float:
    for _ in range(50):  # warm-up
        (await client.get(url, headers=headers)).raise_for_status()
    started = time.perf_counter()
    for _ in range(n):
        (await client.get(url, headers=headers)).raise_for_status()
    return n / (time.perf_counter() - started)


async def main(requests: int, submits: int) -> None:
    logging.disable(logging.INFO)
    tmp = Path(tempfile.mkdtemp(prefix="facegate-bench-"))
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite:///{tmp}/facegate.db",
        storage_url=f"file://{tmp}/storage",
        data_dir=tmp,
        models_dir=tmp / "models",
        workers=0,
        log_level="warning",  # request logs would measure the terminal, not the service
    )
    app = create_app(settings, services=[])
    target = image_of_about(100 * 1024)
    async with app.router.lifespan_context(app):
        state = app.state.facegate
        with session_scope(state.session_factory) as session:
            service = TenancyService(session)
            policy = PolicySpec(
                allowed_processors=["face_debugger"],
                max_queued_jobs=100_000,
                requests_per_minute=1_000_000,
            )
            service.create_tenant(TenantSpec(id="bench", policy=policy))
            token = service.create_key("bench", KeyCreate(scopes=["jobs:write", "jobs:read"]))
        headers = {"Authorization": f"Bearer {token.token}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            files = {"target": ("t.jpg", target, "image/jpeg")}
            options = {"options": json.dumps({"processors": ["face_debugger"]})}
            latencies = []
            for number in range(submits + 5):
                started = time.perf_counter()
                response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
                elapsed = time.perf_counter() - started
                assert response.status_code == 202, response.text
                if number >= 5:  # the first few warm up imports and caches
                    latencies.append(elapsed * 1000)
            job_id = response.json()["id"]
            authed = await throughput(client, f"/v1/jobs/{job_id}", headers, requests)
        bare_transport = httpx.ASGITransport(app=bare_app())
        async with httpx.AsyncClient(transport=bare_transport, base_url="http://bare") as client:
            bare = await throughput(client, f"/items/{job_id}", {}, requests)

    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[18]
    ratio = authed / bare
    print(f"GET /v1/jobs/{{id}} (API key, SQLite): {authed:8.0f} req/s")
    print(f"bare FastAPI endpoint (baseline):     {bare:8.0f} req/s")
    verdict = "OK" if ratio >= TARGET_RATIO else "MISSED"
    print(f"ratio: {ratio:.2f}  (target >= {TARGET_RATIO})  {verdict}")
    print(
        f"POST /v1/jobs, {len(target) / 1024:.0f} KB JPEG target, {len(latencies)} submissions: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms  (target p50 <= {TARGET_SUBMIT_P50_MS} ms)  "
        f"{'OK' if p50 <= TARGET_SUBMIT_P50_MS else 'MISSED'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--submits", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.submits))
