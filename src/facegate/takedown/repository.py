"""All SQL of the takedown tables. A tenant's admin reads its own cases
(``readable_statement``); the platform admin every case (``platform_statement``); the
upload guard reads the blocks that apply to one tenant (its own and the platform's)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, Select, delete, or_, select
from sqlalchemy.orm import Session

from facegate.takedown.tables import TakedownBlock, TakedownCase, TakedownMatch, TakedownRemoval


class TakedownRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # cases
    @staticmethod
    def readable_statement(tenant_id: str) -> Select[TakedownCase]:
        return select(TakedownCase).where(TakedownCase.tenant_id == tenant_id)

    @staticmethod
    def platform_statement() -> Select[TakedownCase]:
        """Every case (the platform admin's queue, the clock's gauge)."""
        return select(TakedownCase)

    def case(self, case_id: str, tenant_id: str | None) -> TakedownCase | None:
        """A case; ``tenant_id`` None: whoever owns it (the platform admin)."""
        stmt = (
            self.platform_statement() if tenant_id is None else self.readable_statement(tenant_id)
        )
        return self.session.scalars(stmt.where(TakedownCase.id == case_id)).first()

    def cases(self, tenant_id: str | None, statuses: Sequence[str] = ()) -> list[TakedownCase]:
        stmt = (
            self.platform_statement() if tenant_id is None else self.readable_statement(tenant_id)
        )
        if statuses:
            stmt = stmt.where(TakedownCase.status.in_(list(statuses)))
        return list(self.session.scalars(stmt.order_by(TakedownCase.reported_at.desc())))

    def case_of_report(self, report_id: str) -> TakedownCase | None:
        return self.session.scalars(
            self.platform_statement().where(TakedownCase.report_id == report_id)
        ).first()

    def open_case_of_job(self, tenant_id: str, job_id: uuid.UUID) -> TakedownCase | None:
        return self.session.scalars(
            self.readable_statement(tenant_id).where(
                TakedownCase.job_id == job_id, TakedownCase.status == "open"
            )
        ).first()

    def add(self, row: object) -> None:
        self.session.add(row)
        self.session.flush()

    # matches
    @staticmethod
    def matches_statement(case_id: str) -> Select[TakedownMatch]:
        return select(TakedownMatch).where(TakedownMatch.case_id == case_id)

    def matches(self, case_id: str) -> list[TakedownMatch]:
        stmt = self.matches_statement(case_id).order_by(TakedownMatch.distance)
        return list(self.session.scalars(stmt))

    def replace_matches(self, case_id: str, rows: Sequence[TakedownMatch]) -> None:
        stmt = self.matches_statement(case_id)
        self.session.execute(delete(TakedownMatch).where(stmt.whereclause))  # type: ignore[arg-type]
        self.session.add_all(rows)
        self.session.flush()

    # removals
    @staticmethod
    def removals_of(tenant_id: str) -> Select[TakedownRemoval]:
        return select(TakedownRemoval).where(TakedownRemoval.tenant_id == tenant_id)

    @classmethod
    def removal(
        cls, bind: Session | Connection, tenant_id: str, job_id: uuid.UUID
    ) -> tuple[str, str, datetime] | None:
        """Why a job of the tenant is gone: (case or receipt id, reason, when); None when it
        never existed or left by retention. Works on a Session and a plain Connection."""
        stmt = (
            cls.removals_of(tenant_id)
            .where(TakedownRemoval.job_id == job_id)
            .with_only_columns(
                TakedownRemoval.case_id, TakedownRemoval.reason, TakedownRemoval.removed_at
            )
        )
        row = bind.execute(stmt).first()
        return None if row is None else (row[0], row[1], row[2])

    # blocks
    @staticmethod
    def blocks_for(tenant_id: str) -> Select[TakedownBlock]:
        """The blocks a source of ``tenant_id`` is checked against: its own and the
        platform's."""
        return select(TakedownBlock).where(
            or_(TakedownBlock.tenant_id == tenant_id, TakedownBlock.tenant_id.is_(None))
        )

    def blocks(self, tenant_id: str) -> list[TakedownBlock]:
        return list(self.session.scalars(self.blocks_for(tenant_id)))
