"""The fair order has one definition (facegate.queue.fairness.FAIR_ORDER): the PostgreSQL
claim function installed by the migrations is its rendering, and the three claims — the
pure plan (in memory), the serialised claim (SQLite) and the cluster claim (PostgreSQL) —
hand out the same jobs in the same order, batch or not, on the same scenarios."""

from __future__ import annotations

import importlib
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from jobfactories import create_database, drop_database, sessions_of
from sqlalchemy import Engine, delete

from facegate.database import session_scope, utcnow
from facegate.jobs.tables import Job
from facegate.queue import postgres
from facegate.queue.claim import JobClaimer, LockingClaimer
from facegate.queue.fairness import (
    ANY_FIT,
    FAIR_ORDER,
    Fit,
    QueuedJob,
    SortTerm,
    TenantLimits,
    TenantLoad,
    plan_claims,
)
from facegate.queue.postgres import PostgresClaimer, claim_function_sql
from facegate.tenancy.tables import Policy, Tenant

MIGRATION = "facegate.migrations.versions.0029_claim_first_start"


def test_the_migrated_claim_function_is_the_rendered_fair_order() -> None:
    frozen = importlib.import_module(MIGRATION).CLAIM_FUNCTION
    assert frozen == claim_function_sql(), (
        "FAIR_ORDER or the claim function changed: add a migration installing "
        "facegate.queue.postgres.claim_function_sql() and point this test at it"
    )


def test_a_changed_order_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Oldest first before priority: the rendering differs from the installed function.
    changed = (FAIR_ORDER[0], SortTerm("created_at"), SortTerm("priority", descending=True))
    monkeypatch.setattr(postgres, "FAIR_ORDER", (*changed, FAIR_ORDER[3]))
    assert importlib.import_module(MIGRATION).CLAIM_FUNCTION != claim_function_sql()


@dataclass
class Scenario:
    """Tenants with caps, running jobs (some holding a device) and a queue, a claim size."""

    limits: dict[str, TenantLimits | None]  # None: suspended
    loads: dict[str, TenantLoad]
    queued: list[QueuedJob]
    limit: int
    uses_device: bool
    fit: Fit = ANY_FIT


def make_scenario(rng: random.Random) -> Scenario:
    now = utcnow()
    tenants = [f"t{n}" for n in range(rng.randint(1, 6))]
    limits: dict[str, TenantLimits | None] = {}
    loads: dict[str, TenantLoad] = {}
    queued: list[QueuedJob] = []
    for tenant in tenants:
        cap = rng.randint(1, 5)
        suspended = rng.random() < 0.15
        limits[tenant] = None if suspended else TenantLimits(cap, rng.randint(1, 3))
        running = rng.randint(0, cap)
        loads[tenant] = TenantLoad(running, rng.randint(0, running))
        for _ in range(rng.randint(0, 7)):
            # few distinct priorities and instants: ties broken by the later terms
            created = now - timedelta(seconds=rng.choice([5, 10, 10, 20]))
            queued.append(
                QueuedJob(
                    uuid.uuid4(),
                    tenant,
                    rng.choice([0, 0, 1, 5]),
                    created,
                    rng.choice([None, 0.5, 2.0, 60.0]),
                    rng.choice([None, 100, 400, 1000]),
                )
            )
    fit = Fit(rng.choice([None, None, 2.0]), rng.choice([None, None, 500, 1500]))
    return Scenario(limits, loads, queued, rng.randint(1, 12), rng.random() < 0.3, fit)


def store(engine: Engine, scenario: Scenario) -> None:
    with session_scope(sessions_of(engine)) as session:
        session.execute(delete(Job))
        session.execute(delete(Policy))
        session.execute(delete(Tenant))
        session.flush()
        for tenant_id, limits in scenario.limits.items():
            tenant = Tenant(id=tenant_id, name=tenant_id)
            tenant.status = "suspended" if limits is None else "active"
            caps = limits or TenantLimits(1, 1)
            tenant.policy = Policy(
                max_concurrent_jobs=caps.max_concurrent_jobs, device_limit=caps.device_limit
            )
            session.add(tenant)
        session.flush()
        for tenant_id, load in scenario.loads.items():
            for n in range(load.running):
                running = _job(tenant_id, "running", holds_device=n < load.devices)
                running.lease_owner = "another-worker"
                session.add(running)
            # a job waiting for its parts (no lease owner) takes no slot of its tenant
            session.add(_job(tenant_id, "running"))
        for job in scenario.queued:
            session.add(_job(job.tenant_id, "queued", job))


def _job(tenant_id: str, status: str, queued: QueuedJob | None = None, **fields: object) -> Job:
    return Job(
        id=queued.id if queued else uuid.uuid4(),
        tenant_id=tenant_id,
        status=status,
        kind="image",
        spec={},
        inputs=[],
        priority=queued.priority if queued else 0,
        created_at=queued.created_at if queued else utcnow(),
        estimated_seconds=queued.estimated_seconds if queued else None,
        memory_bytes=queued.memory_bytes if queued else None,
        **fields,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def claimer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, JobClaimer]]:
    engine = create_database(request.param, tmp_path)
    made: JobClaimer = (
        PostgresClaimer(engine) if request.param == "postgres" else LockingClaimer(engine)
    )
    yield engine, made
    drop_database(engine)


def test_every_claim_follows_the_one_plan(claimer: tuple[Engine, JobClaimer]) -> None:
    engine, claim = claimer
    rng = random.Random(19)
    for _ in range(40):
        scenario = make_scenario(rng)
        store(engine, scenario)
        planned = plan_claims(
            scenario.queued,
            scenario.loads,
            scenario.limits,
            limit=scenario.limit,
            uses_device=scenario.uses_device,
            fit=scenario.fit,
        )
        claimed = claim.claim_many(
            "w",
            limit=scenario.limit,
            lease_seconds=30,
            uses_device=scenario.uses_device,
            fit=scenario.fit,
        )
        assert [(c.job_id, c.tenant_id) for c in claimed] == [
            (c.id, c.tenant_id) for c in planned
        ], scenario
