"""The append-only audit trail: ``audit_events`` and its one-row head (``audit_head``).

The head row holds the last sequence number and hash; appends lock it (``SELECT ... FOR
UPDATE`` on PostgreSQL, a write to it on SQLite), which serialises them, and it lets
``audit verify`` notice rows removed from or added to the end of the chain.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime

GENESIS_HASH = "0" * 64


class AuditEvent(Base):
    """One audited action. ``hash`` = SHA-256 over ``prev_hash`` and the canonical JSON of
    the row's other fields (see ``chain.py``)."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_tenant_seq", "tenant_id", "seq"),
        Index("ix_audit_events_created_at", "created_at"),
    )

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    actor: Mapped[str] = mapped_column(String(200), nullable=False)
    tenant_id: Mapped[str | None] = mapped_column(String(63), default=None)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    target: Mapped[str] = mapped_column(String(300), nullable=False)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    request_id: Mapped[str | None] = mapped_column(String(128), default=None)
    prev_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    hash: Mapped[str] = mapped_column(String(64), nullable=False)


class AuditHead(Base):
    """The single row (id 1) naming the chain's last event."""

    __tablename__ = "audit_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    hash: Mapped[str] = mapped_column(String(64), nullable=False)
