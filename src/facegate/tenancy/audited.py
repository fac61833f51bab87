"""Administrative actions with their audit event, whatever the door: the admin routes
(``tenancy.endpoints``, the actor is the admin's principal) and the CLI (the actor is
``cli:<os user>``) call the same function, so both leave the same action, target and
details, in the caller's transaction: no change without its event, no event without it."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy.orm import Session

from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.tenancy.schemas import KeyCreate, PolicyOut, TenantSpec
from facegate.tenancy.service import ApplyOutcome, CreatedKey, TenancyService
from facegate.tenancy.tables import ApiKey, Tenant

_TENANT_FIELDS = ("name", "status", "isolation", "storage_path_info")
Actor = Principal | str


def _tenant_fields(tenant: Tenant) -> dict[str, Any]:
    return {field: getattr(tenant, field) for field in _TENANT_FIELDS}


def _policy(tenant: Tenant) -> dict[str, Any]:
    return PolicyOut.model_validate(tenant.policy).model_dump(mode="json")


def create_tenant(session: Session, actor: Actor, spec: TenantSpec) -> Tenant:
    """A new tenant (``tenant.create`` with its policy)."""
    tenant = TenancyService(session).create_tenant(spec)
    details = {"policy": spec.policy.model_dump(mode="json")}
    record_audit(
        session, actor, audit.TENANT_CREATE, f"tenant:{tenant.id}", details, tenant_id=tenant.id
    )
    return tenant


def apply_tenant(session: Session, actor: Actor, spec: TenantSpec) -> ApplyOutcome:
    """``tenant apply`` of one document: ``tenant.create`` for a new tenant; for a changed
    one ``tenant.update`` (the changed fields) and/or ``policy.change`` (the new policy),
    ``tenant.suspend``/``tenant.resume`` when its status changed."""
    service = TenancyService(session)
    existing = service.repository.get_tenant(spec.id)
    if existing is not None:
        existing = service.live_tenant(spec.id)  # an erased tenant's id is a 409
    before = (_tenant_fields(existing), _policy(existing)) if existing is not None else None
    if before is None:
        create_tenant(session, actor, spec)
        return "created"
    tenant, outcome = service.apply_tenant(spec)
    target = f"tenant:{tenant.id}"
    fields, policy = before
    changes = {k: v for k, v in _tenant_fields(tenant).items() if fields[k] != v}
    status = changes.pop("status", None)
    if status is not None:
        action = audit.TENANT_SUSPEND if status == "suspended" else audit.TENANT_RESUME
        record_audit(session, actor, action, target, tenant_id=tenant.id)
    if changes:
        record_audit(session, actor, audit.TENANT_UPDATE, target, changes, tenant_id=tenant.id)
    if _policy(tenant) != policy:
        record_audit(
            session,
            actor,
            audit.POLICY_CHANGE,
            f"{target}/policy",
            _policy(tenant),
            tenant_id=tenant.id,
        )
    return outcome


def set_status(
    session: Session, actor: Actor, tenant_id: str, status: Literal["active", "suspended"]
) -> Tenant:
    """Suspend or resume (``tenant.suspend`` / ``tenant.resume``)."""
    tenant = TenancyService(session).set_status(tenant_id, status)
    action = audit.TENANT_SUSPEND if status == "suspended" else audit.TENANT_RESUME
    record_audit(session, actor, action, f"tenant:{tenant_id}", tenant_id=tenant_id)
    return tenant


def create_key(session: Session, actor: Actor, tenant_id: str, request: KeyCreate) -> CreatedKey:
    created = TenancyService(session).create_key(tenant_id, request)
    record_audit(
        session,
        actor,
        audit.KEY_CREATE,
        f"key:{created.key.id}",
        {"scopes": list(created.key.scopes), "name": created.key.name},
        tenant_id=tenant_id,
    )
    return created


def reaches_platform_keys(actor: Actor) -> bool:
    """Whether ``actor`` may see and revoke platform keys: the CLI (the operator) and a
    platform admin; never a tenant's own admin or its JWT."""
    return isinstance(actor, str) or actor.is_admin


def revoke_key(session: Session, actor: Actor, tenant_id: str, key_id: str) -> ApiKey:
    """Revoke a key (``key.revoke``); a platform key is a 404 to a tenant's admin."""
    key = TenancyService(session).revoke_key(
        tenant_id, key_id, platform_keys=reaches_platform_keys(actor)
    )
    record_audit(session, actor, audit.KEY_REVOKE, f"key:{key_id}", tenant_id=tenant_id)
    return key
