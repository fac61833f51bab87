"""One row per stored object: the ledger the storage quota and the retention purge read."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Index, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class StoredObject(Base):
    """An artifact a tenant owns (an input, an output, a preview) and its size.

    The row is the source of truth for quota accounting: bytes per tenant are the sum of its
    rows, so the count can never drift from what a crash left half-written in the store
    (an object without a row is invisible to the tenant and removed by the purge).
    """

    __tablename__ = "stored_objects"
    __table_args__ = (Index("ix_stored_objects_tenant_created", "tenant_id", "created_at"),)

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    content_type: Mapped[str] = mapped_column(String(64), nullable=False)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False, default=utcnow)
