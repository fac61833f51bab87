"""The identity every request resolves to before any handler runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["jobs:write", "jobs:read", "usage:read", "tenant:admin", "admin"]
ALL_SCOPES: tuple[Scope, ...] = ("jobs:write", "jobs:read", "usage:read", "tenant:admin", "admin")
# ``admin`` is the platform operator (every tenant, the tenants themselves, bans). Only an
# installation's API keys carry it, or a JWT with the configured platform-admin claim.
PLATFORM_ADMIN: Scope = "admin"
# ``tenant:admin`` administers its own tenant (its keys, a view of its policy) and holds
# every scope of that tenant; a JWT's plain ``admin`` becomes this.
TENANT_ADMIN: Scope = "tenant:admin"
TENANT_SCOPES: frozenset[str] = frozenset({"jobs:write", "jobs:read", "usage:read"})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant whose data the call may touch, what it may do, and who
    acted (``key:<id>`` or ``jwt:<sub>``) for logs and the audit trail.

    Handlers never read a tenant id from the body or path of a non-admin call; they use
    ``principal.tenant_id``.
    """

    tenant_id: str
    scopes: frozenset[str]
    actor: str

    @property
    def is_admin(self) -> bool:
        """A platform admin (not a tenant's own admin)."""
        return PLATFORM_ADMIN in self.scopes

    def has(self, scope: str) -> bool:
        if scope in self.scopes or self.is_admin:
            return True
        return TENANT_ADMIN in self.scopes and scope in TENANT_SCOPES

    def administers(self, tenant_id: str) -> bool:
        """May manage ``tenant_id``: a platform admin any tenant, a tenant admin its own."""
        return self.is_admin or (TENANT_ADMIN in self.scopes and tenant_id == self.tenant_id)
