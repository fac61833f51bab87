"""All SQL on the audit trail: the serialised append, scoped reads, the verifier's scan."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session

from facegate.observability.audit.chain import canonical_fields, compute_hash
from facegate.observability.audit.tables import GENESIS_HASH, AuditEvent, AuditHead

HEAD_ID = 1


class AuditRepository:
    """Appends and reads audit events within the caller's session (the caller commits)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def append(self, event: AuditEvent) -> AuditEvent:
        """Chain ``event`` after the current head and store it.

        Appends are serialised on the head row: PostgreSQL locks it with ``FOR UPDATE``;
        SQLite has one writer at a time, and writing the head row first takes that lock
        (the read that follows then sees the latest head).
        """
        if self.session.get_bind().dialect.name == "sqlite":
            self.session.execute(
                update(AuditHead).where(AuditHead.id == HEAD_ID).values(seq=AuditHead.seq)
            )
            head_stmt = select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == HEAD_ID)
        else:
            head_stmt = (
                select(AuditHead.seq, AuditHead.hash)
                .where(AuditHead.id == HEAD_ID)
                .with_for_update()
            )
        head = self.session.execute(head_stmt).one_or_none()
        seq, prev_hash = (head[0], head[1]) if head is not None else (0, GENESIS_HASH)
        event.seq = seq + 1
        event.prev_hash = prev_hash
        event.hash = compute_hash(prev_hash, canonical_fields(event))
        self.session.add(event)
        self.session.flush()
        if head is None:
            self.session.add(AuditHead(id=HEAD_ID, seq=event.seq, hash=event.hash))
        else:
            self.session.execute(
                update(AuditHead)
                .where(AuditHead.id == HEAD_ID)
                .values(seq=event.seq, hash=event.hash)
            )
        self.session.flush()
        return event

    @staticmethod
    def readable_statement(tenant_id: str | None) -> Select[AuditEvent]:
        """Every read starts here: one tenant's events, or (``None``, admins only) all."""
        stmt = select(AuditEvent)
        return stmt if tenant_id is None else stmt.where(AuditEvent.tenant_id == tenant_id)

    def event(self, seq: int, tenant_id: str | None = None) -> AuditEvent | None:
        """One event by its sequence number (an erasure receipt's anchor)."""
        stmt = self.readable_statement(tenant_id).where(AuditEvent.seq == seq)
        return self.session.scalars(stmt).first()

    def list(
        self,
        tenant_id: str | None,
        *,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after_seq: int | None = None,
        limit: int = 100,
    ) -> list[AuditEvent]:
        """Oldest first from ``after_seq`` (a cursor), at most ``limit``."""
        stmt = self.readable_statement(tenant_id)
        if action is not None:
            stmt = stmt.where(AuditEvent.action == action)
        if since is not None:
            stmt = stmt.where(AuditEvent.created_at >= since)
        if until is not None:
            stmt = stmt.where(AuditEvent.created_at < until)
        if after_seq is not None:
            stmt = stmt.where(AuditEvent.seq > after_seq)
        return list(self.session.scalars(stmt.order_by(AuditEvent.seq).limit(limit)))

    def scan(self, batch: int = 1000) -> Iterator[AuditEvent]:
        """Every event in chain order, in batches (the verifier; operator only)."""
        after = 0
        while True:
            rows = list(
                self.session.scalars(
                    self.readable_statement(None)
                    .where(AuditEvent.seq > after)
                    .order_by(AuditEvent.seq)
                    .limit(batch)
                )
            )
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1].seq
            self.session.expunge_all()

    def head(self) -> tuple[int, str] | None:
        row = self.session.execute(
            select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == HEAD_ID)
        ).one_or_none()
        return (int(row[0]), str(row[1])) if row is not None else None


def event_fields(event: AuditEvent) -> dict[str, Any]:
    return {"seq": event.seq, **canonical_fields(event), "hash": event.hash}
