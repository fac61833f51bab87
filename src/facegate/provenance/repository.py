"""All SQL of the marks table.

Issuing is per job (the worker, before it runs the job); the lookups by serial and by
reference are installation-wide on purpose: verification starts from a file, not from a
tenant. What a caller may learn of the row is decided by ``verify.disclosure``.
"""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from facegate.provenance.tables import ProvenanceMark


class MarkRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[ProvenanceMark]:
        """The tenant's marks; tracing a file (``by_serial``, ``by_reference``) looks a mark
        up by what the file carries, whoever's it is."""
        return select(ProvenanceMark).where(ProvenanceMark.tenant_id == tenant_id)

    def issue(self, tenant_id: str, job_id: uuid.UUID) -> ProvenanceMark:
        """The job's mark, created on its first run (a retry keeps the same one)."""
        existing = self.session.scalars(
            self.readable_statement(tenant_id).where(ProvenanceMark.job_id == job_id)
        ).first()
        if existing is not None:
            return existing
        mark = ProvenanceMark(tenant_id=tenant_id, job_id=job_id, reference=secrets.token_hex(16))
        self.session.add(mark)
        self.session.flush()  # assigns the serial
        return mark

    def by_serial(self, serial: int) -> ProvenanceMark | None:
        return self.session.get(ProvenanceMark, serial)

    def by_reference(self, reference: str) -> ProvenanceMark | None:
        return self.session.scalars(
            select(ProvenanceMark).where(ProvenanceMark.reference == reference)
        ).first()
