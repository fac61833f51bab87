"""Batch I/O: the batch with its progress across items and each item's outcome."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from facegate.batches.tables import Batch, BatchItem
from facegate.jobs.schemas import FaceQuality, JobError
from facegate.jobs.tables import JOB_STATUSES, Job

BatchStatus = Literal["running", "completed"]


class BatchItemOut(BaseModel):
    position: int
    job_id: uuid.UUID
    status: str
    progress: float
    error: JobError | None
    result: str | None = Field(description="The result's path when the item succeeded")
    quality: list[FaceQuality] | None = Field(
        None, description="The quality report of each swapped face (as GET /v1/jobs/{id})"
    )


class BatchLinks(BaseModel):
    self: str
    archive: str


class BatchOut(BaseModel):
    id: uuid.UUID
    status: BatchStatus = Field(description="completed once every item has ended")
    total: int
    counts: dict[str, int] = Field(description="Items per job status")
    progress: float = Field(description="Mean progress of the items, 0 to 1")
    created_by: str
    created_at: datetime
    finished_at: datetime | None
    items: list[BatchItemOut]
    links: BatchLinks

    @classmethod
    def of(cls, batch: Batch, items: list[tuple[BatchItem, Job]]) -> BatchOut:
        jobs = [job for _, job in items]
        counts = {status: 0 for status in JOB_STATUSES}
        for job in jobs:
            counts[job.status] += 1
        done = bool(jobs) and all(job.is_terminal for job in jobs)
        finished = [job.finished_at for job in jobs if job.finished_at is not None]
        path = f"/v1/batches/{batch.id}"
        return cls(
            id=batch.id,
            status="completed" if done else "running",
            total=batch.total,
            counts=counts,
            progress=round(sum(job.progress for job in jobs) / max(1, len(jobs)), 4),
            created_by=batch.created_by,
            created_at=batch.created_at,
            finished_at=max(finished) if done and finished else None,
            items=[
                BatchItemOut(
                    position=item.position,
                    job_id=job.id,
                    status=job.status,
                    progress=job.progress,
                    error=JobError(type=job.error_type, detail=job.error_detail)
                    if job.error_type
                    else None,
                    result=f"/v1/jobs/{job.id}/result" if job.status == "succeeded" else None,
                    quality=[FaceQuality.model_validate(face) for face in job.quality]
                    if job.status == "succeeded" and job.quality
                    else None,
                )
                for item, job in items
            ],
            links=BatchLinks(self=path, archive=f"{path}/archive"),
        )


class BatchSummary(BaseModel):
    id: uuid.UUID
    total: int
    created_by: str
    created_at: datetime
