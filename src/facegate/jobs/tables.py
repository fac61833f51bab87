"""The Job table: one row per submitted swap, the queue itself (no separate broker)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
# ``segment``: a part of a segmented video (a row with ``parent_id``), the scheduler's own.
JobKind = Literal["image", "video", "segment"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
JOB_STATUSES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")


class Job(Base):
    """A swap job of one tenant.

    Life cycle: ``queued`` → (claimed with a lease) ``running`` → ``succeeded`` | ``failed``
    | ``cancelled``. A running job whose lease expires goes back to ``queued`` (attempts
    counts claims) until ``max_attempts``, then ``failed``. ``spec`` is the engine
    PipelineSpec as submitted (already intersected with the tenant's policy).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idempotency"),
        Index("ix_jobs_status_priority_created", "status", "priority", "created_at"),
        Index("ix_jobs_tenant_created", "tenant_id", "created_at"),
        Index("ix_jobs_tenant_status", "tenant_id", "status"),
        Index("ix_jobs_parent", "parent_id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="queued")
    kind: Mapped[str] = mapped_column(String(8), nullable=False, default="image")
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    inputs: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    outputs: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    output_content_type: Mapped[str | None] = mapped_column(String(64), default=None)

    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=3)
    lease_owner: Mapped[str | None] = mapped_column(String(128), default=None)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # Set while the job runs on a worker that holds an accelerator: the tenant's
    # device_limit caps how many of its running jobs have it set.
    holds_device: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # The job's estimated cost, set at submission (facegate.jobs.cost): CPU seconds on one
    # core (a worker's short-job lane takes only short ones) and peak memory in bytes (a
    # worker claims only what fits its memory budget). None: unknown (treated as long, 0 B).
    estimated_seconds: Mapped[float | None] = mapped_column(Float, default=None)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    # A part of a longer job (a segment of a video) points at the job it belongs to; such
    # rows are the scheduler's, never listed to tenants. None for every submitted job.
    parent_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), default=None
    )

    progress: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    stage: Mapped[str | None] = mapped_column(String(64), default=None)
    # Video jobs: frames done/total, fps and ETA of the run in progress (None for images).
    progress_detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    error_type: Mapped[str | None] = mapped_column(String(64), default=None)
    error_detail: Mapped[str | None] = mapped_column(Text, default=None)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)
    # sha256 of what was submitted (options, consent, each input's sha256): a repeated
    # Idempotency-Key must come with the same request (jobs.service.request_fingerprint).
    request_sha256: Mapped[str | None] = mapped_column(String(64), default=None)

    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)

    result_width: Mapped[int | None] = mapped_column(Integer, default=None)
    result_height: Mapped[int | None] = mapped_column(Integer, default=None)
    result_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    result_pixels: Mapped[int | None] = mapped_column(BigInteger, default=None)
    result_frames: Mapped[int | None] = mapped_column(Integer, default=None)
    compute_seconds: Mapped[float | None] = mapped_column(Float, default=None)
    # Model name -> tag the run used (pins and A/B variants, recorded for audit).
    models_used: Mapped[dict[str, str] | None] = mapped_column(JSON, default=None)
    # The quality report of each swapped face (engine.report.FaceReport.as_dict()).
    quality: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=None)
    # The consent attestation of each source (consent.schemas.ConsentRef), when given.
    consent: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=None)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


# The claim's queue head per tenant (highest priority, then oldest): one index probe of one
# row however long the queue (a noisy tenant with 10,000 queued jobs costs the same as a
# quiet one). Priority runs descending so that order is the index's own.
Index(
    "ix_jobs_queued_head",
    Job.tenant_id,
    Job.priority.desc(),
    Job.created_at,
    Job.id,
    sqlite_where=text("status = 'queued'"),
    postgresql_where=text("status = 'queued'"),
)


class WorkerRecord(Base):
    """A worker process of the cluster shape, as it last reported itself (its heartbeat).

    Operators read it (who serves which tenants, who went silent); the queue never needs it:
    a job's own lease is what hands it to another worker when its worker vanishes.
    """

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    # None: every tenant of logical isolation; else the tenants this worker is dedicated to.
    tenants: Mapped[list[str] | None] = mapped_column(JSON, default=None)
    concurrency: Mapped[int] = mapped_column(Integer, nullable=False)
    # The estimated peak memory this worker takes on at once (None: no budget); the API
    # refuses a job whose estimate exceeds every live worker's budget.
    memory_budget_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="running")
    running_jobs: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    stopped_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
