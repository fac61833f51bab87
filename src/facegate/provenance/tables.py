"""The marks issued: one row per job whose result was marked.

``serial`` is what the watermark carries (with the installation id); ``reference`` is the
opaque token of the C2PA manifest. Neither says anything about the tenant or the files; the
row is what ties them back to a job, and only this installation holds it. Rows are kept when
the job's files are purged (the files leave; the fact that this installation made them stays).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow


class ProvenanceMark(Base):
    __tablename__ = "provenance_marks"

    serial: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    reference: Mapped[str] = mapped_column(String(32), nullable=False, unique=True)
    tenant_id: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False, unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
