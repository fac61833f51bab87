"""The identity every request resolves to before any handler runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal[
    "jobs:write",
    "jobs:read",
    "usage:read",
    "tenant:admin",
    "admin",
    "faces:read",
    "faces:write",
    "faces:manage",
    "director",
    "editor",
    "viewer",
    "billing",
    "templates:read",
    "templates:write",
    "audit:read",
    "models:write",
    "streams:write",
    "streams:read",
]
ALL_SCOPES: tuple[Scope, ...] = (
    "jobs:write",
    "jobs:read",
    "usage:read",
    "tenant:admin",
    "admin",
    "faces:read",
    "faces:write",
    "faces:manage",
    "director",
    "editor",
    "viewer",
    "billing",
    "templates:read",
    "templates:write",
    "audit:read",
    "models:write",
    "streams:write",
    "streams:read",
)
# ``admin`` is the platform operator (every tenant, the tenants themselves, bans). Only an
# installation's API keys carry it, or a JWT with the configured platform-admin claim.
PLATFORM_ADMIN: Scope = "admin"
# ``tenant:admin`` administers its own tenant (its keys, a view of its policy) and holds
# every scope of that tenant; a JWT's plain ``admin`` becomes this.
TENANT_ADMIN: Scope = "tenant:admin"
# The face library: read its entries (and use them in jobs), save and rename, and manage
# (delete, export the stored image).
FACES_READ: Scope = "faces:read"
FACES_WRITE: Scope = "faces:write"
FACES_MANAGE: Scope = "faces:manage"
# Job templates: read them (and use them in jobs), save and delete them.
TEMPLATES_READ: Scope = "templates:read"
TEMPLATES_WRITE: Scope = "templates:write"
# The tenant's audit trail (it names reporters, attestors and webhook targets: an
# administrator's read, not billing's) and the tenant's private models (installing or
# deleting one changes what every job of the tenant runs: an administrator's act too).
AUDIT_READ: Scope = "audit:read"
MODELS_WRITE: Scope = "models:write"
# Live streams (facegate.streams): start and end them, see them.
STREAMS_WRITE: Scope = "streams:write"
STREAMS_READ: Scope = "streams:read"
TENANT_SCOPES: frozenset[str] = frozenset(
    {
        "jobs:write",
        "jobs:read",
        "usage:read",
        FACES_READ,
        FACES_WRITE,
        FACES_MANAGE,
        TEMPLATES_READ,
        TEMPLATES_WRITE,
        AUDIT_READ,
        MODELS_WRITE,
        STREAMS_WRITE,
        STREAMS_READ,
    }
)
# Roles inside a tenant (the studio's people), each a set of the scopes above, carried by
# a key or a JWT's scope claim like any scope: a director manages the face library, an
# editor runs jobs with its faces (it cannot export or delete them), a viewer sees results,
# billing sees usage. Directors and editors manage job templates, viewers read them;
# directors and editors start live streams, viewers only see them. No role
# holds ``audit:read`` or ``models:write``: those are the tenant admin's (or a key granted
# them by name).
Role = Literal["director", "editor", "viewer", "billing"]
ROLE_SCOPES: dict[str, frozenset[str]] = {
    "director": frozenset(
        {
            "jobs:write",
            "jobs:read",
            FACES_READ,
            FACES_WRITE,
            FACES_MANAGE,
            TEMPLATES_READ,
            TEMPLATES_WRITE,
            STREAMS_WRITE,
            STREAMS_READ,
        }
    ),
    "editor": frozenset(
        {
            "jobs:write",
            "jobs:read",
            FACES_READ,
            TEMPLATES_READ,
            TEMPLATES_WRITE,
            STREAMS_WRITE,
            STREAMS_READ,
        }
    ),
    "viewer": frozenset({"jobs:read", TEMPLATES_READ, STREAMS_READ}),
    "billing": frozenset({"usage:read"}),
}


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
        if TENANT_ADMIN in self.scopes and scope in TENANT_SCOPES:
            return True
        return any(scope in ROLE_SCOPES.get(held, ()) for held in self.scopes)

    @property
    def effective_scopes(self) -> frozenset[str]:
        """Every scope this principal holds, its roles and ``tenant:admin`` expanded (what
        the console shows it may do)."""
        held = set(self.scopes)
        for scope in self.scopes:
            held |= ROLE_SCOPES.get(scope, frozenset())
        if TENANT_ADMIN in self.scopes or self.is_admin:
            held |= TENANT_SCOPES
        return frozenset(held)

    def may_grant(self, scope: str) -> bool:
        """May put ``scope`` on a new key of its tenant: only what it holds itself (a role
        when it holds each of the role's scopes), never the platform ``admin`` unless it
        is one, ``tenant:admin`` only when it is one."""
        if self.is_admin:
            return True
        if scope in (PLATFORM_ADMIN, TENANT_ADMIN):
            return scope in self.scopes
        if scope in ROLE_SCOPES:
            return scope in self.scopes or all(self.has(held) for held in ROLE_SCOPES[scope])
        return self.has(scope)

    def administers(self, tenant_id: str) -> bool:
        """May manage ``tenant_id``: a platform admin any tenant, a tenant admin its own."""
        return self.is_admin or (TENANT_ADMIN in self.scopes and tenant_id == self.tenant_id)
