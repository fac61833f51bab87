"""What a finished job reports: its metrics (``worker.pool`` calls it when it ends a job;
the moderation audit is written with the outcome, facegate.queue.outcomes)."""

from __future__ import annotations

from datetime import datetime

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.observability import metrics
from facegate.usage.service import Consumption


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
