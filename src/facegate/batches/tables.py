"""The ``batches`` and ``batch_items`` tables (migration ``0015_batches``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class Batch(Base):
    """One submission of one tenant: its items are jobs (``batch_items``)."""

    __tablename__ = "batches"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_batches_tenant_idempotency"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    total: Mapped[int] = mapped_column(Integer, nullable=False)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)
    request_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    created_by: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    # Set once, by the webhook dispatcher, when its last item ended and batch.completed
    # was queued (None for tenants without webhooks: the status is read from the items).
    completed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)


class BatchItem(Base):
    """Target ``position`` of a batch and the job that swaps it."""

    __tablename__ = "batch_items"

    batch_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False, unique=True)
