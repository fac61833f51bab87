"""Usage rules: what a finished job is billed for, and the per-period summary."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.usage.repository import SUMMED, UsageRepository


@dataclass(frozen=True)
class Consumption:
    """What a worker measured while running one job."""

    compute_seconds: float
    device: str
    frames: int = 0
    input_pixels: int = 0
    output_pixels: int = 0
    input_bytes: int = 0
    output_bytes: int = 0


def model_variant(spec: dict[str, Any]) -> str | None:
    """``processor=model`` pairs of the processors that chose a model (None: built-ins)."""
    options: dict[str, Any] = spec.get("processor_options") or {}
    chosen = [
        f"{name}={options[name]['model']}"
        for name in spec.get("processors") or []
        if isinstance(options.get(name), dict) and options[name].get("model")
    ]
    return ",".join(chosen)[:200] or None


def _seconds(start: datetime | None, end: datetime | None) -> float:
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())


def record_job_usage(
    session: Session,
    job: Job,
    status: str,
    consumption: Consumption,
    finished_at: datetime | None = None,
) -> bool:
    """Write the usage record of ``job`` in the caller's transaction (the one that moves the
    job to its terminal status). Idempotent on the job id: False when already recorded."""
    finished = finished_at or utcnow()
    return UsageRepository(session).insert_once(
        {
            "job_id": job.id,
            "tenant_id": job.tenant_id,
            "kind": job.kind,
            "status": status,
            "device": consumption.device,
            "compute_seconds": float(consumption.compute_seconds),
            "duration_seconds": _seconds(job.started_at, finished),
            "queue_wait_seconds": _seconds(job.created_at, job.started_at),
            "frames": consumption.frames,
            "input_pixels": consumption.input_pixels,
            "output_pixels": consumption.output_pixels,
            "input_bytes": consumption.input_bytes,
            "output_bytes": consumption.output_bytes,
            "processors": list(job.spec.get("processors") or []),
            "model_variant": model_variant(job.spec),
            "started_at": job.started_at,
            "finished_at": finished,
            "recorded_at": utcnow(),
        }
    )


def record_stream_usage(
    session: Session,
    stream_id: uuid.UUID,
    tenant_id: str,
    processors: list[str],
    consumption: Consumption,
    started_at: datetime,
    finished_at: datetime,
    seconds: float,
) -> None:
    """The usage record of a live stream (``kind`` ``stream``; ``duration_seconds``: the
    stream-seconds billed): made when it starts and rewritten at each checkpoint and at its
    end, so a process that dies mid-stream leaves the usage of its last checkpoint."""
    values = {
        "device": consumption.device,
        "compute_seconds": float(consumption.compute_seconds),
        "duration_seconds": float(seconds),
        "frames": consumption.frames,
        "input_pixels": consumption.input_pixels,
        "output_pixels": consumption.output_pixels,
        "finished_at": finished_at,
        "recorded_at": utcnow(),
    }
    repository = UsageRepository(session)
    inserted = repository.insert_once(
        {
            **values,
            "job_id": stream_id,
            "tenant_id": tenant_id,
            "kind": "stream",
            "status": "succeeded",
            "queue_wait_seconds": 0.0,
            "input_bytes": 0,
            "output_bytes": 0,
            "processors": processors,
            "model_variant": None,
            "started_at": started_at,
        }
    )
    if not inserted:
        repository.update_record(tenant_id, stream_id, values)


def summarise(
    session: Session,
    tenant_id: str | None,
    start: datetime | None,
    end: datetime | None,
    group_by: str,
) -> list[dict[str, Any]]:
    """Totals per tenant, per UTC day when ``group_by == "day"``."""
    rows = UsageRepository(session).sums(tenant_id, start, end, by_day=group_by == "day")
    out: list[dict[str, Any]] = []
    for row in rows:
        streams = int(row["streams"])
        item: dict[str, Any] = {
            "tenant_id": row["tenant_id"],
            "jobs": int(row["jobs"]) - streams,
            "streams": streams,
            "stream_seconds": float(row["stream_seconds"]),
        }
        if group_by == "day":
            day = row["day"]
            item["day"] = day.isoformat() if isinstance(day, date) else str(day)
        for name in SUMMED:
            value = row[name]
            item[name] = float(value) if name.endswith("seconds") else int(value)
        out.append(item)
    return out
