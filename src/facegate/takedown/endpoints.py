"""Trust-and-safety HTTP routes: tenant offboarding (export, erase) for the platform admin,
and takedown cases (the platform admin sees every case, a tenant's admin its own)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import IO, Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from facegate.api.deps import AdminDep, SessionDep, get_state
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.errors import InvalidInput
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.provenance.endpoints import installation_keys
from facegate.takedown.erasure import erase_tenant
from facegate.takedown.export import export_tenant
from facegate.takedown.runtime import object_store_for, redis_keys_for

router = APIRouter(tags=["trust and safety"], responses=PROBLEM_RESPONSES)


class EraseRequest(BaseModel):
    """The tenant's id again: a typo must not erase a customer."""

    confirm: str


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    try:
        spool.seek(0)
        while chunk := spool.read(1024 * 1024):
            yield chunk
    finally:
        spool.close()


@router.get(
    "/v1/admin/tenants/{tenant_id}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}}}},
)
def export(tenant_id: str, request: Request, session: SessionDep, admin: AdminDep) -> Any:
    """The tenant's data as one ZIP (docs/takedown.md: the archive); audited."""
    settings = get_state(request).settings
    spool = tempfile.TemporaryFile()
    try:
        manifest = export_tenant(
            session,
            object_store_for(settings),
            installation_keys(settings.provenance_path),
            tenant_id,
            spool,
        )
    except BaseException:
        spool.close()
        raise
    record_audit(
        session,
        admin,
        audit.TENANT_EXPORT,
        f"tenant:{tenant_id}",
        {"files": len(manifest["files"])},
        tenant_id=tenant_id,
    )
    return StreamingResponse(
        _chunks(spool),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{tenant_id}-export.zip"'},
    )


@router.post("/v1/admin/tenants/{tenant_id}/erase")
def erase(
    tenant_id: str, body: EraseRequest, request: Request, session: SessionDep, admin: AdminDep
) -> dict[str, Any]:
    """Erase the tenant (``facegate tenant erase``); the answer is the signed receipt."""
    if body.confirm != tenant_id:
        raise InvalidInput("confirm must repeat the tenant's id", field="confirm")
    session.commit()  # end the request's transaction before the erasure's own
    state = get_state(request)
    return erase_tenant(
        state.session_factory,
        object_store_for(state.settings),
        installation_keys(state.settings.provenance_path),
        tenant_id,
        admin,
        redis=redis_keys_for(state.settings),
    )
