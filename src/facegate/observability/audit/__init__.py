"""The tamper-evident audit trail. Call :func:`record_audit` in the transaction of the
change being audited, so the event exists exactly when the change does."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.engine.modelstore.manifest import ModelVersion
from facegate.observability.audit.repository import AuditRepository
from facegate.observability.audit.tables import AuditEvent
from facegate.observability.logging import current_request_id
from facegate.principal import Principal

# The audited actions (stable strings: dashboards and queries use them).
KEY_CREATE: Final = "key.create"
KEY_REVOKE: Final = "key.revoke"
POLICY_CHANGE: Final = "policy.change"
TENANT_CREATE: Final = "tenant.create"
TENANT_UPDATE: Final = "tenant.update"
TENANT_DELETE: Final = "tenant.delete"
TENANT_SUSPEND: Final = "tenant.suspend"
TENANT_RESUME: Final = "tenant.resume"
SENSITIVE_PROCESSORS: Final = "job.sensitive_processors"
ADMIN_READ: Final = "admin.read"
IP_BAN: Final = "ip.ban"
IP_UNBAN: Final = "ip.unban"
CONSENT_ATTEST: Final = "consent.attest"
MODEL_INSTALL: Final = "model.install"
MODEL_REMOVE: Final = "model.remove"
PROVENANCE_INIT: Final = "provenance.init"
PROVENANCE_ROTATE: Final = "provenance.rotate"
MODERATION_ALLOWED: Final = "moderation.allowed"
MODERATION_REFUSED: Final = "moderation.refused"
STORAGE_RECONCILE: Final = "storage.reconcile"
TENANT_ERASE: Final = "tenant.erase"
TENANT_EXPORT: Final = "tenant.export"
ERASURE_RECEIPT: Final = "erasure.receipt"
SUBJECT_ERASE: Final = "subject.erase"
TAKEDOWN_OPEN: Final = "takedown.open"
TAKEDOWN_MATCH: Final = "takedown.match"
TAKEDOWN_REMOVE: Final = "takedown.remove"
TAKEDOWN_DISMISS: Final = "takedown.dismiss"
TAKEDOWN_REFUSED: Final = "takedown.refused_upload"
MODERATION_ACTOR: Final = "system:moderation"


def record_audit(
    session: Session,
    principal: Principal | str,
    action: str,
    target: str,
    details: dict[str, Any] | None = None,
    *,
    tenant_id: str | None = None,
) -> AuditEvent:
    """Append one event. ``principal`` is the caller (or an actor string such as
    ``"cli:ops"`` / ``"system"``); ``tenant_id`` is the tenant the event concerns (default:
    the principal's), which is whose ``GET /v1/audit`` shows it."""
    owner: str | None = tenant_id
    if isinstance(principal, Principal):
        actor = principal.actor
        owner = tenant_id if tenant_id is not None else principal.tenant_id
    else:
        actor = principal
    event = AuditEvent(
        created_at=utcnow(),
        actor=actor[:200],
        tenant_id=owner,
        action=action,
        target=target[:300],
        details=dict(details or {}),
        request_id=current_request_id(),
    )
    return AuditRepository(session).append(event)


def model_installed_details(version: ModelVersion) -> dict[str, Any]:
    """What a ``model.install`` event records: kind, licence and each file's sha256."""
    return {
        "kind": version.kind,
        "licence": version.licence,
        "files": {item.role: item.sha256 for item in version.files},
    }


def record_admin_read(session: Session, principal: Principal, tenant_id: str, what: str) -> None:
    """An admin looked at another tenant's data (its own tenant's reads are not audited)."""
    if principal.is_admin and tenant_id != principal.tenant_id:
        record_audit(
            session,
            principal,
            ADMIN_READ,
            f"tenant:{tenant_id}",
            {"read": what},
            tenant_id=tenant_id,
        )
