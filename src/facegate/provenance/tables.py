"""The marks issued (one row per job whose result was marked) and the reports received.

``serial`` is what the watermark carries (with its MAC), drawn at random: the column has no
sequence (migration 0022); ``reference`` is the opaque token of the C2PA manifest. Neither
says anything about the tenant or the files; the row is what ties them back to a job, and
only this installation holds it. Rows are kept when the job's files are purged (the files
leave; the fact that this installation made them stays).

A report row is one case: a reporter (a keyed pseudonym of the client's address, or of the
credential) reporting a subject (the job, or the upload's SHA-256 when it traces to none)
within one de-duplication window. Its audit event is the one the case made.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Index, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class ProvenanceMark(Base):
    __tablename__ = "provenance_marks"

    serial: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    reference: Mapped[str] = mapped_column(String(32), nullable=False, unique=True)
    tenant_id: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False, unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)


class ProvenanceReport(Base):
    __tablename__ = "provenance_reports"
    __table_args__ = (
        UniqueConstraint("reporter", "subject", "bucket", name="uq_provenance_reports_case"),
        Index("ix_provenance_reports_reporter_created", "reporter", "created_at"),
        Index("ix_provenance_reports_subject_bucket", "subject", "bucket"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # random: the report_id
    reporter: Mapped[str] = mapped_column(String(64), nullable=False)
    subject: Mapped[str] = mapped_column(String(80), nullable=False)
    bucket: Mapped[int] = mapped_column(Integer, nullable=False)
    audit_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
