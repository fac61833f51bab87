"""All SQL on library faces, from one tenant-scoped statement."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from facegate.library.tables import LibraryFace


class LibraryRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[LibraryFace]:
        """Every query of library faces starts here: one tenant's."""
        return select(LibraryFace).where(LibraryFace.tenant_id == tenant_id)

    def add(self, face: LibraryFace) -> LibraryFace:
        self.session.add(face)
        self.session.flush()
        return face

    def get(self, tenant_id: str, face_id: uuid.UUID) -> LibraryFace | None:
        stmt = self.readable_statement(tenant_id).where(LibraryFace.id == face_id)
        return self.session.scalars(stmt).one_or_none()

    def get_many(self, tenant_id: str, face_ids: Sequence[uuid.UUID]) -> list[LibraryFace]:
        stmt = self.readable_statement(tenant_id).where(LibraryFace.id.in_(list(face_ids)))
        return list(self.session.scalars(stmt))

    def named(self, tenant_id: str, names: Sequence[str]) -> list[LibraryFace]:
        """The faces called one of ``names`` (names need not be unique)."""
        stmt = self.readable_statement(tenant_id).where(LibraryFace.name.in_(list(names)))
        return list(self.session.scalars(stmt))

    def list(
        self, tenant_id: str, *, label: str | None = None, limit: int = 200
    ) -> list[LibraryFace]:
        stmt = self.readable_statement(tenant_id).order_by(
            LibraryFace.created_at.desc(), LibraryFace.id
        )
        faces = list(self.session.scalars(stmt))
        if label is not None:  # JSON arrays are not portably indexable: filtered here
            faces = [face for face in faces if label in face.labels]
        return faces[:limit]

    def all_of(self, tenant_id: str) -> Sequence[LibraryFace]:
        """Every saved face of the tenant (a takedown's scan, an export)."""
        stmt = self.readable_statement(tenant_id).order_by(LibraryFace.created_at, LibraryFace.id)
        return self.session.scalars(stmt).all()

    def delete(self, face: LibraryFace) -> None:
        self.session.delete(face)
        self.session.flush()
