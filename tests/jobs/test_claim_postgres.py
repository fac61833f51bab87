"""The cluster claim on PostgreSQL: the fair order, caps under parallel claims, device
limits, served tenants, a busy tenant lock, and the NOTIFY a queued job sends."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from jobfactories import (
    claim_concurrently,
    create_database,
    create_job,
    create_tenant,
    drop_database,
    seconds_ago,
)
from jobfactories import sessions_of as sessions_for
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import OperationalError

from facegate.database import create_engine_from_url, session_scope
from facegate.jobs.tables import Job
from facegate.queue.claim import Claim
from facegate.queue.postgres import TENANT_LOCK_NAMESPACE, PostgresClaimer, ServedTenants

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = create_database("postgres", tmp_path)
    yield engine
    drop_database(engine)


def claim_all(claimer: PostgresClaimer, count: int, **kwargs: bool) -> list[Claim | None]:
    return [claimer.claim("w", lease_seconds=30, **kwargs) for _ in range(count)]


def test_fair_order(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "big", max_concurrent_jobs=10)
        create_tenant(session, "small", max_concurrent_jobs=10)
        big_old = create_job(session, "big", created_at=seconds_ago(60)).id
        big_new = create_job(session, "big", created_at=seconds_ago(30)).id
        small = create_job(session, "small", created_at=seconds_ago(1)).id
        big_urgent = create_job(session, "big", priority=5, created_at=seconds_ago(2)).id
    order = claim_all(PostgresClaimer(pg_engine), 5)
    assert [c.job_id if c else None for c in order] == [big_urgent, small, big_old, big_new, None]
    first = order[0]
    assert first is not None
    assert (first.attempt, first.lease_owner, first.tenant_id) == (1, "w", "big")


def test_parallel_claims_never_overshoot_caps(pg_engine: Engine) -> None:
    caps = {"a": 1, "b": 2, "c": 5}
    with session_scope(sessions_for(pg_engine)) as session:
        for tenant, cap in caps.items():
            create_tenant(session, tenant, max_concurrent_jobs=cap)
            for _ in range(20):
                create_job(session, tenant)
    claimer = PostgresClaimer(pg_engine)
    claims = claim_concurrently(claimer, threads=8, rounds=6)
    assert Counter(c.tenant_id for c in claims) == caps
    assert len({c.job_id for c in claims}) == len(claims)


def test_parallel_batch_claims_never_overshoot_caps(pg_engine: Engine) -> None:
    caps = {"a": 1, "b": 3, "c": 7, "d": 12}
    with session_scope(sessions_for(pg_engine)) as session:
        for tenant, cap in caps.items():
            create_tenant(session, tenant, max_concurrent_jobs=cap)
            for _ in range(30):
                create_job(session, tenant)
    claimer = PostgresClaimer(pg_engine)
    claims = claim_concurrently(claimer, threads=8, rounds=4, batch=5)
    assert Counter(c.tenant_id for c in claims) == caps
    assert len({c.job_id for c in claims}) == len(claims)
    with session_scope(sessions_for(pg_engine)) as session:
        running = session.scalars(select(Job.tenant_id).where(Job.status == "running")).all()
    assert Counter(running) == caps


def test_a_batch_waits_for_a_busy_tenant_instead_of_coming_back_empty(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "only", max_concurrent_jobs=5)
        for _ in range(3):
            create_job(session, "only")
    claimer = PostgresClaimer(pg_engine)
    with pg_engine.begin() as holder:  # another worker admitting "only", for too long
        holder.execute(
            text("SELECT pg_advisory_xact_lock(:ns, hashtext('only'))"),
            {"ns": TENANT_LOCK_NAMESPACE},
        )
        assert claimer.claim_many("w", limit=3, lease_seconds=30) == []  # gave up waiting
    claimed = claimer.claim_many("w", limit=3, lease_seconds=30)
    assert [c.tenant_id for c in claimed] == ["only"] * 3


def test_device_limit_caps_device_workers_only(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "a", max_concurrent_jobs=3, device_limit=1)
        for _ in range(5):
            create_job(session, "a")
    claimer = PostgresClaimer(pg_engine)
    on_device = claim_all(claimer, 2, uses_device=True)
    assert on_device[0] is not None
    assert on_device[1] is None  # its one device is taken
    on_cpu = claim_all(claimer, 3)
    assert [c is not None for c in on_cpu] == [True, True, False]  # 3 concurrent in all
    with session_scope(sessions_for(pg_engine)) as session:
        held = session.scalars(select(Job.holds_device).where(Job.status == "running")).all()
    assert sorted(held) == [False, False, True]


def test_served_tenants_and_logical_only(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "shared")
        create_tenant(session, "vip").isolation = "physical"
        create_tenant(session, "other")
        for tenant in ("shared", "vip", "other"):
            create_job(session, tenant)
    dedicated = PostgresClaimer(pg_engine, ServedTenants(frozenset({"vip"})))
    assert [c.tenant_id if c else None for c in claim_all(dedicated, 2)] == ["vip", None]
    shared = PostgresClaimer(pg_engine, ServedTenants(logical_only=True))
    claimed = {c.tenant_id for c in claim_all(shared, 3) if c}
    assert claimed == {"shared", "other"}


def test_suspended_tenant_is_not_claimed(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "gone").status = "suspended"
        create_job(session, "gone")
    assert PostgresClaimer(pg_engine).claim("w", lease_seconds=30) is None


def test_busy_tenant_lock_moves_on_to_the_next_tenant(pg_engine: Engine) -> None:
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "first")
        create_tenant(session, "second")
        create_job(session, "first", created_at=seconds_ago(10))
        create_job(session, "second")
    claimer = PostgresClaimer(pg_engine)
    with pg_engine.begin() as holder:  # another worker in the middle of admitting "first"
        holder.execute(
            text("SELECT pg_advisory_xact_lock(:ns, hashtext('first'))"),
            {"ns": TENANT_LOCK_NAMESPACE},
        )
        claim = claimer.claim("w", lease_seconds=30)
        assert claim is not None
        assert claim.tenant_id == "second"
    claim = claimer.claim("w", lease_seconds=30)
    assert claim is not None
    assert claim.tenant_id == "first"


def test_queued_job_notifies_listeners_at_commit(pg_engine: Engine) -> None:
    url = pg_engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN facegate_jobs")
        with session_scope(sessions_for(pg_engine)) as session:
            create_tenant(session, "t")
            create_job(session, "t")
            create_job(session, "t", status="running")  # not claimable: no notification
        payloads = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
        assert payloads == ["t"]


def test_a_dropped_connection_fails_one_claim_and_leaves_the_pool_usable(
    pg_engine: Engine,
) -> None:
    # The claim runs on the pooled psycopg connection itself (autocommit, prepared): when
    # the server drops it, the claim raises SQLAlchemy's OperationalError like any other
    # query, the dead connection leaves the pool, and the next claim simply works.
    with session_scope(sessions_for(pg_engine)) as session:
        create_tenant(session, "acme", max_concurrent_jobs=5)
        first, second = create_job(session, "acme").id, create_job(session, "acme").id
    # As in `facegate worker`: no pre-ping, so the claim meets the dead connection itself.
    url = pg_engine.url.render_as_string(hide_password=False)
    worker_engine = create_engine_from_url(url, pool_size=1, max_overflow=0, pool_pre_ping=False)
    try:
        claimer = PostgresClaimer(worker_engine)
        got = claimer.claim("w", lease_seconds=30)
        assert got is not None
        assert got.job_id == first
        with worker_engine.connect() as conn:  # the pool's only connection: the claim's
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with pg_engine.begin() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(OperationalError):
            claimer.claim("w", lease_seconds=30)
        again = claimer.claim("w", lease_seconds=30)
        assert again is not None
        assert again.job_id == second
        # The connection went back in transaction mode: a rolled-back change is gone.
        with worker_engine.connect() as conn:
            conn.execute(text("CREATE TEMP TABLE probe (x int)"))
            conn.rollback()
            assert conn.execute(text("SELECT to_regclass('pg_temp.probe')")).scalar_one() is None
    finally:
        worker_engine.dispose()
