"""The takedown tables (migration ``0024_takedown``).

``takedown_cases``: one per reported output (opened by ``POST /v1/reports`` or an admin);
``takedown_matches``: the jobs whose source face is the reported person, with the distance;
``takedown_removals``: a job removed by a case (its row, inputs and results are gone; this
row makes its routes answer 410 Gone naming the case); ``takedown_blocks``: what may no
longer be used as a source (the face's descriptor, encrypted; the reported image's
perceptual hash), for one tenant or the whole platform.

A case carries no biometric data: the descriptor lives only in its block, encrypted
(``takedown.crypto``), and the matched sources' descriptors are never stored.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Float, Index, LargeBinary, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow

CASE_STATUSES: tuple[str, ...] = ("open", "removed", "dismissed")


class TakedownCase(Base):
    __tablename__ = "takedown_cases"
    __table_args__ = (Index("ix_takedown_cases_tenant_reported", "tenant_id", "reported_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # The owning tenant of the reported job (None: traced to no job, the platform's alone).
    tenant_id: Mapped[str | None] = mapped_column(String(63), default=None)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, default=None)
    report_id: Mapped[str | None] = mapped_column(String(32), default=None, index=True)
    # "tenant": matches and blocks within the owning tenant; "platform": every tenant.
    scope: Mapped[str] = mapped_column(String(16), nullable=False, default="tenant")
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="open")
    # The reported image's perceptual hash (hex, 64 bits), when the case has the file.
    image_phash: Mapped[str | None] = mapped_column(String(16), default=None)
    # The person's face descriptor while the case is open (encrypted, ``takedown.crypto``);
    # moved to the case's block when it is removed, dropped when it is dismissed.
    probe: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    opened_by: Mapped[str] = mapped_column(String(200), nullable=False)
    reported_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    removed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    removed_by: Mapped[str | None] = mapped_column(String(200), default=None)


class TakedownMatch(Base):
    __tablename__ = "takedown_matches"

    case_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # A job (its retained source face) or a saved face of the library.
    item_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), nullable=False)  # "job" | "face"
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False, index=True)
    distance: Mapped[float] = mapped_column(Float, nullable=False)


class TakedownRemoval(Base):
    __tablename__ = "takedown_removals"

    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False, index=True)
    case_id: Mapped[str] = mapped_column(String(32), nullable=False)
    # "takedown" (a case) or "erasure" (a subject's erasure, case_id its receipt id).
    reason: Mapped[str] = mapped_column(String(16), nullable=False, default="takedown")
    removed_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)


class TakedownBlock(Base):
    __tablename__ = "takedown_blocks"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    case_id: Mapped[str] = mapped_column(String(32), nullable=False, index=True)
    # None: refused for every tenant (a platform case).
    tenant_id: Mapped[str | None] = mapped_column(String(63), default=None, index=True)
    # AES-GCM of the 128 float32 of the face's descriptor (nonce first), or None.
    descriptor: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    image_phash: Mapped[str | None] = mapped_column(String(16), default=None)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
