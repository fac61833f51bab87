"""Fair claim: the rule (pure) and the serialised transaction (SQLite and PostgreSQL)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

from jobfactories import claim_concurrently, create_job, create_tenant, seconds_ago, sessions_of
from sqlalchemy import Engine, select

from facegate.database import session_scope, utcnow
from facegate.jobs.tables import Job
from facegate.queue.claim import LockingClaimer
from facegate.queue.fairness import QueuedJob, TenantLimits, TenantLoad, plan_claims


def head(tenant: str, priority: int = 0, age: float = 0.0) -> QueuedJob:
    return QueuedJob(uuid.uuid4(), tenant, priority, utcnow() - timedelta(seconds=age))


def first(
    jobs: list[QueuedJob],
    running: dict[str, int],
    limits: dict[str, TenantLimits | None],
    *,
    devices: dict[str, int] | None = None,
    uses_device: bool = False,
) -> QueuedJob | None:
    loads = {t: TenantLoad(n, (devices or {}).get(t, 0)) for t, n in running.items()}
    chosen = plan_claims(jobs, loads, limits, uses_device=uses_device)
    return next(job for job in jobs if job.id == chosen[0].id) if chosen else None


def test_fewest_running_tenant_first_then_priority_then_oldest() -> None:
    limits: dict[str, TenantLimits | None] = {t: TenantLimits(5, 5) for t in "abc"}
    a, b, c = head("a", priority=9, age=100), head("b", age=10), head("c", age=50)
    assert first([a, b, c], {"a": 2, "b": 1, "c": 1}, limits) == c  # older among b, c
    assert first([a, b, c], {"a": 1, "b": 1, "c": 1}, limits) == a  # priority
    assert first([a, b, c], {"a": 0, "b": 1, "c": 1}, limits) == a  # fewest running


def test_caps_and_suspended_tenants() -> None:
    a, b = head("a", age=100), head("b")
    limits: dict[str, TenantLimits | None] = {"a": TenantLimits(2, 1), "b": TenantLimits(1, 1)}
    assert first([a, b], {"a": 2}, limits) == b
    assert first([a, b], {"a": 2, "b": 1}, limits) is None
    # a device worker also honours the device limit, counting the jobs that hold a device
    assert first([a], {"a": 1}, limits) == a
    assert first([a], {"a": 1}, limits, devices={"a": 1}, uses_device=True) is None
    assert first([a], {"a": 1}, limits, uses_device=True) == a
    assert first([a, b], {}, {"a": None, "b": TenantLimits(1, 1)}) == b


def test_a_batch_merges_the_tenants_queues_as_single_claims_would() -> None:
    limits: dict[str, TenantLimits | None] = {"a": TenantLimits(3, 1), "b": TenantLimits(9, 1)}
    a_jobs = [head("a", age=90 - i) for i in range(5)]
    b_jobs = [head("b", age=10 - i) for i in range(5)]
    loads = {"b": TenantLoad(1)}
    batch = plan_claims(a_jobs + b_jobs, loads, limits, limit=6)
    # a (0 running) takes its oldest; then a and b tie at 1 running and a's is older; a's
    # third job makes 3 = its cap; b fills the rest
    assert [c.id for c in batch] == [
        a_jobs[0].id,
        a_jobs[1].id,
        b_jobs[0].id,
        a_jobs[2].id,
        b_jobs[1].id,
        b_jobs[2].id,
    ]
    assert [c.running for c in batch] == [0, 1, 1, 2, 2, 3]


def test_claim_order_on_the_database(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "big", max_concurrent_jobs=10)
        create_tenant(session, "small", max_concurrent_jobs=10)
        big_old = create_job(session, "big", created_at=seconds_ago(60)).id
        big_new = create_job(session, "big", created_at=seconds_ago(30)).id
        small = create_job(session, "small", created_at=seconds_ago(1)).id
        big_urgent = create_job(session, "big", priority=5, created_at=seconds_ago(2)).id
    claimer = LockingClaimer(db_engine)
    order = [claimer.claim("w", lease_seconds=30) for _ in range(5)]
    # big (0 running): its urgent job; then small (0 running < 1); then big by age
    assert [c.job_id if c else None for c in order] == [big_urgent, small, big_old, big_new, None]
    first = order[0]
    assert first is not None
    assert first.attempt == 1
    assert first.lease_owner == "w"
    with session_scope(sessions) as session:
        job = session.scalars(select(Job).where(Job.id == big_urgent)).one()
        assert job.status == "running"
        assert job.lease_expires_at is not None


def test_parallel_claims_never_overshoot_a_cap(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "a", max_concurrent_jobs=2)
        create_tenant(session, "b", max_concurrent_jobs=3)
        for _ in range(10):
            create_job(session, "a")
            create_job(session, "b")
    claimer = LockingClaimer(db_engine)
    claims = claim_concurrently(claimer, threads=8, rounds=3)
    assert Counter(c.tenant_id for c in claims) == {"a": 2, "b": 3}
    assert len({c.job_id for c in claims}) == len(claims)


def test_suspended_tenant_is_not_claimed(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with session_scope(sessions) as session:
        create_tenant(session, "gone").status = "suspended"
        create_job(session, "gone")
    assert LockingClaimer(db_engine).claim("w", lease_seconds=30) is None
