"""What a worker does to a job it holds, and the reaper of jobs whose worker vanished.

Every write here is guarded by ``lease_owner`` and ``status='running'``: a worker that lost
its lease (the reaper requeued the job, another worker re-ran it) can neither report
progress nor finish the job, so no job is finished twice. These statements are system
scope (by job id, across tenants) and are never reachable from a request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.queue import segments


@dataclass(frozen=True)
class LeaseState:
    """What a renewal found: whether the lease is still ours, and whether to stop."""

    held: bool
    cancel_requested: bool


def load_claimed(session: Session, job_id: uuid.UUID, owner: str) -> Job | None:
    """The job row a worker just claimed (None when the claim was lost meanwhile)."""
    stmt = select(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.status == "running")
    return session.scalars(stmt).one_or_none()


def renew(session: Session, job_id: uuid.UUID, owner: str, lease_seconds: float) -> LeaseState:
    now = utcnow()
    held = _guarded_update(
        session,
        job_id,
        owner,
        lease_expires_at=now + timedelta(seconds=lease_seconds),
        heartbeat_at=now,
    )
    return _state(session, job_id, held)


def report_progress(
    session: Session,
    job_id: uuid.UUID,
    owner: str,
    progress: float,
    stage: str,
    detail: dict[str, Any] | None = None,
) -> LeaseState:
    values: dict[str, Any] = {"progress": max(0.0, min(1.0, progress)), "stage": stage[:64]}
    if detail is not None:
        values["progress_detail"] = detail
    held = _guarded_update(session, job_id, owner, **values)
    return _state(session, job_id, held)


def _state(session: Session, job_id: uuid.UUID, held: bool) -> LeaseState:
    if not held:
        return LeaseState(held=False, cancel_requested=True)
    cancel = session.execute(select(Job.cancel_requested).where(Job.id == job_id)).scalar_one()
    return LeaseState(held=True, cancel_requested=bool(cancel))


def release(session: Session, job_id: uuid.UUID, owner: str) -> bool:
    """Give a held job back to the queue (graceful shutdown): not a failed attempt."""
    return _guarded_update(
        session,
        job_id,
        owner,
        status="queued",
        stage="requeued",
        progress=0.0,
        attempts=Job.attempts - 1,
        lease_owner=None,
        lease_expires_at=None,
    )


def finish(session: Session, job_id: uuid.UUID, owner: str, status: str, **values: Any) -> bool:
    """Move a held job to a terminal status; False when the lease was lost (nothing done)."""
    return _guarded_update(
        session,
        job_id,
        owner,
        status=status,
        finished_at=utcnow(),
        lease_owner=None,
        lease_expires_at=None,
        **values,
    )


def _guarded_update(session: Session, job_id: uuid.UUID, owner: str, **values: Any) -> bool:
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.lease_owner == owner, Job.status == "running")
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Reaped:
    """One job whose lease had expired, and what became of it."""

    job_id: uuid.UUID
    tenant_id: str
    outcome: str  # "requeued" | "failed"


def requeue_expired(
    session: Session, now: datetime | None = None, tenants: frozenset[str] | None = None
) -> list[Reaped]:
    """Requeue running jobs whose lease expired; fail those out of attempts. Only
    ``tenants``' jobs when given (a tenant-bound process touches no other tenant's).

    Run at start-up (jobs left running by a crash) and periodically after that.
    """
    now = now or utcnow()
    stmt = select(Job.id, Job.tenant_id, Job.attempts, Job.max_attempts, Job.parent_id).where(
        Job.status == "running", Job.lease_expires_at < now
    )
    if tenants is not None:
        stmt = stmt.where(Job.tenant_id.in_(sorted(tenants)))
    expired = session.execute(stmt).all()
    # The segmented jobs of expired parts first: the lock order of segments.lock_jobs.
    segments.lock_jobs(session, (parent_id for *_, parent_id in expired))
    reaped: list[Reaped] = []
    for job_id, tenant_id, attempts, max_attempts, parent_id in expired:
        guard = (Job.id == job_id, Job.status == "running", Job.lease_expires_at < now)
        if attempts >= max_attempts:
            values: dict[str, Any] = {
                "status": "failed",
                "finished_at": now,
                "error_type": "lease-expired",
                "error_detail": lease_expired_detail(attempts),
                "stage": "failed",
            }
            outcome = "failed"
        else:
            values = {"status": "queued", "stage": "requeued", "progress": 0.0}
            outcome = "requeued"
        result = session.execute(
            update(Job)
            .where(*guard)
            .values(lease_owner=None, lease_expires_at=None, **values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount:  # type: ignore[attr-defined]
            reaped.append(Reaped(job_id, tenant_id, outcome))
            if parent_id is not None and outcome == "failed":
                reaped += _fail_job_of_part(session, job_id, values)
    return reaped


def _fail_job_of_part(session: Session, part_id: uuid.UUID, values: dict[str, Any]) -> list[Reaped]:
    """A part out of attempts fails the segmented job it belongs to (reported as reaped too,
    so the reaper's hook meters the job: its parts' compute seconds, none for the lost
    run)."""
    part = session.get(Job, part_id)
    assert part is not None
    ended = segments.part_ended(
        session, part, "failed", 0.0, values["error_type"], values["error_detail"]
    )
    if ended.change != "failed":
        return []
    return [Reaped(ended.job.id, ended.job.tenant_id, "failed")]


def lease_expired_detail(attempts: int) -> str:
    """Why a job the reaper failed failed."""
    return f"the worker running this job stopped responding on each of {attempts} attempts"
