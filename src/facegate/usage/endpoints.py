"""``GET /v1/usage`` (totals per tenant and day) and ``GET /v1/usage/export`` (the records
as CloudEvents JSON/NDJSON or CSV). A tenant reads its own; an admin any (``?tenant=``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from facegate.api.deps import SessionDep, scoped
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.observability.audit import record_admin_read
from facegate.observability.timeparams import tenant_for, window
from facegate.principal import Principal
from facegate.usage.export import CONTENT_TYPES, export_lines
from facegate.usage.repository import UsageRepository
from facegate.usage.service import summarise

router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=PROBLEM_RESPONSES)

UsagePrincipal = Annotated[Principal, scoped("usage:read")]
From = Annotated[datetime | None, Query(alias="from", description="Start (inclusive), UTC")]
To = Annotated[datetime | None, Query(alias="to", description="End (exclusive), UTC")]
TenantParam = Annotated[str | None, Query(description="Admins only: this tenant's usage")]


class UsageSummary(BaseModel):
    """Totals of the finished jobs in the window, per tenant (and per UTC day)."""

    start: datetime | None
    end: datetime | None
    group_by: str
    tenant: str | None
    totals: list[dict[str, Any]]


@router.get("")
def get_usage(
    session: SessionDep,
    principal: UsagePrincipal,
    start: From = None,
    end: To = None,
    group_by: Annotated[Literal["day", "total"], Query()] = "day",
    tenant: TenantParam = None,
) -> UsageSummary:
    """Compute seconds, frames, pixels, bytes and job counts of finished jobs; live
    streams' count and seconds (``streams``, ``stream_seconds``)."""
    start, end = window(start, end)
    tenant_id = tenant_for(principal, tenant)
    if tenant_id is not None:
        record_admin_read(session, principal, tenant_id, "usage")
    totals = summarise(session, tenant_id, start, end, group_by)
    return UsageSummary(start=start, end=end, group_by=group_by, tenant=tenant_id, totals=totals)


@router.get(
    "/export",
    responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}},
)
def export_usage(
    session: SessionDep,
    principal: UsagePrincipal,
    start: From = None,
    end: To = None,
    fmt: Annotated[Literal["json", "ndjson", "csv"], Query(alias="format")] = "json",
    tenant: TenantParam = None,
) -> Response:
    """Every usage record in the window as CloudEvents (``json``: an array, ``ndjson``: one
    per line) or CSV."""
    start, end = window(start, end)
    tenant_id = tenant_for(principal, tenant)
    if tenant_id is not None:
        record_admin_read(session, principal, tenant_id, "usage export")
    records = UsageRepository(session).iter_records(tenant_id, start, end)
    body = "".join(export_lines(records, fmt))
    return Response(body, media_type=CONTENT_TYPES[fmt])
