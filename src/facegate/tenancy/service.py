"""Rules of the tenancy domain: create/update/suspend tenants, policies, API keys.

Services never commit: the edge (request, CLI command) owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.errors import Conflict, InvalidInput, NotFound
from facegate.principal import PLATFORM_ADMIN
from facegate.tenancy import keys
from facegate.tenancy.keycache import invalidate_on_commit
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec, TenantUpdate
from facegate.tenancy.tables import ApiKey, Policy, Tenant

ApplyOutcome = Literal["created", "configured", "unchanged"]

# last_used_at is written at most this often per key, so authenticated reads stay reads.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def is_platform_key(key: ApiKey) -> bool:
    """A key carrying the platform ``admin`` scope: it lives in a tenant's rows (``serve
    --demo`` and ``key create <tenant> --scope admin`` put it there) but belongs to the
    operator, so no tenant-scoped door (a ``tenant:admin`` key, a tenant's JWT) lists or
    revokes it."""
    return PLATFORM_ADMIN in key.scopes


@dataclass(frozen=True)
class CreatedKey:
    """A new key row and its token (the only time the token exists in clear)."""

    key: ApiKey
    token: str


class TenancyService:
    """Tenant, policy and key rules on top of :class:`TenancyRepository`."""

    def __init__(self, session: Session) -> None:
        self.repository = TenancyRepository(session)

    # tenants
    def get_tenant(self, tenant_id: str) -> Tenant:
        tenant = self.repository.get_tenant(tenant_id)
        if tenant is None:
            raise NotFound(f"tenant {tenant_id!r} does not exist")
        return tenant

    def list_tenants(self) -> Sequence[Tenant]:
        return self.repository.list_tenants()

    def live_tenant(self, tenant_id: str) -> Tenant:
        """The tenant, unless erased (or being erased): its id is a tombstone, nothing may be
        created or changed under it (409)."""
        tenant = self.get_tenant(tenant_id)
        if tenant.is_erased:
            raise Conflict(
                f"tenant {tenant_id!r} was erased; its id is not reused", tenant_id=tenant_id
            )
        return tenant

    def create_tenant(self, spec: TenantSpec) -> Tenant:
        if self.repository.get_tenant(spec.id) is not None:
            raise Conflict(f"tenant {spec.id!r} already exists", tenant_id=spec.id)
        tenant = Tenant(
            id=spec.id,
            name=spec.name or spec.id,
            status=spec.status,
            isolation=spec.isolation,
            storage_path_info=spec.storage_path,
        )
        return self.repository.add_tenant(tenant, Policy(**spec.policy.values()))

    def apply_tenant(self, spec: TenantSpec) -> tuple[Tenant, ApplyOutcome]:
        """Make the stored tenant equal to ``spec`` (kubectl-apply semantics)."""
        tenant = self.repository.get_tenant(spec.id)
        if tenant is None:
            return self.create_tenant(spec), "created"
        tenant = self.live_tenant(spec.id)
        wanted = {
            "name": spec.name or spec.id,
            "status": spec.status,
            "isolation": spec.isolation,
            "storage_path_info": spec.storage_path,
        }
        changed = False
        for field, value in wanted.items():
            if getattr(tenant, field) != value:
                setattr(tenant, field, value)
                changed = True
        changed = self._write_policy(tenant, spec.policy) or changed
        if changed:
            invalidate_on_commit(self.repository.session, tenant_id=tenant.id)
            self.repository.session.flush()
        return tenant, "configured" if changed else "unchanged"

    def update_tenant(self, tenant_id: str, update: TenantUpdate) -> Tenant:
        tenant = self.live_tenant(tenant_id)
        for field, value in update.model_dump(exclude_none=True).items():
            setattr(tenant, field, value)
        invalidate_on_commit(self.repository.session, tenant_id=tenant_id)
        self.repository.session.flush()
        return tenant

    def set_status(self, tenant_id: str, status: Literal["active", "suspended"]) -> Tenant:
        tenant = self.live_tenant(tenant_id)
        if tenant.status != status:
            tenant.status = status
            invalidate_on_commit(self.repository.session, tenant_id=tenant_id)
            self.repository.session.flush()
        return tenant

    def delete_tenant(self, tenant_id: str) -> None:
        tenant = self.get_tenant(tenant_id)
        if tenant.is_active:
            # A two-step delete keeps a typo from wiping a live customer.
            raise Conflict(f"suspend tenant {tenant_id!r} before deleting it")
        invalidate_on_commit(self.repository.session, tenant_id=tenant_id)
        self.repository.delete_tenant(tenant)

    # policy
    def get_policy(self, tenant_id: str) -> Policy:
        return self.live_tenant(tenant_id).policy

    def set_policy(self, tenant_id: str, spec: PolicySpec) -> Policy:
        tenant = self.live_tenant(tenant_id)
        if self._write_policy(tenant, spec):
            self.repository.session.flush()
        return tenant.policy

    @staticmethod
    def _write_policy(tenant: Tenant, spec: PolicySpec) -> bool:
        changed = False
        for field, value in spec.values().items():
            if getattr(tenant.policy, field) != value:
                setattr(tenant.policy, field, value)
                changed = True
        return changed

    # keys
    def create_key(self, tenant_id: str, request: KeyCreate) -> CreatedKey:
        self.live_tenant(tenant_id)
        if request.expires_at is not None and request.expires_at <= utcnow():
            raise InvalidInput("expires_at is in the past")
        generated = keys.generate_key()
        key = ApiKey(
            id=generated.key_id,
            tenant_id=tenant_id,
            name=request.name,
            secret_hash=generated.secret_hash,
            scopes=list(request.scopes),
            expires_at=request.expires_at,
        )
        return CreatedKey(key=self.repository.add_key(key), token=generated.token)

    def list_keys(self, tenant_id: str, *, platform_keys: bool = False) -> Sequence[ApiKey]:
        """The tenant's keys; its platform keys only with ``platform_keys`` (an operator's
        door: a platform admin, the CLI)."""
        self.get_tenant(tenant_id)
        found = self.repository.list_keys(tenant_id)
        return found if platform_keys else [k for k in found if not is_platform_key(k)]

    def revoke_key(self, tenant_id: str, key_id: str, *, platform_keys: bool = False) -> ApiKey:
        """Revoke one of the tenant's keys; a platform key is, without ``platform_keys``,
        as missing as another tenant's (404)."""
        key = self.repository.get_key_of(tenant_id, key_id)
        if key is None or (is_platform_key(key) and not platform_keys):
            raise NotFound(f"key {key_id!r} does not exist")
        if key.revoked_at is None:
            key.revoked_at = utcnow()
            invalidate_on_commit(self.repository.session, key_id=key_id)
            self.repository.session.flush()
        return key
