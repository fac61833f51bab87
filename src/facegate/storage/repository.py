"""All SQL on the stored-objects ledger; every statement starts from one tenant's rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import BindParameter, Select, bindparam, delete, func, select
from sqlalchemy.orm import Session

from facegate.storage.tables import StoredObject


class StoredObjectRepository:
    """The ledger rows of one tenant at a time (quota, lookups, deletion, retention)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str | BindParameter[str]) -> Select[StoredObject]:
        """Every statement on the ledger starts here (``tenant_id`` may be a bound parameter,
        for a statement built once)."""
        return select(StoredObject).where(StoredObject.tenant_id == tenant_id)

    def usage_bytes(self, tenant_id: str) -> int:
        """Bytes the tenant stores: the sum of its rows."""
        return int(self.session.execute(USAGE, {"tenant_id": tenant_id}).scalar_one())

    def by_key(self, tenant_id: str, key: str) -> StoredObject | None:
        stmt = self.readable_statement(tenant_id).where(StoredObject.key == key)
        return self.session.scalars(stmt).first()

    def of_job(self, tenant_id: str, job_id: uuid.UUID) -> Sequence[StoredObject]:
        stmt = self.readable_statement(tenant_id).where(StoredObject.job_id == job_id)
        return self.session.scalars(stmt).all()

    def sources(self, tenant_id: str) -> Sequence[StoredObject]:
        """The tenant's stored source images of jobs (``inputs/<job>/source-N``)."""
        stmt = self.readable_statement(tenant_id).where(
            StoredObject.kind == "inputs", StoredObject.name.like("source-%")
        )
        return self.session.scalars(stmt.order_by(StoredObject.key)).all()

    def older_than(
        self, tenant_id: str, cutoff: datetime, kinds: Iterable[str]
    ) -> Sequence[StoredObject]:
        stmt = self.readable_statement(tenant_id).where(
            StoredObject.created_at < cutoff, StoredObject.kind.in_(list(kinds))
        )
        return self.session.scalars(stmt).all()

    def known_keys(self, tenant_id: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` have a row (the store-vs-ledger reconciliation)."""
        stmt = (
            self.readable_statement(tenant_id)
            .with_only_columns(StoredObject.key)
            .where(StoredObject.key.in_(list(keys)))
        )
        return set(self.session.scalars(stmt))

    def add(self, row: StoredObject) -> None:
        self.session.add(row)

    def delete_rows(self, tenant_id: str, keys: Sequence[str]) -> None:
        """Remove the tenant's rows of ``keys`` (objects already deleted from the store)."""
        scoped = self.readable_statement(tenant_id)
        self.session.execute(
            delete(StoredObject).where(scoped.whereclause, StoredObject.key.in_(keys))  # type: ignore[arg-type]
        )


# The bytes one tenant stores (its quota's reading), built once and executed with a
# ``tenant_id`` parameter (building it and computing its cache key cost more than the read).
USAGE = StoredObjectRepository.readable_statement(bindparam("tenant_id")).with_only_columns(
    func.coalesce(func.sum(StoredObject.size_bytes), 0)
)
