"""What the job path reports: metrics of a submission and of a finished job, and the audit
event of a submission that uses sensitive processors. Called by ``jobs.endpoints`` and
``jobs.worker`` (one line each), so those modules stay about jobs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from facegate.db import utcnow
from facegate.jobs.models import Job
from facegate.observability import metrics
from facegate.observability.audit import SENSITIVE_PROCESSORS, record_audit, sensitive_processors
from facegate.tenancy.principal import Principal
from facegate.usage.service import Consumption


def audit_submission(session: Session, principal: Principal, job: Job) -> None:
    """Audit a job that asks for face_enhancer, age_modifier or expression_restorer (in the
    submission's transaction: no job without its event, no event without its job)."""
    used = sensitive_processors(list(job.spec.get("processors") or []))
    if used:
        record_audit(
            session,
            principal,
            SENSITIVE_PROCESSORS,
            f"job:{job.id}",
            {"processors": used, "kind": job.kind},
        )


def observe_submitted(job: Job) -> None:
    metrics.job_submitted(job.tenant_id, job.kind)


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
