"""All SQL on usage records: the idempotent insert, scoped reads and per-period sums."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import Date, Select, case, cast, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from facegate.usage.tables import UsageRecord

SUMMED = (
    "compute_seconds",
    "duration_seconds",
    "queue_wait_seconds",
    "frames",
    "input_pixels",
    "output_pixels",
    "input_bytes",
    "output_bytes",
)


class UsageRepository:
    """Usage rows of one tenant (or of all, for admins and the exporter)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str | None) -> Select[UsageRecord]:
        """Every read starts here; ``None`` (every tenant) is for admins and operators."""
        stmt = select(UsageRecord)
        return stmt if tenant_id is None else stmt.where(UsageRecord.tenant_id == tenant_id)

    def insert_once(self, values: dict[str, Any]) -> bool:
        """Insert unless a record of this job exists; True when this call inserted it."""
        dialect = self.session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        stmt = (
            insert(UsageRecord)
            .values(**values)
            .on_conflict_do_nothing(index_elements=["job_id"])
            .returning(UsageRecord.job_id)
        )
        # RETURNING yields a row only when this statement inserted (rowcount is not
        # reliable for ON CONFLICT DO NOTHING across drivers).
        return self.session.execute(stmt).first() is not None

    def get_record(self, tenant_id: str, job_id: uuid.UUID) -> UsageRecord | None:
        """The tenant's record of ``job_id`` (a job's or a live stream's), if any."""
        stmt = self.readable_statement(tenant_id).where(UsageRecord.job_id == job_id)
        return self.session.scalars(stmt).first()

    def records_of(self, tenant_id: str, job_ids: list[uuid.UUID]) -> list[UsageRecord]:
        """The tenant's records of these jobs or live streams (those that have one)."""
        if not job_ids:
            return []
        stmt = self.readable_statement(tenant_id).where(UsageRecord.job_id.in_(job_ids))
        return list(self.session.scalars(stmt))

    def update_record(self, tenant_id: str, job_id: uuid.UUID, values: dict[str, Any]) -> None:
        """Rewrite the figures of the tenant's record of ``job_id`` (a live stream's, as it
        runs: its checkpoints)."""
        scoped = self.readable_statement(tenant_id).where(UsageRecord.job_id == job_id)
        self.session.execute(
            update(UsageRecord)
            .where(scoped.whereclause)  # type: ignore[arg-type]
            .values(**values)
        )

    def _window(
        self, tenant_id: str | None, start: datetime | None, end: datetime | None
    ) -> Select[UsageRecord]:
        stmt = self.readable_statement(tenant_id)
        if start is not None:
            stmt = stmt.where(UsageRecord.finished_at >= start)
        if end is not None:
            stmt = stmt.where(UsageRecord.finished_at < end)
        return stmt

    def iter_records(
        self, tenant_id: str | None, start: datetime | None, end: datetime | None
    ) -> Iterator[UsageRecord]:
        stmt = self._window(tenant_id, start, end).order_by(
            UsageRecord.finished_at, UsageRecord.job_id
        )
        yield from self.session.scalars(stmt.execution_options(yield_per=1000))

    def sums(
        self,
        tenant_id: str | None,
        start: datetime | None,
        end: datetime | None,
        *,
        by_day: bool,
    ) -> list[dict[str, Any]]:
        """Totals per tenant (and per UTC day when ``by_day``)."""
        window = self._window(tenant_id, start, end).subquery()
        day: Any
        if self.session.get_bind().dialect.name == "postgresql":
            day = cast(func.timezone("UTC", window.c.finished_at), Date)
        else:
            day = func.date(window.c.finished_at)  # stored as naive UTC on SQLite
        stream = window.c.kind == "stream"
        keys: list[Any] = [window.c.tenant_id]
        if by_day:
            keys.append(day.label("day"))
        columns = [
            *keys,
            func.count().label("jobs"),
            *[func.coalesce(func.sum(window.c[name]), 0).label(name) for name in SUMMED],
            # Live streams (kind "stream") are rows too: their count and their seconds apart.
            func.coalesce(func.sum(case((stream, 1), else_=0)), 0).label("streams"),
            func.coalesce(func.sum(case((stream, window.c.duration_seconds), else_=0.0)), 0).label(
                "stream_seconds"
            ),
        ]
        stmt = select(*columns).group_by(*keys).order_by(*keys)
        return [dict(row._mapping) for row in self.session.execute(stmt)]
