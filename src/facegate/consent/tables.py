"""The ``consent_attestations`` table (migration ``0009_consent``): append-only.

No foreign key to ``tenants``: an attestation is evidence and outlives a deleted tenant (a
cascade would erase it). The migration adds triggers that refuse UPDATE and DELETE on both
SQLite and PostgreSQL, so even code that bypasses the repository cannot rewrite one.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Index, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class ConsentAttestation(Base):
    """One attestation for one source image (identified by its sha256) of one tenant."""

    __tablename__ = "consent_attestations"
    __table_args__ = (Index("ix_consent_attestations_tenant_source", "tenant_id", "source_sha256"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    source_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    attested_by: Mapped[str] = mapped_column(String(200), nullable=False)
    statement_version: Mapped[str] = mapped_column(String(64), nullable=False)
    attested_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    # Who recorded it (the submitting principal's actor) and when the service stored it.
    recorded_by: Mapped[str] = mapped_column(String(200), nullable=False)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
