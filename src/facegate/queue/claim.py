"""Fair claim: which queued job a free worker takes next.

Among queued jobs whose tenant is below its concurrency cap (and its device limit when the
worker runs on an accelerator), take the job of the tenant with the fewest running jobs,
then the highest priority, then the oldest. The decision and the update happen in one
serialised transaction so N workers (threads or processes) can never over-admit a tenant:
SQLite takes its write lock up front (``BEGIN IMMEDIATE``); PostgreSQL takes one
transaction-scoped advisory lock. A cluster variant with ``FOR UPDATE SKIP LOCKED`` can
implement the same ``JobClaimer`` protocol.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection, Engine, func, select, text, update

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.tenancy.tables import Policy, Tenant

# Arbitrary constant naming the claim lock among PostgreSQL advisory locks.
CLAIM_LOCK_KEY = 0x66676A62  # "fgjb"


@dataclass(frozen=True)
class TenantLimits:
    """The caps the claim enforces for one tenant."""

    max_concurrent_jobs: int
    device_limit: int

    def cap(self, uses_device: bool) -> int:
        return (
            min(self.max_concurrent_jobs, self.device_limit)
            if uses_device
            else (self.max_concurrent_jobs)
        )


#: Caps of a tenant that has no policy row (should not happen; be conservative).
FALLBACK_LIMITS = TenantLimits(max_concurrent_jobs=1, device_limit=1)


@dataclass(frozen=True)
class QueueHead:
    """The best queued job of one tenant (highest priority, then oldest)."""

    job_id: uuid.UUID
    tenant_id: str
    priority: int
    created_at: datetime


@dataclass(frozen=True)
class Claim:
    """A job a worker now holds, until ``lease_expires_at`` unless renewed."""

    job_id: uuid.UUID
    tenant_id: str
    attempt: int
    lease_owner: str
    lease_expires_at: datetime


class JobClaimer(Protocol):
    """Hands the next job to a worker, or None when nothing may run now."""

    def claim(
        self, worker_id: str, *, lease_seconds: float, uses_device: bool = False
    ) -> Claim | None: ...


def choose_job(
    heads: Iterable[QueueHead],
    running: Mapping[str, int],
    limits: Mapping[str, TenantLimits | None],
    *,
    uses_device: bool = False,
) -> QueueHead | None:
    """The fair choice among the tenants' queue heads (pure; the rule in one place).

    ``limits`` maps a tenant to its caps, or to None when the tenant may not run jobs now
    (suspended); a tenant missing from it gets the conservative fallback.
    """
    eligible: list[QueueHead] = []
    for head in heads:
        tenant_limits = limits.get(head.tenant_id, FALLBACK_LIMITS)
        if tenant_limits is None:
            continue
        if running.get(head.tenant_id, 0) < tenant_limits.cap(uses_device):
            eligible.append(head)
    if not eligible:
        return None
    return min(
        eligible,
        key=lambda h: (running.get(h.tenant_id, 0), -h.priority, h.created_at, str(h.job_id)),
    )


class LockingClaimer:
    """JobClaimer for SQLite and PostgreSQL: one serialised transaction per claim."""

    def __init__(self, engine: Engine, tenants: frozenset[str] | None = None) -> None:
        self.engine = engine
        self.tenants = tenants  # only these tenants' jobs (a tenant-bound server); None: all

    def claim(
        self, worker_id: str, *, lease_seconds: float, uses_device: bool = False
    ) -> Claim | None:
        with self.engine.connect() as conn:
            conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK_KEY}
                    )
                return self._claim_locked(conn, worker_id, lease_seconds, uses_device)

    def _claim_locked(
        self, conn: Connection, worker_id: str, lease_seconds: float, uses_device: bool
    ) -> Claim | None:
        heads = _queue_heads(conn, self.tenants)
        if not heads:
            return None
        running = _running_counts(conn)
        limits = _tenant_limits(conn, {h.tenant_id for h in heads})
        chosen = choose_job(heads, running, limits, uses_device=uses_device)
        if chosen is None:
            return None
        now = utcnow()
        expires = now + timedelta(seconds=lease_seconds)
        result = conn.execute(
            update(Job)
            .where(Job.id == chosen.job_id, Job.status == "queued")
            .values(
                status="running",
                attempts=Job.attempts + 1,
                lease_owner=worker_id,
                lease_expires_at=expires,
                heartbeat_at=now,
                started_at=now,
                progress=0.0,
                stage="claimed",
            )
            .returning(Job.attempts)
        )
        attempt = result.scalar_one_or_none()
        if attempt is None:  # cannot happen under the lock; stay safe anyway
            return None
        return Claim(chosen.job_id, chosen.tenant_id, int(attempt), worker_id, expires)


def _queue_heads(conn: Connection, tenants: frozenset[str] | None) -> list[QueueHead]:
    rank = (
        func.row_number()
        .over(
            partition_by=Job.tenant_id,
            order_by=(Job.priority.desc(), Job.created_at.asc(), Job.id.asc()),
        )
        .label("rank")
    )
    queued = select(Job.id, Job.tenant_id, Job.priority, Job.created_at, rank).where(
        Job.status == "queued"
    )
    if tenants is not None:
        queued = queued.where(Job.tenant_id.in_(sorted(tenants)))
    ranked = queued.subquery()
    rows = conn.execute(
        select(ranked.c.id, ranked.c.tenant_id, ranked.c.priority, ranked.c.created_at).where(
            ranked.c.rank == 1
        )
    )
    return [QueueHead(row[0], row[1], row[2], row[3]) for row in rows]


def _running_counts(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        select(Job.tenant_id, func.count()).where(Job.status == "running").group_by(Job.tenant_id)
    )
    return {row[0]: int(row[1]) for row in rows}


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
