"""All SQL on job templates, from one tenant-scoped statement."""

from __future__ import annotations

import uuid

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from facegate.templates.tables import JobTemplate


class TemplateRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[JobTemplate]:
        """Every query of templates starts here: one tenant's."""
        return select(JobTemplate).where(JobTemplate.tenant_id == tenant_id)

    def add(self, template: JobTemplate) -> JobTemplate:
        self.session.add(template)
        self.session.flush()
        return template

    def get(self, tenant_id: str, template_id: uuid.UUID) -> JobTemplate | None:
        stmt = self.readable_statement(tenant_id).where(JobTemplate.id == template_id)
        return self.session.scalars(stmt).one_or_none()

    def get_by_name(self, tenant_id: str, name: str) -> JobTemplate | None:
        stmt = self.readable_statement(tenant_id).where(JobTemplate.name == name)
        return self.session.scalars(stmt).one_or_none()

    def list(self, tenant_id: str, limit: int = 200) -> list[JobTemplate]:
        stmt = self.readable_statement(tenant_id).order_by(
            JobTemplate.created_at.desc(), JobTemplate.id
        )
        return list(self.session.scalars(stmt.limit(limit)))

    def delete(self, template: JobTemplate) -> None:
        self.session.delete(template)
        self.session.flush()
