"""Time-window query parameters shared by the usage and audit routes."""

from __future__ import annotations

from datetime import UTC, datetime

from facegate.api.errors import BadRequest, Forbidden
from facegate.tenancy.principal import Principal


def as_utc(value: datetime | None) -> datetime | None:
    """Naive values are taken as UTC (``?from=2025-01-01``)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def window(start: datetime | None, end: datetime | None) -> tuple[datetime | None, datetime | None]:
    start, end = as_utc(start), as_utc(end)
    if start is not None and end is not None and end <= start:
        raise BadRequest("'to' must be after 'from'")
    return start, end


def tenant_for(principal: Principal, requested: str | None) -> str | None:
    """Whose rows a call reads: a tenant its own; an admin the requested tenant or (None)
    every tenant."""
    if principal.is_admin:
        return requested
    if requested is not None and requested != principal.tenant_id:
        raise Forbidden("only an admin may read another tenant's records", scope="admin")
    return principal.tenant_id
