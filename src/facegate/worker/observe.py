"""What a finished job reports: its metrics and the audit event of its moderation
decision (``worker.pool`` calls them when it ends a job)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.observability import metrics
from facegate.observability.audit import MODERATION_ALLOWED, MODERATION_REFUSED, record_audit
from facegate.usage.service import Consumption

#: The actor of moderation events: the service itself, on the tenant's policy.
MODERATION_ACTOR = "system:moderation"


def audit_moderation(
    session: Session, job: Job, allowed: Sequence[str], refused: str | None = None
) -> None:
    """Audit a job's moderation decision (in the transaction that ends the job): what was
    ``refused`` (the job failed), or what was checked and ``allowed`` (nothing when the
    tenant's moderation is off)."""
    if refused is not None:
        details: dict[str, object] = {"refused": refused, "allowed": list(allowed)}
        action = MODERATION_REFUSED
    elif allowed:
        details, action = {"allowed": list(allowed)}, MODERATION_ALLOWED
    else:
        return
    record_audit(
        session,
        MODERATION_ACTOR,
        action,
        f"job:{job.id}",
        {**details, "kind": job.kind},
        tenant_id=job.tenant_id,
    )


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def observe_finished(job: Job, status: str, consumption: Consumption) -> None:
    """Metrics of a job a worker just moved to ``status`` (after the commit)."""
    metrics.job_finished(
        job.tenant_id,
        job.kind,
        status,
        queue_wait_seconds=_seconds(job.created_at, job.started_at),
        duration_seconds=_seconds(job.started_at, utcnow()),
        compute_seconds=consumption.compute_seconds,
        device=consumption.device,
        output_pixels=consumption.output_pixels,
    )
