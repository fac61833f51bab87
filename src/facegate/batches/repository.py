"""All SQL on batches, from tenant-scoped statements; an item's job is read through the
jobs repository's own scoped statement."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Select, delete, select, update
from sqlalchemy.orm import Session

from facegate.batches.tables import Batch, BatchItem
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import Job


class BatchRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str) -> Select[Batch]:
        return select(Batch).where(Batch.tenant_id == tenant_id)

    @staticmethod
    def readable_items(tenant_id: str) -> Select[BatchItem]:
        return select(BatchItem).where(BatchItem.tenant_id == tenant_id)

    def add(self, batch: Batch, items: list[BatchItem]) -> None:
        self.session.add(batch)
        self.session.flush()
        self.session.add_all(items)
        self.session.flush()

    def get(self, tenant_id: str, batch_id: uuid.UUID) -> Batch | None:
        stmt = self.readable_statement(tenant_id).where(Batch.id == batch_id)
        return self.session.scalars(stmt).one_or_none()

    def get_by_idempotency_key(self, tenant_id: str, key: str) -> Batch | None:
        stmt = self.readable_statement(tenant_id).where(Batch.idempotency_key == key)
        return self.session.scalars(stmt).one_or_none()

    def page(self, tenant_id: str, limit: int) -> list[Batch]:
        stmt = self.readable_statement(tenant_id).order_by(Batch.created_at.desc(), Batch.id)
        return list(self.session.scalars(stmt.limit(limit)))

    def items(self, tenant_id: str, batch_id: uuid.UUID) -> list[tuple[BatchItem, Job]]:
        """The batch's items in position order, each with its job."""
        stmt = self.readable_items(tenant_id).where(BatchItem.batch_id == batch_id)
        items = list(self.session.scalars(stmt.order_by(BatchItem.position)))
        jobs = JobRepository(self.session).get_many(tenant_id, [i.job_id for i in items])
        by_id = {job.id: job for job in jobs}
        return [(item, by_id[item.job_id]) for item in items if item.job_id in by_id]

    def batch_of(self, tenant_id: str, job_id: uuid.UUID) -> uuid.UUID | None:
        stmt = self.readable_items(tenant_id).where(BatchItem.job_id == job_id)
        item = self.session.scalars(stmt).one_or_none()
        return item.batch_id if item is not None else None

    def forget_jobs(self, tenant_id: str, job_ids: Sequence[uuid.UUID]) -> None:
        """Drop the batch items of jobs removed by a takedown (the batch keeps the rest)."""
        if not job_ids:
            return
        doomed = self.readable_items(tenant_id).where(BatchItem.job_id.in_(list(job_ids)))
        self.session.execute(delete(BatchItem).where(doomed.whereclause))  # type: ignore[arg-type]

    def mark_completed(self, tenant_id: str, batch_id: uuid.UUID, now: datetime) -> bool:
        """Record that the batch completed; False when another dispatcher already did."""
        scoped = self.readable_statement(tenant_id).where(
            Batch.id == batch_id, Batch.completed_at.is_(None)
        )
        result = self.session.execute(
            update(Batch)
            .where(scoped.whereclause)  # type: ignore[arg-type]
            .values(completed_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0))
