"""Fair in-process workers through HTTP: a tenant with a long queue cannot starve another,
and never runs more than its max_concurrent_jobs at once (read from the job timestamps)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from jobhelpers import DEBUG_TENANT_POLICY, photo, submit, wait_terminal
from tests.dbkit import drop_database, fresh_database

from facegate.database import create_engine_from_url
from facegate.jobs.runtime import tenant_store_for
from facegate.provenance.marker import marker_for
from facegate.worker.embedded import workers_service
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.runner import EngineRunner

pytestmark = pytest.mark.timeout(300)


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, delta in events:  # at equal times the end (-1) sorts first
        running += delta
        peak = max(peak, running)
    return peak


def test_max_overlap_counts_concurrency() -> None:
    t = [datetime(2025, 1, 1, 0, 0, s) for s in range(6)]
    assert max_overlap([(t[0], t[2]), (t[1], t[3]), (t[2], t[4])]) == 2
    assert max_overlap([(t[0], t[5]), (t[1], t[2]), (t[1], t[3])]) == 3


async def test_a_long_queue_does_not_starve_another_tenant(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("tenant-a", **{**DEBUG_TENANT_POLICY, "max_concurrent_jobs": 2})
        h.create_tenant("tenant-b", **DEBUG_TENANT_POLICY)
        a, b = h.headers("tenant-a"), h.headers("tenant-b")
        image = photo(width=160)
        a_ids = [(await submit(h.client, a, target=image)).json()["id"] for _ in range(50)]
        b_id = (await submit(h.client, b, target=image)).json()["id"]

        # Three workers: one more than A may use, so a FIFO queue would hand A's jobs to
        # two of them and B would wait behind all 50 of A's.
        store = tenant_store_for(h.state.settings)
        pool = WorkerPool.on_database(
            h.state.engine,
            store,
            WorkerConfig(workers=3, lease_seconds=30, poll_seconds=0.05),
            marker=marker_for(h.state.settings.provenance_path, create=True),
            runner=EngineRunner(store, h.state.face_engine),
        )
        await anyio.to_thread.run_sync(pool.start)
        try:
            b_job = await wait_terminal(h.client, b, b_id)
            while True:
                page = await h.client.get("/v1/jobs?status=succeeded&limit=200", headers=a)
                if len(page.json()["items"]) >= 4:
                    break
                await asyncio.sleep(0.1)
            for job_id in a_ids:  # the rest is not needed: cancel what is still queued
                await h.client.delete(f"/v1/jobs/{job_id}", headers=a)
            a_jobs = [await wait_terminal(h.client, a, job_id) for job_id in a_ids]
        finally:
            await anyio.to_thread.run_sync(pool.stop)

        assert b_job["status"] == "succeeded"
        ran = [job for job in a_jobs if job["started_at"] and job["status"] == "succeeded"]
        finished = sorted(datetime.fromisoformat(job["finished_at"]) for job in ran)
        assert len(finished) >= 4
        assert datetime.fromisoformat(b_job["started_at"]) < finished[3]
        intervals = [
            (datetime.fromisoformat(j["started_at"]), datetime.fromisoformat(j["finished_at"]))
            for j in ran
        ]
        assert max_overlap(intervals) <= 2
        assert max_overlap(intervals) == 2  # the cap was actually reached, not just respected
        assert all(job["attempts"] <= 1 for job in a_jobs)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_a_tenant_bound_server_never_claims_another_tenants_job(
    make_client: Any, backend: str, tmp_path: Path
) -> None:
    """``serve`` in a tenant's own pod (TENANT_ID / FACEGATE_WORKER_TENANTS) shares the
    database with every tenant: it runs its tenant's jobs and leaves the others queued."""
    engine, url, schema = fresh_database(backend, tmp_path, name="bound", what="tenant-bound")
    engine.dispose()
    try:
        overrides = {"database_url": url, "worker_tenants": "tenant-a", "job_poll_seconds": 0.05}
        async with make_client(services=[workers_service], workers=1, **overrides) as h:
            h.create_tenant("tenant-a", **DEBUG_TENANT_POLICY)
            h.create_tenant("tenant-b", **DEBUG_TENANT_POLICY)
            a, b = h.headers("tenant-a"), h.headers("tenant-b")
            b_id = (await submit(h.client, b, target=photo())).json()["id"]  # queued first
            a_id = (await submit(h.client, a, target=photo())).json()["id"]
            assert (await wait_terminal(h.client, a, a_id))["status"] == "succeeded"
            await asyncio.sleep(1.0)  # twenty more polls of the idle worker
            b_job = (await h.client.get(f"/v1/jobs/{b_id}", headers=b)).json()
            assert b_job["status"] == "queued"
            assert b_job["attempts"] == 0
    finally:
        drop_database(create_engine_from_url(url), schema)
