"""The ``job_templates`` table (migration ``0016_job_templates``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class JobTemplate(Base):
    """One saved template of one tenant; its name is unique within the tenant."""

    __tablename__ = "job_templates"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name", name="uq_job_templates_tenant_name"),
        Index("ix_job_templates_tenant_created", "tenant_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    description: Mapped[str] = mapped_column(String(1000), nullable=False, default="")
    # The job options as validated at save: a PipelineSpec document (processors, their
    # options, selector with the mapping below as index pairs, output).
    options: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    # Saved faces by name, the job's sources in this order (resolved when it is used).
    faces: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    # face name -> target face index, as given (``options`` holds it as selector pairs).
    mapping: Mapped[dict[str, int] | None] = mapped_column(JSON, default=None)
    created_by: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
