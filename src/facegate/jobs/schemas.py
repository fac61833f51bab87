"""Pydantic I/O of the jobs API."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import Row

from facegate.consent.schemas import ConsentRef
from facegate.errors import InvalidInput
from facegate.jobs.repository import Cursor
from facegate.jobs.tables import Job


class JobError(BaseModel):
    """Why a job failed: a stable type (the engine error code, ``lease-expired``...) and a
    human detail."""

    type: str
    detail: str | None


class FaceQuality(BaseModel):
    """The quality report of one swapped face (``engine.report``; docs/identity.md)."""

    face: int = Field(description="Index of the face among the swapped ones, from 0")
    box: tuple[float, float, float, float] = Field(description="x0, y0, x1, y1 in pixels")
    d_source: float = Field(description="Recogniser distance to the source (same person < 0.6)")
    d_target: float = Field(description="Recogniser distance to the original target face")
    tone: float | None = Field(description="CIE76 ΔE of the cheeks against the target's own")
    yaw: float
    pitch: float
    verdict: Literal["transferred", "weak", "not transferred"]
    action: Literal["kept", "untouched"] = "kept"
    frame: int | None = Field(
        default=None, description="A video's sampled frame, from 0 (null for an image)"
    )


class JobResult(BaseModel):
    """Metadata of a succeeded job's output; the bytes are at ``links.result``."""

    content_type: str | None
    width: int | None
    height: int | None
    bytes: int | None
    pixels: int | None
    frames: int | None
    compute_seconds: float | None
    models_used: dict[str, str] | None = None
    quality: list[FaceQuality] | None = Field(
        None,
        description="Per swapped face: recogniser distances to the source and to the original "
        "face, skin tone ΔE, pose and verdict (docs/identity.md)",
    )


class JobLinks(BaseModel):
    self: str
    result: str
    events: str


class JobOut(BaseModel):
    """A job as its tenant sees it."""

    id: uuid.UUID
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    kind: str
    progress: float
    stage: str | None
    progress_detail: dict[str, Any] | None = Field(
        None,
        description="Video jobs: frames_done, frames_total, fps, eta_seconds, elapsed_seconds",
    )
    attempts: int
    cancel_requested: bool
    inputs: list[str]
    created_at: datetime
    started_at: datetime | None = Field(
        description="When a worker first started the job (kept when it is run again after "
        "a worker was lost, and through a long video's parts and assembly)"
    )
    finished_at: datetime | None
    error: JobError | None
    result: JobResult | None
    consent: list[ConsentRef] | None = Field(
        None, description="The consent attestation recorded for each source image"
    )
    links: JobLinks

    @classmethod
    def of(cls, job: Job | Row[Any]) -> JobOut:
        """From a ``Job``, or a Core row of ``jobs`` (the polling route's: same names)."""
        base = f"/v1/jobs/{job.id}"
        return cls(
            id=job.id,
            status=job.status,
            kind=job.kind,
            progress=job.progress,
            stage=job.stage,
            progress_detail=job.progress_detail,
            attempts=job.attempts,
            cancel_requested=job.cancel_requested,
            inputs=list(job.inputs),
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            error=JobError(type=job.error_type, detail=job.error_detail)
            if job.error_type
            else None,
            result=JobResult(
                content_type=job.output_content_type,
                width=job.result_width,
                height=job.result_height,
                bytes=job.result_bytes,
                pixels=job.result_pixels,
                frames=job.result_frames,
                compute_seconds=job.compute_seconds,
                models_used=job.models_used,
                quality=[FaceQuality.model_validate(face) for face in job.quality]
                if job.quality
                else None,
            )
            if job.status == "succeeded"
            else None,
            consent=[ConsentRef.model_validate(ref) for ref in job.consent]
            if job.consent
            else None,
            links=JobLinks(self=base, result=f"{base}/result", events=f"{base}/events"),
        )


class JobPage(BaseModel):
    """One page of jobs, newest first; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[JobOut]
    next_cursor: str | None


def encode_cursor(job: Job) -> str:
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: str) -> Cursor:
    try:
        padded = value + "=" * (-len(value) % 4)
        created, job_id = base64.urlsafe_b64decode(padded.encode()).decode().split("|")
        return Cursor(datetime.fromisoformat(created), uuid.UUID(job_id))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("invalid cursor", code="invalid-cursor") from None
