"""What a submission reports: its metric, and the audit events of a job that uses
sensitive processors or references consent attestations (``jobs.endpoints`` calls them)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from facegate.engine.processors.registry import sensitive_processors
from facegate.jobs.tables import Job
from facegate.observability import metrics
from facegate.observability.audit import CONSENT_ATTEST, SENSITIVE_PROCESSORS, record_audit
from facegate.principal import Principal


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


def observe_submitted(job: Job) -> None:
    metrics.job_submitted(job.tenant_id, job.kind)
