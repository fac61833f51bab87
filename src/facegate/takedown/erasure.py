"""Erasing a whole tenant (offboarding), with a signed receipt.

What goes: every object under ``tenants/<tenant>/`` in the store (listed from the store, not
the ledger, so an orphan goes too), every row of every table with a ``tenant_id`` column
except those in :data:`KEPT`, the tenant's Redis keys, its keys (authentication fails at
once in this process, within 5 s elsewhere: ``tenancy/keycache.py``) and its webhooks with
their secrets. What stays (:data:`KEPT`) and for how long: docs/takedown.md.

The erasure is resumable: the tenant is marked ``erasing`` first (its keys stop working,
the scheduler claims none of its jobs), so a crash half-way leaves it refused everywhere,
and running ``erase`` again finishes it.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.orm import Session

import facegate.batches.tables
import facegate.consent.tables
import facegate.jobs.tables
import facegate.library.tables
import facegate.observability.audit.tables
import facegate.provenance.tables
import facegate.storage.tables
import facegate.takedown.tables
import facegate.templates.tables
import facegate.usage.tables
import facegate.webhooks.tables  # noqa: F401  (every table must be in the metadata)
from facegate.database import Base, SessionFactory, session_scope, utcnow
from facegate.errors import Conflict, NotFound
from facegate.jobs.repository import JobRepository
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.observability.audit.repository import AuditRepository
from facegate.provenance.keys import InstallationKeys
from facegate.provenance.receipts import canonical, sign_statement
from facegate.storage.base import ObjectNotFound, ObjectStore
from facegate.tenancy.keycache import invalidate_on_commit
from facegate.tenancy.repository import TenancyRepository

RECEIPT_FORMAT = "facegate.erasure-receipt/1"

#: Tables with a ``tenant_id`` whose rows outlive the tenant's erasure, and why.
KEPT: dict[str, str] = {
    "tenants": "the tombstone: id, status 'erased', erased_at (the id is never reused)",
    "audit_events": "the tamper-evident audit trail (a hash chain: a deleted row breaks it)",
    "usage_records": "billing: what each job consumed (no content, no faces)",
    "consent_attestations": "the legal record of consent (append-only; image hash only)",
    "provenance_marks": "which tenant and job a marked file came from (reports of copies)",
    "takedown_cases": "the legal record of takedowns (no biometric data once closed)",
}


def tenant_tables() -> list[Table]:
    """Every table with a ``tenant_id`` column, dependents first (safe deletion order)."""
    return [
        table
        for table in reversed(Base.metadata.sorted_tables)
        if "tenant_id" in table.columns and table.name != "tenants"
    ]


def erased_tables() -> list[Table]:
    return [table for table in tenant_tables() if table.name not in KEPT]


@dataclass(frozen=True)
class RedisKeys:
    """The tenant's Redis keys: listed and deleted by ``ratelimit.tenantkeys``."""

    find: Callable[[str], list[bytes]]
    delete: Callable[[str], int]


@dataclass(frozen=True)
class Scan:
    """What is left of the tenant after the erasure (all zeros: nothing)."""

    storage_prefix: str
    objects_left: int
    rows_left: dict[str, int]
    redis_keys_left: int | None  # None: the installation has no Redis

    @property
    def empty(self) -> bool:
        return (
            not self.objects_left
            and not any(self.rows_left.values())
            and (not self.redis_keys_left)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "storage_prefix": self.storage_prefix,
            "objects_left": self.objects_left,
            "rows_left": self.rows_left,
            "redis_keys_left": self.redis_keys_left,
            "empty": self.empty,
        }


def prefix_of(tenant_id: str) -> str:
    return f"tenants/{tenant_id}/"


def scan_tenant(
    session: Session, store: ObjectStore, tenant_id: str, redis: RedisKeys | None
) -> Scan:
    rows = {
        table.name: int(
            session.execute(
                select(func.count()).select_from(table).where(table.c.tenant_id == tenant_id)
            ).scalar_one()
        )
        for table in erased_tables()
    }
    return Scan(
        storage_prefix=prefix_of(tenant_id),
        objects_left=len(store.list(prefix_of(tenant_id))),
        rows_left=rows,
        redis_keys_left=None if redis is None else len(redis.find(tenant_id)),
    )


def kept_rows(session: Session, tenant_id: str) -> dict[str, int]:
    kept = {}
    for table in tenant_tables():
        if table.name in KEPT:
            stmt = select(func.count()).select_from(table).where(table.c.tenant_id == tenant_id)
            kept[table.name] = int(session.execute(stmt).scalar_one())
    return kept


def delete_objects(store: ObjectStore, prefix: str) -> Counter[str]:
    """Delete every object under ``prefix``; how many of each kind (the key's next segment)."""
    counts: Counter[str] = Counter()
    for key in store.list(prefix):
        try:
            store.delete(key)
        except ObjectNotFound:
            continue
        counts[key[len(prefix) :].split("/", 1)[0]] += 1
    return counts


def _begin(sessions: SessionFactory, tenant_id: str, wait_seconds: float) -> None:
    """Mark the tenant ``erasing`` and stop its running jobs; Conflict when some still run
    after ``wait_seconds`` (erase again once they stopped)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        with session_scope(sessions) as session:
            tenancy = TenancyRepository(session)
            tenant = tenancy.get_tenant(tenant_id)
            if tenant is None:
                raise NotFound(f"tenant {tenant_id!r} does not exist")
            if tenant.status == "erased":
                raise Conflict(f"tenant {tenant_id!r} was erased at {tenant.erased_at}")
            tenants = Base.metadata.tables["tenants"]
            session.execute(
                update(tenants).where(tenants.c.id == tenant_id).values(status="erasing")
            )
            invalidate_on_commit(session, tenant_id=tenant_id)
            running = JobRepository(session).stop_running(tenant_id)
        if not running:
            return
        if time.monotonic() >= deadline:
            raise Conflict(
                f"{running} job(s) of tenant {tenant_id!r} are still running; they were asked "
                "to stop: erase again in a few seconds",
                running_jobs=running,
            )
        time.sleep(0.5)


def erase_tenant(
    sessions: SessionFactory,
    store: ObjectStore,
    keys: InstallationKeys,
    tenant_id: str,
    actor: Any,
    *,
    redis: RedisKeys | None = None,
    wait_seconds: float = 30.0,
) -> dict[str, Any]:
    """Erase ``tenant_id`` (module docstring) and return the signed receipt."""
    _begin(sessions, tenant_id, wait_seconds)
    prefix = prefix_of(tenant_id)
    objects = delete_objects(store, prefix)
    redis_deleted = None if redis is None else redis.delete(tenant_id)
    erased_at = utcnow()
    with session_scope(sessions) as session:
        rows: dict[str, int] = {}
        for table in erased_tables():
            result = session.execute(delete(table).where(table.c.tenant_id == tenant_id))
            rows[table.name] = int(result.rowcount)  # type: ignore[attr-defined]
        tenants = Base.metadata.tables["tenants"]
        session.execute(
            update(tenants)
            .where(tenants.c.id == tenant_id)
            .values(
                status="erased",
                name=tenant_id,
                storage_path_info=None,
                erased_at=erased_at,
                updated_at=erased_at,
            )
        )
        counts = {
            "objects": dict(sorted(objects.items())),
            "rows": rows,
            "redis_keys": redis_deleted,
        }
        event = record_audit(
            session, actor, audit.TENANT_ERASE, f"tenant:{tenant_id}", counts, tenant_id=tenant_id
        )
        anchor = {"seq": event.seq, "hash": event.hash}
    # Any object a crashed earlier attempt or a late writer left is caught here.
    late = delete_objects(store, prefix)
    with session_scope(sessions, read_only=True) as session:
        found = scan_tenant(session, store, tenant_id, redis)
        kept = kept_rows(session, tenant_id)
    for kind, count in late.items():
        objects[kind] += count
    statement = {
        "format": RECEIPT_FORMAT,
        "kind": "tenant",
        "tenant_id": tenant_id,
        "erased_at": erased_at.isoformat(),
        "actor": actor if isinstance(actor, str) else actor.actor,
        "installation_id": f"{keys.installation_id:04x}",
        "deleted": {
            "objects": dict(sorted(objects.items())),
            "rows": counts["rows"],
            "redis_keys": redis_deleted,
        },
        "kept": {name: {"rows": kept.get(name, 0), "why": KEPT[name]} for name in sorted(KEPT)},
        "scan": found.as_dict(),
        "audit": anchor,
    }
    receipt = sign_statement(keys, statement)
    with session_scope(sessions) as session:
        record_audit(
            session,
            actor,
            audit.ERASURE_RECEIPT,
            f"tenant:{tenant_id}",
            {"sha256": hashlib.sha256(canonical(statement)).hexdigest(), "empty": found.empty},
            tenant_id=tenant_id,
        )
    return receipt


def audit_anchor_holds(session: Session, statement: dict[str, Any]) -> bool:
    """Whether the audit event the receipt names is in the chain with that hash."""
    anchor = statement.get("audit") or {}
    event = AuditRepository(session).event(int(anchor.get("seq", -1)), statement["tenant_id"])
    return event is not None and event.hash == anchor.get("hash")
