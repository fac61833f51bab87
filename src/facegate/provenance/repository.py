"""All SQL of the marks table.

Issuing is per job (the worker, before it runs the job); the lookups by serial and by
reference are installation-wide on purpose: verification starts from a file, not from a
tenant. What a caller may learn of the row is decided by ``verify.disclosure``.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from facegate.provenance.errors import ProvenanceUnavailable
from facegate.provenance.payload import SERIAL_BITS
from facegate.provenance.tables import ProvenanceMark, ProvenanceReport

# Random serials collide once the table fills up: at half of the 2^24 serials, 16 draws all
# taken happen once in 65536 issues.
_SERIAL_TRIES = 16


class MarkRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[ProvenanceMark]:
        """The tenant's marks; tracing a file (``by_serial``, ``by_reference``) looks a mark
        up by what the file carries, whoever's it is."""
        return select(ProvenanceMark).where(ProvenanceMark.tenant_id == tenant_id)

    def issue(self, tenant_id: str, job_id: uuid.UUID) -> ProvenanceMark:
        """The job's mark, created on its first run (a retry keeps the same one), with a
        serial drawn at random (unguessable, and saying nothing of how many jobs came
        before), unique by the primary key."""
        existing = self.session.scalars(
            self.readable_statement(tenant_id).where(ProvenanceMark.job_id == job_id)
        ).first()
        if existing is not None:
            return existing
        for _ in range(_SERIAL_TRIES):
            serial = secrets.randbelow(1 << SERIAL_BITS)
            if self.by_serial(serial) is not None:
                continue  # drawn before: draw again (the primary key would refuse it anyway)
            mark = ProvenanceMark(
                serial=serial, tenant_id=tenant_id, job_id=job_id, reference=secrets.token_hex(16)
            )
            try:
                with self.session.begin_nested():
                    self.session.add(mark)
            except IntegrityError:
                continue  # another worker drew the same serial at the same moment
            return mark
        raise ProvenanceUnavailable("no free watermark serial was drawn; the serial space is full")

    def by_serial(self, serial: int) -> ProvenanceMark | None:
        return self.session.get(ProvenanceMark, serial)

    def by_reference(self, reference: str) -> ProvenanceMark | None:
        return self.session.scalars(
            select(ProvenanceMark).where(ProvenanceMark.reference == reference)
        ).first()


class ReportRepository:
    """The report cases (``provenance_reports``): no tenant column (the audit event of a case
    carries the owning tenant); looked up by reporter and subject."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def case(self, reporter: str, subject: str, bucket: int) -> ProvenanceReport | None:
        return self.session.scalars(
            select(ProvenanceReport).where(
                ProvenanceReport.reporter == reporter,
                ProvenanceReport.subject == subject,
                ProvenanceReport.bucket == bucket,
            )
        ).first()

    def latest_of_subject(self, subject: str, bucket: int) -> tuple[int, ProvenanceReport | None]:
        """(how many cases the subject has in the window, the latest of them)."""
        rows = self.session.scalars(
            select(ProvenanceReport)
            .where(ProvenanceReport.subject == subject, ProvenanceReport.bucket == bucket)
            .order_by(ProvenanceReport.created_at.desc())
        ).all()
        return len(rows), (rows[0] if rows else None)

    def opened_since(self, reporter: str, since: datetime) -> list[datetime]:
        """When the reporter's cases since ``since`` were opened, oldest first."""
        return list(
            self.session.scalars(
                select(ProvenanceReport.created_at)
                .where(ProvenanceReport.reporter == reporter, ProvenanceReport.created_at > since)
                .order_by(ProvenanceReport.created_at)
            )
        )

    def open(self, case: ProvenanceReport) -> bool:
        """Insert the case; False when the same case was opened at the same moment."""
        try:
            with self.session.begin_nested():
                self.session.add(case)
        except IntegrityError:
            return False
        return True
