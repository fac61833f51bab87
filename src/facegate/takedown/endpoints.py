"""Trust-and-safety HTTP routes: tenant offboarding (export, erase) for the platform admin,
and takedown cases (the platform admin sees every case, a tenant's admin its own)."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from typing import IO, Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from facegate.api.deps import AdminDep, SessionDep, get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.api.uploads import read_upload
from facegate.errors import InvalidInput
from facegate.jobs.runtime import tenant_store_for, write_sessions
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.principal import TENANT_ADMIN, Principal
from facegate.provenance.endpoints import installation_keys
from facegate.state import AppState
from facegate.takedown.erasure import erase_tenant
from facegate.takedown.export import export_tenant
from facegate.takedown.repository import TakedownRepository
from facegate.takedown.runtime import object_store_for, redis_keys_for
from facegate.takedown.service import case_out, get_case, match_case, remove_case
from facegate.takedown.subjects import erase_subject

router = APIRouter(tags=["trust and safety"], responses=PROBLEM_RESPONSES)
# The platform admin (every case) or a tenant's admin (its own cases).
TenantAdminOrAdmin = Annotated[Principal, scoped(TENANT_ADMIN)]


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
    forget_tenant(state, tenant_id)
    return erase_tenant(
        state.session_factory,
        object_store_for(state.settings),
        installation_keys(state.settings.provenance_path),
        tenant_id,
        admin,
        redis=redis_keys_for(state.settings),
    )


@router.get("/v1/takedown/cases")
def list_cases(
    session: SessionDep, principal: TenantAdminOrAdmin, status: str | None = None
) -> list[dict[str, Any]]:
    """Takedown cases, newest first: every case for the platform admin, the tenant's own
    for its admin (``tenant:admin``)."""
    scope = None if principal.is_admin else principal.tenant_id
    cases = TakedownRepository(session).cases(scope, [status] if status else [])
    return [case_out(session, case) for case in cases]


@router.get("/v1/takedown/cases/{case_id}")
def get_one(case_id: str, session: SessionDep, principal: TenantAdminOrAdmin) -> dict[str, Any]:
    return case_out(session, get_case(session, principal, case_id))


@router.post("/v1/takedown/cases/{case_id}/match")
def match(
    case_id: str,
    request: Request,
    session: SessionDep,
    principal: TenantAdminOrAdmin,
    photo: Annotated[UploadFile | None, File(description="A photo of the person")] = None,
    platform: Annotated[bool, Form(description="Search every tenant (platform admin)")] = False,
) -> dict[str, Any]:
    """List every job whose source face is the reported person (the reported job's
    retained source, and the photo when given), with the recogniser's distance."""
    state = get_state(request)
    data = None if photo is None else read_upload(photo, state.settings.verify_max_bytes)
    session.commit()  # the scan runs in its own read-only transaction, the write after it
    return match_case(
        state.session_factory,
        write_sessions(state),
        tenant_store_for(state.settings),
        state.face_engine,
        installation_keys(state.settings.provenance_path),
        principal,
        case_id,
        photo=data,
        platform=platform,
    )


@router.post("/v1/takedown/cases/{case_id}/remove")
def remove(
    case_id: str, request: Request, session: SessionDep, principal: TenantAdminOrAdmin
) -> dict[str, Any]:
    """Remove what the case matched: results and inputs deleted, jobs answer 410 naming
    the case, the tenants told (webhook ``job.removed``, audit); the face and the images
    are refused as sources from now on."""
    state = get_state(request)
    removed = remove_case(session, tenant_store_for(state.settings), principal, case_id)
    for tenant_id in {match["tenant_id"] for match in removed["matches"]}:
        forget_tenant(state, tenant_id)
    return removed


def forget_tenant(state: AppState, tenant_id: str) -> None:
    """Drop the tenant's analysed sources from this process's cache (the embedded workers';
    a ``facegate worker`` process's bounded cache ages them out: docs/takedown.md)."""
    state.face_engine.source_cache.forget(
        lambda key: isinstance(key, tuple) and bool(key) and key[0] == tenant_id
    )


@router.post("/v1/subjects/erase")
def erase_person(
    request: Request,
    session: SessionDep,
    principal: TenantAdminOrAdmin,
    photo: Annotated[UploadFile | None, File(description="A photo of the person")] = None,
    face_id: Annotated[list[uuid.UUID] | None, Form(description="Saved faces of them")] = None,
    tenant_id: Annotated[str | None, Form(description="Whose (platform admin)")] = None,
) -> dict[str, Any]:
    """Erase everything derived from one person's face in the tenant (GDPR Art. 17): saved
    faces, jobs with their inputs and results, batch items, cached analyses; consent
    attestations stay (image hash only). The answer is the signed receipt."""
    if tenant_id is not None and not principal.is_admin:
        raise InvalidInput("only the platform admin names another tenant", field="tenant_id")
    state = get_state(request)
    owner = tenant_id or principal.tenant_id
    data = None if photo is None else read_upload(photo, state.settings.verify_max_bytes)
    session.commit()  # the scan runs in its own read-only transaction, the erasure after it
    receipt = erase_subject(
        state.session_factory,
        write_sessions(state),
        tenant_store_for(state.settings),
        state.face_engine,
        installation_keys(state.settings.provenance_path),
        principal,
        owner,
        photo=data,
        face_ids=face_id,
    )
    forget_tenant(state, owner)
    return receipt
