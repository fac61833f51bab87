"""All SQL on consent attestations: append and tenant-scoped reads. There is no update or
delete: the table is append-only (and its triggers refuse both)."""

from __future__ import annotations

import uuid

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from facegate.consent.tables import ConsentAttestation


class ConsentRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[ConsentAttestation]:
        """Every read starts here: one tenant's attestations."""
        return select(ConsentAttestation).where(ConsentAttestation.tenant_id == tenant_id)

    def add(self, attestation: ConsentAttestation) -> ConsentAttestation:
        self.session.add(attestation)
        self.session.flush()
        return attestation

    def get(self, tenant_id: str, attestation_id: uuid.UUID) -> ConsentAttestation | None:
        stmt = self.readable_statement(tenant_id).where(ConsentAttestation.id == attestation_id)
        return self.session.scalars(stmt).one_or_none()

    def for_source(self, tenant_id: str, source_sha256: str) -> list[ConsentAttestation]:
        stmt = self.readable_statement(tenant_id).where(
            ConsentAttestation.source_sha256 == source_sha256
        )
        return list(self.session.scalars(stmt.order_by(ConsentAttestation.recorded_at)))
