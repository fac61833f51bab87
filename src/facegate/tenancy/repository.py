"""All SQL of the tenancy package.

Rows owned by a tenant (its policy and API keys) are read through :meth:`keys_of`, the one
statement builder that scopes by tenant, so no caller can forget the filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Select, bindparam, select, update
from sqlalchemy.orm import Session

from facegate.tenancy.tables import ApiKey, Policy, Tenant


class TenancyRepository:
    """Reads and writes of tenants, policies and keys inside the caller's transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session

    # tenants
    def get_tenant(self, tenant_id: str) -> Tenant | None:
        return self.session.get(Tenant, tenant_id)

    def list_tenants(self) -> Sequence[Tenant]:
        return self.session.scalars(select(Tenant).order_by(Tenant.id)).unique().all()

    def add_tenant(self, tenant: Tenant, policy: Policy) -> Tenant:
        tenant.policy = policy
        self.session.add(tenant)
        self.session.flush()
        return tenant

    def delete_tenant(self, tenant: Tenant) -> None:
        self.session.delete(tenant)
        self.session.flush()

    # policies (tenant-owned)
    @staticmethod
    def policy_of(tenant_id: str) -> Select[Policy]:
        return select(Policy).where(Policy.tenant_id == tenant_id)

    @staticmethod
    def policy_stamp() -> Select[str, datetime, datetime]:
        """What tells whether a tenant's policy, as read before, still stands: its status
        and the change times of its row and its policy's, for the tenant of the bound
        parameter ``tenant_id`` (built once: ``facegate.tenancy.policycache``)."""
        return (
            select(
                Tenant.status,
                Tenant.updated_at.label("tenant_updated_at"),
                Policy.updated_at.label("policy_updated_at"),
            )
            .join(Policy, Policy.tenant_id == Tenant.id)
            .where(Tenant.id == bindparam("tenant_id"))
        )

    def get_policy(self, tenant_id: str) -> Policy | None:
        return self.session.scalars(self.policy_of(tenant_id)).first()

    def retention_days(self) -> dict[str, int]:
        """Every tenant's retention in days (the purge runs across tenants)."""
        rows = self.session.execute(select(Policy.tenant_id, Policy.retention_days))
        return {tenant_id: days for tenant_id, days in rows}

    # keys (tenant-owned)
    @staticmethod
    def keys_of(tenant_id: str) -> Select[ApiKey]:
        return select(ApiKey).where(ApiKey.tenant_id == tenant_id)

    def list_keys(self, tenant_id: str) -> Sequence[ApiKey]:
        return self.session.scalars(self.keys_of(tenant_id).order_by(ApiKey.created_at)).all()

    def get_key_of(self, tenant_id: str, key_id: str) -> ApiKey | None:
        return self.session.scalars(self.keys_of(tenant_id).where(ApiKey.id == key_id)).first()

    def get_key_for_authentication(self, key_id: str) -> tuple[ApiKey, Tenant] | None:
        """The key and its tenant by the key's public id (authentication does not know the
        tenant yet; the id itself is what the caller presented)."""
        row = self.session.execute(
            select(ApiKey, Tenant)
            .join(Tenant, Tenant.id == ApiKey.tenant_id)
            .where(ApiKey.id == key_id)
        ).first()
        return None if row is None else (row[0], row[1])

    def add_key(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def touch_key(self, key_id: str, when: datetime) -> None:
        self.session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=when))
