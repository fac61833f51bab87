"""``GET /v1/audit``: the audit trail (``audit:read``: a tenant's admin, not billing: the
events name reporters, attestors and webhook targets). A tenant sees the events about
itself; an admin every tenant's (``?tenant=`` narrows it, and is itself audited)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from facegate.api.deps import AdminDep, SessionDep, scoped
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.observability.audit import record_admin_read
from facegate.observability.audit.chain import verify_chain
from facegate.observability.audit.repository import AuditRepository, event_fields
from facegate.observability.timeparams import tenant_for, window
from facegate.principal import AUDIT_READ, Principal

# The largest seq the column holds (a signed 64-bit integer): a larger cursor is a 422.
MAX_SEQ = 2**63 - 1
router = APIRouter(prefix="/v1/audit", tags=["audit"], responses=PROBLEM_RESPONSES)


class AuditPage(BaseModel):
    """Events oldest first; pass ``next_after`` as ``after`` for the next page."""

    events: list[dict[str, Any]]
    next_after: int | None


@router.get("")
def list_audit(
    session: SessionDep,
    principal: Annotated[Principal, scoped(AUDIT_READ)],
    tenant: Annotated[str | None, Query(description="Admins only: this tenant")] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ, description="Cursor: a seq")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPage:
    start, end = window(start, end)
    tenant_id = tenant_for(principal, tenant)
    if tenant_id is not None:
        record_admin_read(session, principal, tenant_id, "audit")
    events = AuditRepository(session).list(
        tenant_id, action=action, since=start, until=end, after_seq=after, limit=limit
    )
    next_after = events[-1].seq if len(events) == limit else None
    return AuditPage(events=[event_fields(event) for event in events], next_after=next_after)


class ChainProblem(BaseModel):
    seq: int
    kind: str
    detail: str


class ChainVerification(BaseModel):
    """``facegate audit verify`` over HTTP: ``ok`` when every row links and hashes."""

    ok: bool
    rows: int
    head_seq: int
    head_hash: str
    problems: list[ChainProblem]


@router.get("/verify")
def verify_audit(session: SessionDep, _admin: AdminDep) -> ChainVerification:
    """Walk the whole hash chain (platform admins; the console's audit page shows it)."""
    repository = AuditRepository(session)
    head = repository.head()
    result = verify_chain(repository.scan(), head)
    return ChainVerification(
        ok=result.ok,
        rows=result.rows,
        head_seq=result.head_seq,
        head_hash=result.head_hash,
        problems=[ChainProblem(seq=p.seq, kind=p.kind, detail=p.detail) for p in result.problems],
    )
