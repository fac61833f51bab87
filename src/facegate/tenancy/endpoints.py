"""Tenancy HTTP routes: ``GET /v1/me`` (who am I) and the admin routes for tenants,
policies and API keys. Creating, changing, suspending and listing tenants needs the
platform ``admin`` scope; reading one tenant, its policy, and managing its keys is open to
that tenant's own ``tenant:admin`` too (another tenant's id is then a 404), except the
platform keys among them, which only a platform admin sees or revokes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import BaseModel

from facegate.api.deps import AdminDep, PrincipalDep, SessionDep, TenantAdminDep
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.errors import Forbidden
from facegate.observability import audit
from facegate.observability.audit import record_admin_read, record_audit
from facegate.tenancy import audited
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
    # What these credentials may do: the scopes with roles and tenant:admin expanded.
    permissions: list[str]
    actor: str


@router.get("/v1/me", tags=["identity"], responses=PROBLEM_RESPONSES)
def whoami(principal: PrincipalDep) -> WhoAmI:
    """The identity these credentials resolve to (tenant, scopes, actor)."""
    return WhoAmI(
        tenant_id=principal.tenant_id,
        scopes=sorted(principal.scopes),
        permissions=sorted(principal.effective_scopes),
        actor=principal.actor,
    )


_CONFLICT: dict[int | str, dict[str, Any]] = {409: problem_openapi("Conflict")}


@admin_router.post("", status_code=status.HTTP_201_CREATED, responses=_CONFLICT)
def create_tenant(spec: TenantSpec, session: SessionDep, admin: AdminDep) -> TenantOut:
    """Create a tenant. Accepts the specification's document as is (``tenant_id``,
    ``quota``, ``storage_path``; the latter is recorded but never used as a path)."""
    return TenantOut.model_validate(audited.create_tenant(session, admin, spec))


@admin_router.get("")
def list_tenants(session: SessionDep, _: AdminDep) -> list[TenantOut]:
    return [TenantOut.model_validate(t) for t in TenancyService(session).list_tenants()]


@admin_router.get("/{tenant_id}")
def get_tenant(tenant_id: str, session: SessionDep, admin: TenantAdminDep) -> TenantOut:
    tenant = TenancyService(session).get_tenant(tenant_id)
    record_admin_read(session, admin, tenant_id, "tenant")
    return TenantOut.model_validate(tenant)


@admin_router.patch("/{tenant_id}")
def update_tenant(
    tenant_id: str, update: TenantUpdate, session: SessionDep, admin: AdminDep
) -> TenantOut:
    tenant = TenancyService(session).update_tenant(tenant_id, update)
    changes = update.model_dump(mode="json", exclude_none=True)
    record_audit(
        session, admin, audit.TENANT_UPDATE, f"tenant:{tenant_id}", changes, tenant_id=tenant_id
    )
    return TenantOut.model_validate(tenant)


@admin_router.delete("/{tenant_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_CONFLICT)
def delete_tenant(tenant_id: str, session: SessionDep, admin: AdminDep) -> Response:
    """Delete a suspended tenant and its rows (an active one answers 409)."""
    TenancyService(session).delete_tenant(tenant_id)
    record_audit(session, admin, audit.TENANT_DELETE, f"tenant:{tenant_id}", tenant_id=tenant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@admin_router.post("/{tenant_id}/suspend")
def suspend_tenant(tenant_id: str, session: SessionDep, admin: AdminDep) -> TenantOut:
    """Suspend: the tenant's keys and tokens answer 401 until it is resumed."""
    return TenantOut.model_validate(audited.set_status(session, admin, tenant_id, "suspended"))


@admin_router.post("/{tenant_id}/resume")
def resume_tenant(tenant_id: str, session: SessionDep, admin: AdminDep) -> TenantOut:
    return TenantOut.model_validate(audited.set_status(session, admin, tenant_id, "active"))


@admin_router.get("/{tenant_id}/policy")
def get_policy(tenant_id: str, session: SessionDep, admin: TenantAdminDep) -> PolicyOut:
    policy = TenancyService(session).get_policy(tenant_id)
    record_admin_read(session, admin, tenant_id, "policy")
    return PolicyOut.model_validate(policy)


@admin_router.put("/{tenant_id}/policy")
def put_policy(tenant_id: str, spec: PolicySpec, session: SessionDep, admin: AdminDep) -> PolicyOut:
    """Replace the policy (missing fields take defaults). Also accepts the specification's
    whole tenant document, whose ``quota`` becomes the policy."""
    policy = PolicyOut.model_validate(TenancyService(session).set_policy(tenant_id, spec))
    record_audit(
        session,
        admin,
        audit.POLICY_CHANGE,
        f"tenant:{tenant_id}/policy",
        policy.model_dump(mode="json"),
        tenant_id=tenant_id,
    )
    return policy


@admin_router.post("/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
def create_key(
    tenant_id: str, request: KeyCreate, session: SessionDep, admin: TenantAdminDep
) -> KeyCreated:
    """Create an API key. The ``token`` is in this response only; it is stored hashed.
    A tenant's own admin grants only scopes it holds (never the platform ``admin``)."""
    for scope in request.scopes:
        if not admin.may_grant(scope):
            raise Forbidden(f"this key may not grant the {scope!r} scope", scope=scope)
    created = audited.create_key(session, admin, tenant_id, request)
    out = KeyOut.model_validate(created.key)
    return KeyCreated(**out.model_dump(), token=created.token)


@admin_router.get("/{tenant_id}/keys")
def list_keys(tenant_id: str, session: SessionDep, admin: TenantAdminDep) -> list[KeyOut]:
    """The tenant's keys (platform keys only to a platform admin)."""
    found = TenancyService(session).list_keys(tenant_id, platform_keys=admin.is_admin)
    record_admin_read(session, admin, tenant_id, "keys")
    return [KeyOut.model_validate(k) for k in found]


@admin_router.delete("/{tenant_id}/keys/{key_id}")
def revoke_key(tenant_id: str, key_id: str, session: SessionDep, admin: TenantAdminDep) -> KeyOut:
    """Revoke a key (kept for the audit trail; it answers 401 from now on). A platform key
    is a 404 to the tenant's own admin."""
    return KeyOut.model_validate(audited.revoke_key(session, admin, tenant_id, key_id))


router.include_router(admin_router)
