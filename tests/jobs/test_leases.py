"""Leases: renew, guarded finish (never twice), expiry requeues then fails, release."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from jobfactories import create_job, create_tenant, sessions_of
from sqlalchemy import Engine, select

from facegate.database import session_scope, utcnow
from facegate.engine.runtime import EngineRuntime
from facegate.jobs.tables import Job
from facegate.provenance.marker import marker_for
from facegate.queue import leases
from facegate.queue.claim import LockingClaimer
from facegate.queue.sql import SqlQueue
from facegate.storage.memory import MemoryStore
from facegate.storage.tenant import TenantStore
from facegate.usage.tables import UsageRecord
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.runner import EngineRunner


def status_of(engine: Engine, job_id: object) -> Job:
    with session_scope(sessions_of(engine)) as session:
        return session.scalars(select(Job).where(Job.id == job_id)).one()


def test_expired_lease_requeues_then_fails(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        job_id = create_job(session, "a", max_attempts=2).id
    claimer = LockingClaimer(db_engine)
    for attempt in (1, 2):
        claim = claimer.claim(f"w{attempt}", lease_seconds=0.01)
        assert claim is not None
        assert claim.attempt == attempt
        with session_scope(sessions) as session:
            reaped = leases.requeue_expired(session, utcnow() + timedelta(seconds=1))
        assert [r.outcome for r in reaped] == ["requeued" if attempt == 1 else "failed"]
    job = status_of(db_engine, job_id)
    assert job.status == "failed"
    assert job.error_type == "lease-expired"
    assert "2 attempts" in (job.error_detail or "")
    # the first worker's lease is gone: it can neither renew nor finish the job
    with session_scope(sessions) as session:
        assert not leases.renew(session, job_id, "w1", 30).held
        assert not leases.finish(session, job_id, "w1", "succeeded")
    assert status_of(db_engine, job_id).status == "failed"


def test_live_lease_is_left_alone_and_finish_happens_once(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        job_id = create_job(session, "a").id
    claim = LockingClaimer(db_engine).claim("w", lease_seconds=60)
    assert claim is not None
    with session_scope(sessions) as session:
        assert leases.requeue_expired(session) == []
        state = leases.renew(session, job_id, "w", 60)
        assert state.held
        assert not state.cancel_requested
        assert leases.report_progress(session, job_id, "w", 0.5, "process").held
    with session_scope(sessions) as session:
        assert leases.finish(session, job_id, "w", "succeeded", progress=1.0)
    with session_scope(sessions) as session:
        assert not leases.finish(session, job_id, "w", "failed")
    job = status_of(db_engine, job_id)
    assert job.status == "succeeded"
    assert job.finished_at is not None
    assert job.lease_owner is None


def test_release_gives_the_job_back_without_spending_an_attempt(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        job_id = create_job(session, "a").id
    claim = LockingClaimer(db_engine).claim("w", lease_seconds=60)
    assert claim is not None
    with session_scope(sessions) as session:
        assert leases.release(session, job_id, "w")
    job = status_of(db_engine, job_id)
    assert job.status == "queued"
    assert job.attempts == 0
    assert job.lease_owner is None


def test_a_job_failed_by_the_reaper_is_metered_once(
    db_engine: Engine, tmp_path: Path, face_engine: EngineRuntime
) -> None:
    """Out of attempts, the reaper fails the job: it gets its usage record like any
    finished job (no compute billed: its worker vanished), and only one."""
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        job_id = create_job(session, "a", max_attempts=1).id
    claim = LockingClaimer(db_engine).claim("vanished", lease_seconds=0.01)
    assert claim is not None
    store = TenantStore(MemoryStore())
    pool = WorkerPool.on_database(
        db_engine,
        store,
        WorkerConfig(lease_seconds=0.01),
        marker=marker_for(tmp_path / "provenance", create=True),
        runner=EngineRunner(store, face_engine),
    )
    time.sleep(0.05)
    pool.reap()
    pool.reap()  # a second sweep finds nothing more to meter
    assert status_of(db_engine, job_id).status == "failed"
    with session_scope(sessions) as session:
        records = session.scalars(select(UsageRecord).where(UsageRecord.job_id == job_id)).all()
        assert [(r.status, r.compute_seconds) for r in records] == [("failed", 0.0)]


def test_a_tenant_bound_reaper_leaves_other_tenants_jobs(db_engine: Engine) -> None:
    """The reaper of a tenant-bound process (serve or worker with TENANT_ID) requeues its
    tenants' expired jobs only: another tenant's are its own workers' business."""
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        for tenant in ("a", "b"):
            create_tenant(session, tenant)
            create_job(session, tenant)
    claimer = LockingClaimer(db_engine)
    claims = [claimer.claim(f"w{n}", lease_seconds=0.01) for n in (1, 2)]
    assert all(claims)
    time.sleep(0.05)
    reaped = SqlQueue(db_engine, claimer, reaped_tenants=frozenset({"a"})).reap()
    assert [(item.tenant_id, item.outcome) for item in reaped] == [("a", "requeued")]
    with session_scope(sessions) as session:
        statuses = {t: s for t, s in session.execute(select(Job.tenant_id, Job.status))}
    assert statuses == {"a": "queued", "b": "running"}
