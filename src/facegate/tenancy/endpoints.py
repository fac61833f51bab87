"""Tenancy HTTP routes: ``GET /v1/me`` (who am I) and the admin routes for tenants,
policies and API keys (``admin`` scope)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import BaseModel

from facegate.api.deps import AdminDep, PrincipalDep, SessionDep
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.tenancy.schemas import (
    KeyCreate,
    KeyCreated,
    KeyOut,
    PolicyOut,
    PolicySpec,
    TenantOut,
    TenantSpec,
    TenantUpdate,
)
from facegate.tenancy.service import TenancyService

admin_router = APIRouter(prefix="/v1/admin/tenants", tags=["admin"], responses=PROBLEM_RESPONSES)
router = APIRouter()


class WhoAmI(BaseModel):
    tenant_id: str
    scopes: list[str]
    actor: str


@router.get("/v1/me", tags=["identity"], responses=PROBLEM_RESPONSES)
def whoami(principal: PrincipalDep) -> WhoAmI:
    """The identity these credentials resolve to (tenant, scopes, actor)."""
    return WhoAmI(
        tenant_id=principal.tenant_id, scopes=sorted(principal.scopes), actor=principal.actor
    )


_CONFLICT: dict[int | str, dict[str, Any]] = {409: problem_openapi("Conflict")}


@admin_router.post("", status_code=status.HTTP_201_CREATED, responses=_CONFLICT)
def create_tenant(spec: TenantSpec, session: SessionDep, _: AdminDep) -> TenantOut:
    """Create a tenant. Accepts the specification's document as is (``tenant_id``,
    ``quota``, ``storage_path``; the latter is recorded but never used as a path)."""
    return TenantOut.model_validate(TenancyService(session).create_tenant(spec))


@admin_router.get("")
def list_tenants(session: SessionDep, _: AdminDep) -> list[TenantOut]:
    return [TenantOut.model_validate(t) for t in TenancyService(session).list_tenants()]


@admin_router.get("/{tenant_id}")
def get_tenant(tenant_id: str, session: SessionDep, _: AdminDep) -> TenantOut:
    return TenantOut.model_validate(TenancyService(session).get_tenant(tenant_id))


@admin_router.patch("/{tenant_id}")
def update_tenant(
    tenant_id: str, update: TenantUpdate, session: SessionDep, _: AdminDep
) -> TenantOut:
    return TenantOut.model_validate(TenancyService(session).update_tenant(tenant_id, update))


@admin_router.delete("/{tenant_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_CONFLICT)
def delete_tenant(tenant_id: str, session: SessionDep, _: AdminDep) -> Response:
    """Delete a suspended tenant and its rows (an active one answers 409)."""
    TenancyService(session).delete_tenant(tenant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@admin_router.post("/{tenant_id}/suspend")
def suspend_tenant(tenant_id: str, session: SessionDep, _: AdminDep) -> TenantOut:
    """Suspend: the tenant's keys and tokens answer 401 until it is resumed."""
    return TenantOut.model_validate(TenancyService(session).set_status(tenant_id, "suspended"))


@admin_router.post("/{tenant_id}/resume")
def resume_tenant(tenant_id: str, session: SessionDep, _: AdminDep) -> TenantOut:
    return TenantOut.model_validate(TenancyService(session).set_status(tenant_id, "active"))


@admin_router.get("/{tenant_id}/policy")
def get_policy(tenant_id: str, session: SessionDep, _: AdminDep) -> PolicyOut:
    return PolicyOut.model_validate(TenancyService(session).get_policy(tenant_id))


@admin_router.put("/{tenant_id}/policy")
def put_policy(tenant_id: str, spec: PolicySpec, session: SessionDep, _: AdminDep) -> PolicyOut:
    """Replace the policy (missing fields take defaults). Also accepts the specification's
    whole tenant document, whose ``quota`` becomes the policy."""
    return PolicyOut.model_validate(TenancyService(session).set_policy(tenant_id, spec))


@admin_router.post("/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
def create_key(tenant_id: str, request: KeyCreate, session: SessionDep, _: AdminDep) -> KeyCreated:
    """Create an API key. The ``token`` is in this response only; it is stored hashed."""
    created = TenancyService(session).create_key(tenant_id, request)
    out = KeyOut.model_validate(created.key)
    return KeyCreated(**out.model_dump(), token=created.token)


@admin_router.get("/{tenant_id}/keys")
def list_keys(tenant_id: str, session: SessionDep, _: AdminDep) -> list[KeyOut]:
    return [KeyOut.model_validate(k) for k in TenancyService(session).list_keys(tenant_id)]


@admin_router.delete("/{tenant_id}/keys/{key_id}")
def revoke_key(tenant_id: str, key_id: str, session: SessionDep, _: AdminDep) -> KeyOut:
    """Revoke a key (kept for the audit trail; it answers 401 from now on)."""
    return KeyOut.model_validate(TenancyService(session).revoke_key(tenant_id, key_id))


router.include_router(admin_router)
