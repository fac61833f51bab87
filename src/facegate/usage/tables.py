"""``usage_records``: what one finished job consumed. Created by migration 0003."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class UsageRecord(Base):
    """One job's consumption. ``job_id`` is the idempotency key (unique): recording a job
    twice (a retried finish, a replayed export) never bills it twice.

    No foreign key to tenants or jobs on purpose: billing history outlives deleted tenants
    and purged jobs.
    """

    __tablename__ = "usage_records"
    __table_args__ = (
        UniqueConstraint("job_id", name="uq_usage_records_job_id"),
        Index("ix_usage_records_tenant_finished", "tenant_id", "finished_at"),
        Index("ix_usage_records_finished_at", "finished_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    kind: Mapped[str] = mapped_column(String(8), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    device: Mapped[str] = mapped_column(String(16), nullable=False)
    compute_seconds: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    duration_seconds: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    queue_wait_seconds: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    frames: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    input_pixels: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    output_pixels: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    input_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    output_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    processors: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    model_variant: Mapped[str | None] = mapped_column(String(200), default=None)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    finished_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
