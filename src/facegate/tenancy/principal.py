"""The identity every request resolves to before any handler runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["jobs:write", "jobs:read", "usage:read", "admin"]
ALL_SCOPES: tuple[Scope, ...] = ("jobs:write", "jobs:read", "usage:read", "admin")


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
        return "admin" in self.scopes

    def has(self, scope: str) -> bool:
        return scope in self.scopes or self.is_admin
