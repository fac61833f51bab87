"""Fair claim: which queued jobs a free worker takes next (the rule: facegate.queue.fairness).

The decision and the update happen in one serialised transaction so N workers (threads or
processes) can never over-admit a tenant: SQLite takes its write lock up front
(``BEGIN IMMEDIATE``); PostgreSQL takes one transaction-scoped advisory lock. The cluster
claim (facegate.queue.postgres) implements the same ``JobClaimer`` protocol with
per-tenant locks instead.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection, Engine, func, select, text, update
from sqlalchemy.sql.elements import ColumnElement

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.queue.fairness import (
    ANY_FIT,
    FALLBACK_LIMITS,
    QUEUE_ORDER,
    Fit,
    QueuedJob,
    TenantLimits,
    TenantLoad,
    plan_claims,
)
from facegate.tenancy.tables import Policy, Tenant

# Arbitrary constant naming the claim lock among PostgreSQL advisory locks.
CLAIM_LOCK_KEY = 0x66676A62  # "fgjb"


@dataclass(frozen=True)
class Claim:
    """A job a worker now holds, until ``lease_expires_at`` unless renewed; ``memory_bytes``:
    its estimated peak (facegate.jobs.cost; 0 when unknown), which the worker counts against
    its memory budget while it holds the job."""

    job_id: uuid.UUID
    tenant_id: str
    attempt: int
    lease_owner: str
    lease_expires_at: datetime
    memory_bytes: int = 0


class JobClaimer(Protocol):
    """Hands the next jobs to a worker: up to ``limit`` in fair order, in one round trip."""

    def claim_many(
        self,
        worker_id: str,
        *,
        limit: int,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> list[Claim]: ...

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> Claim | None: ...


class ClaimOne:
    """``claim`` as a batch of one (mixed into every claimer)."""

    def claim_many(
        self,
        worker_id: str,
        *,
        limit: int,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> list[Claim]:
        raise NotImplementedError

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> Claim | None:
        claims = self.claim_many(
            worker_id, limit=1, lease_seconds=lease_seconds, uses_device=uses_device, fit=fit
        )
        return claims[0] if claims else None


def queue_order() -> list[ColumnElement[object]]:
    """:data:`facegate.queue.fairness.QUEUE_ORDER` on the jobs table."""
    columns = {"id": Job.id, "priority": Job.priority, "created_at": Job.created_at}
    return [
        columns[term.field].desc() if term.descending else columns[term.field].asc()
        for term in QUEUE_ORDER
    ]


class LockingClaimer(ClaimOne):
    """JobClaimer for SQLite and PostgreSQL: one serialised transaction per claim."""

    def __init__(self, engine: Engine, tenants: frozenset[str] | None = None) -> None:
        self.engine = engine
        self.tenants = tenants  # only these tenants' jobs (a tenant-bound server); None: all

    def claim_many(
        self,
        worker_id: str,
        *,
        limit: int,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> list[Claim]:
        with self.engine.connect() as conn:
            conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK_KEY}
                    )
                return self._claim_locked(conn, worker_id, limit, lease_seconds, uses_device, fit)

    def _claim_locked(
        self,
        conn: Connection,
        worker_id: str,
        limit: int,
        lease_seconds: float,
        uses_device: bool,
        fit: Fit,
    ) -> list[Claim]:
        queued = _queued_jobs(conn, self.tenants, limit, fit)
        if not queued:
            return []
        tenant_ids = {job.tenant_id for job in queued}
        chosen = plan_claims(
            queued,
            _tenant_loads(conn, tenant_ids),
            _tenant_limits(conn, tenant_ids),
            limit=limit,
            uses_device=uses_device,
            fit=fit,
        )
        if not chosen:
            return []
        now = utcnow()
        expires = now + timedelta(seconds=lease_seconds)
        rows = conn.execute(
            update(Job)
            .where(Job.id.in_([c.id for c in chosen]), Job.status == "queued")
            .values(
                status="running",
                attempts=Job.attempts + 1,
                lease_owner=worker_id,
                lease_expires_at=expires,
                heartbeat_at=now,
                # when a worker first started it (a retry, a segmented job's assembly keep it)
                started_at=func.coalesce(Job.started_at, now),
                progress=0.0,
                stage="claimed",
                holds_device=uses_device,
            )
            .returning(Job.id, Job.attempts)
        )
        attempts = {row[0]: int(row[1]) for row in rows}
        memory = {job.id: job.memory_bytes or 0 for job in queued}
        return [
            Claim(c.id, c.tenant_id, attempts[c.id], worker_id, expires, memory[c.id])
            for c in chosen
            if c.id in attempts  # all of them: nothing else claims under the lock
        ]


def _queued_jobs(
    conn: Connection, tenants: frozenset[str] | None, limit: int, fit: Fit
) -> list[QueuedJob]:
    """The first ``limit`` queued jobs of each tenant that ``fit``'s lane admits, in its
    queue order."""
    position = func.row_number().over(partition_by=Job.tenant_id, order_by=queue_order())
    queued = select(
        Job.id,
        Job.tenant_id,
        Job.priority,
        Job.created_at,
        Job.estimated_seconds,
        Job.memory_bytes,
        position.label("position"),
    ).where(Job.status == "queued")
    if tenants is not None:
        queued = queued.where(Job.tenant_id.in_(sorted(tenants)))
    if fit.max_seconds is not None:
        queued = queued.where(Job.estimated_seconds <= fit.max_seconds)
    ranked = queued.subquery()
    rows = conn.execute(
        select(
            ranked.c.id,
            ranked.c.tenant_id,
            ranked.c.priority,
            ranked.c.created_at,
            ranked.c.estimated_seconds,
            ranked.c.memory_bytes,
        ).where(ranked.c.position <= limit)
    )
    return [QueuedJob(*row) for row in rows]


def _tenant_loads(conn: Connection, tenant_ids: set[str]) -> dict[str, TenantLoad]:
    """Each tenant's jobs on a worker now (a job waiting for its parts holds no worker: it
    has no lease owner)."""
    rows = conn.execute(
        select(Job.tenant_id, func.count(), func.count().filter(Job.holds_device))
        .where(
            Job.status == "running",
            Job.lease_owner.is_not(None),
            Job.tenant_id.in_(sorted(tenant_ids)),
        )
        .group_by(Job.tenant_id)
    )
    return {row[0]: TenantLoad(int(row[1]), int(row[2])) for row in rows}


def _tenant_limits(conn: Connection, tenant_ids: set[str]) -> dict[str, TenantLimits | None]:
    rows = conn.execute(
        select(Tenant.id, Tenant.status, Policy.max_concurrent_jobs, Policy.device_limit)
        .outerjoin(Policy, Policy.tenant_id == Tenant.id)
        .where(Tenant.id.in_(sorted(tenant_ids)))
    )
    limits: dict[str, TenantLimits | None] = {}
    for tenant_id, status, max_concurrent, device_limit in rows:
        if status != "active":
            limits[tenant_id] = None
        elif max_concurrent is None:
            limits[tenant_id] = FALLBACK_LIMITS
        else:
            limits[tenant_id] = TenantLimits(int(max_concurrent), int(device_limit))
    return limits
