"""The JobQueue contract: the same tests against the in-memory queue, SQLite and
PostgreSQL (the cluster queue: per-tenant locks, the shared reaper lock, LISTEN/NOTIFY).

Each implementation comes with a small harness that plays the service's side (tenants,
submitted and running jobs, a cancel request) and reads what the queue did."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import pytest
from sqlalchemy import Engine, select
from tests.dbkit import drop_database, fresh_database

from facegate.database import create_session_factory, session_scope, utcnow
from facegate.jobs.tables import Job, WorkerRecord
from facegate.queue.claim import Claim
from facegate.queue.fairness import QueuedJob, TenantLimits, TenantLoad, plan_claims
from facegate.queue.memory import MemoryJob, MemoryQueue
from facegate.queue.notify import ANY_TENANT
from facegate.queue.port import JobQueue, WorkerInfo
from facegate.queue.sql import PostgresQueue, SqlQueue
from facegate.tenancy.tables import Policy, Tenant


@dataclass(frozen=True)
class JobView:
    status: str
    attempts: int
    lease_owner: str | None
    stage: str | None
    error_type: str | None


class Harness(Protocol):
    queue: JobQueue

    def add_tenant(self, tenant_id: str, limits: TenantLimits | None) -> None: ...

    def add_job(
        self,
        tenant_id: str,
        *,
        priority: int = 0,
        created_at: datetime | None = None,
        max_attempts: int = 3,
        running: bool = False,
        holds_device: bool = False,
    ) -> uuid.UUID: ...

    def cancel(self, job_id: uuid.UUID) -> None: ...

    def job(self, job_id: uuid.UUID) -> JobView: ...

    def worker_status(self, worker_id: str) -> str | None: ...


class MemoryHarness:
    def __init__(self) -> None:
        self.memory = MemoryQueue()
        self.queue: JobQueue = self.memory

    def add_tenant(self, tenant_id: str, limits: TenantLimits | None) -> None:
        self.memory.add_tenant(tenant_id, limits)

    def add_job(
        self,
        tenant_id: str,
        *,
        priority: int = 0,
        created_at: datetime | None = None,
        max_attempts: int = 3,
        running: bool = False,
        holds_device: bool = False,
    ) -> uuid.UUID:
        job = MemoryJob(
            uuid.uuid4(),
            tenant_id,
            priority,
            created_at or utcnow(),
            status="running" if running else "queued",
            max_attempts=max_attempts,
            holds_device=holds_device,
            lease_owner="another-worker" if running else None,
        )
        return self.memory.add_job(job).id

    def cancel(self, job_id: uuid.UUID) -> None:
        self.memory.cancel(job_id)

    def job(self, job_id: uuid.UUID) -> JobView:
        job = self.memory.jobs[job_id]
        error = job.values.get("error_type")
        return JobView(job.status, job.attempts, job.lease_owner, job.stage, error)

    def worker_status(self, worker_id: str) -> str | None:
        worker = self.memory.workers.get(worker_id)
        return worker.status if worker else None


class SqlHarness:
    def __init__(self, engine: Engine, queue: SqlQueue) -> None:
        self.engine = engine
        self.queue: JobQueue = queue
        self.sessions = create_session_factory(engine)

    def add_tenant(self, tenant_id: str, limits: TenantLimits | None) -> None:
        caps = limits or TenantLimits(1, 1)
        with session_scope(self.sessions) as session:
            tenant = Tenant(id=tenant_id, name=tenant_id)
            tenant.status = "active" if limits else "suspended"
            tenant.policy = Policy(
                max_concurrent_jobs=caps.max_concurrent_jobs, device_limit=caps.device_limit
            )
            session.add(tenant)

    def add_job(
        self,
        tenant_id: str,
        *,
        priority: int = 0,
        created_at: datetime | None = None,
        max_attempts: int = 3,
        running: bool = False,
        holds_device: bool = False,
    ) -> uuid.UUID:
        job_id = uuid.uuid4()
        with session_scope(self.sessions) as session:
            session.add(
                Job(
                    id=job_id,
                    tenant_id=tenant_id,
                    status="running" if running else "queued",
                    kind="image",
                    spec={},
                    inputs=[],
                    priority=priority,
                    created_at=created_at or utcnow(),
                    max_attempts=max_attempts,
                    holds_device=holds_device,
                    lease_owner="another-worker" if running else None,
                )
            )
        self.queue.announce(tenant_id)  # as the submission does after its commit
        return job_id

    def cancel(self, job_id: uuid.UUID) -> None:
        with session_scope(self.sessions) as session:
            session.get_one(Job, job_id).cancel_requested = True

    def job(self, job_id: uuid.UUID) -> JobView:
        with session_scope(self.sessions) as session:
            job = session.get_one(Job, job_id)
            return JobView(job.status, job.attempts, job.lease_owner, job.stage, job.error_type)

    def worker_status(self, worker_id: str) -> str | None:
        with session_scope(self.sessions) as session:
            found = session.scalars(
                select(WorkerRecord.status).where(WorkerRecord.id == worker_id)
            ).first()
            return found


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "memory":
        yield MemoryHarness()
        return
    engine, _, schema = fresh_database(request.param, tmp_path, name="queue", what="queue")
    queue = PostgresQueue(engine) if request.param == "postgres" else SqlQueue(engine)
    yield SqlHarness(engine, queue)
    drop_database(engine, schema)


def test_claims_follow_the_fair_plan_in_batches(harness: Harness) -> None:
    rng = random.Random(3)
    now = utcnow()
    limits: dict[str, TenantLimits | None] = {}
    loads: dict[str, TenantLoad] = {}
    queued: list[QueuedJob] = []
    for n in range(5):
        tenant = f"t{n}"
        cap = rng.randint(1, 4)
        limits[tenant] = None if n == 4 else TenantLimits(cap, 2)
        harness.add_tenant(tenant, limits[tenant])
        running = rng.randint(0, cap)
        for k in range(running):
            harness.add_job(tenant, running=True, holds_device=k == 0)
        loads[tenant] = TenantLoad(running, min(running, 1))
        for _ in range(6):
            priority, created = rng.choice([0, 0, 3]), now - timedelta(seconds=rng.choice([1, 2]))
            job_id = harness.add_job(tenant, priority=priority, created_at=created)
            queued.append(QueuedJob(job_id, tenant, priority, created))
    planned = plan_claims(queued, loads, limits, limit=7)
    claimed = harness.queue.claim_many("w", limit=7, lease_seconds=30)
    assert [(c.job_id, c.tenant_id, c.attempt) for c in claimed] == [
        (c.id, c.tenant_id, 1) for c in planned
    ]
    assert all(harness.job(c.job_id).status == "running" for c in claimed)


def test_parallel_batch_claims_keep_every_cap(harness: Harness) -> None:
    caps = {"a": 1, "b": 2, "c": 5}
    for tenant, cap in caps.items():
        harness.add_tenant(tenant, TenantLimits(cap, 1))
        for _ in range(12):
            harness.add_job(tenant)
    claims: list[Claim] = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def worker(number: int) -> None:
        barrier.wait()
        for _ in range(4):
            got = harness.queue.claim_many(f"w{number}", limit=3, lease_seconds=30)
            with lock:
                claims.extend(got)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(c.tenant_id for c in claims) == caps
    assert len({c.job_id for c in claims}) == len(claims)


def test_a_lease_is_renewed_reports_progress_and_finishes_once(harness: Harness) -> None:
    harness.add_tenant("a", TenantLimits(2, 1))
    job_id = harness.add_job("a")
    claim = harness.queue.claim("w", lease_seconds=30)
    assert claim is not None
    assert claim.job_id == job_id
    assert harness.queue.renew(claim, 30).held
    state = harness.queue.report_progress(claim, 0.5, "process", {"frames": 3})
    assert (state.held, state.cancel_requested) == (True, False)
    harness.cancel(job_id)
    assert harness.queue.renew(claim, 30).cancel_requested
    assert harness.queue.finish(claim, "cancelled", stage="cancelled")
    assert not harness.queue.finish(claim, "succeeded")
    lost = harness.queue.renew(claim, 30)
    assert (lost.held, lost.cancel_requested) == (False, True)
    assert harness.job(job_id) == JobView("cancelled", 1, None, "cancelled", None)


def test_release_gives_the_job_back_without_spending_an_attempt(harness: Harness) -> None:
    harness.add_tenant("a", TenantLimits(1, 1))
    job_id = harness.add_job("a")
    claim = harness.queue.claim("w", lease_seconds=30)
    assert claim is not None
    assert harness.queue.release(claim)
    assert not harness.queue.release(claim)
    assert harness.job(job_id) == JobView("queued", 0, None, "requeued", None)
    again = harness.queue.claim("w2", lease_seconds=30)
    assert again is not None
    assert (again.job_id, again.attempt) == (job_id, 1)


def test_the_reaper_requeues_then_fails_and_the_lost_worker_cannot_finish(
    harness: Harness,
) -> None:
    harness.add_tenant("a", TenantLimits(2, 1))
    job_id = harness.add_job("a", max_attempts=2)
    live_id = harness.add_job("a")
    live = harness.queue.claim_many("live", limit=2, lease_seconds=60)
    assert {c.job_id for c in live} == {job_id, live_id}
    harness.queue.release(next(c for c in live if c.job_id == job_id))
    first = harness.queue.claim("w1", lease_seconds=0.01)
    assert first is not None
    time.sleep(0.05)
    assert [(r.job_id, r.outcome) for r in harness.queue.reap()] == [(job_id, "requeued")]
    assert not harness.queue.finish(first, "succeeded")
    second = harness.queue.claim("w2", lease_seconds=0.01)
    assert second is not None
    assert second.attempt == 2
    time.sleep(0.05)
    assert [(r.job_id, r.outcome) for r in harness.queue.reap()] == [(job_id, "failed")]
    assert harness.job(job_id) == JobView("failed", 2, None, "failed", "lease-expired")
    assert harness.job(live_id).status == "running"  # its lease is alive
    assert harness.queue.reap() == []


def test_heartbeats_register_beat_report_the_silent_and_stop(harness: Harness) -> None:
    def info(worker_id: str) -> WorkerInfo:
        return WorkerInfo(worker_id, "host", 1, None, 2)

    assert (
        harness.queue.beat_worker("nobody", status="running", running_jobs=0, stale_after_seconds=5)
        is None
    )
    harness.queue.register_worker(info("quiet"))
    time.sleep(0.2)
    harness.queue.register_worker(info("busy"))
    lost = harness.queue.beat_worker(
        "busy", status="draining", running_jobs=1, stale_after_seconds=0.1
    )
    assert lost == 1
    assert harness.worker_status("quiet") == "lost"
    assert harness.worker_status("busy") == "draining"
    harness.queue.stop_worker("busy")
    assert harness.worker_status("busy") == "stopped"


def test_a_queued_job_wakes_the_listeners(harness: Harness) -> None:
    heard: list[str] = []
    woken = threading.Event()

    def on_queued(tenant: str) -> None:
        heard.append(tenant)
        woken.set()

    harness.add_tenant("a", TenantLimits(1, 1))
    stop = harness.queue.listen(on_queued)
    try:
        deadline = time.monotonic() + 5
        while not ({"a", ANY_TENANT} & set(heard)) and time.monotonic() < deadline:
            woken.clear()
            heard.clear()
            harness.add_job("a")
            woken.wait(1)
        assert {"a", ANY_TENANT} & set(heard)
    finally:
        stop()
    heard.clear()
    harness.queue.announce("a")
    assert "a" not in heard
