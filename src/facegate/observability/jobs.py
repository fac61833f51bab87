"""What the job path reports: metrics of a submission and of a finished job, and the audit
event of a submission that uses sensitive processors. Called by ``jobs.endpoints`` and
``jobs.worker`` (one line each), so those modules stay about jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.engine.processors.registry import sensitive_processors
from facegate.jobs.tables import Job
from facegate.observability import metrics
from facegate.observability.audit import (
    CONSENT_ATTEST,
    MODERATION_ALLOWED,
    MODERATION_REFUSED,
    SENSITIVE_PROCESSORS,
    record_audit,
)
from facegate.tenancy.principal import Principal
from facegate.usage.service import Consumption


def audit_submission(
    session: Session, principal: Principal, job: Job, input_hashes: Mapping[str, str]
) -> None:
    """Audit a job that uses a sensitive processor (those that declare it, see
    ``engine.processors.registry.sensitive_processors``) with the sha256 of each input, in
    the submission's transaction: no job without its event, no event without its job. The
    consent attestations the job references are audited too (``consent.attest``)."""
    if job.consent:
        record_audit(session, principal, CONSENT_ATTEST, f"job:{job.id}", {"consent": job.consent})
    used = sensitive_processors(list(job.spec.get("processors") or []))
    if used:
        details: dict[str, object] = {
            "processors": used,
            "kind": job.kind,
            "inputs": dict(input_hashes),
        }
        record_audit(session, principal, SENSITIVE_PROCESSORS, f"job:{job.id}", details)


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
