"""Time-window query parameters shared by the usage and audit routes."""

from __future__ import annotations

from datetime import UTC, datetime

from facegate.errors import BadRequest, Forbidden
from facegate.principal import Principal


def as_utc(value: datetime | None) -> datetime | None:
    """Naive values are taken as UTC (``?from=2025-01-01``)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Nothing this service records is older; an earlier bound is a mistake (often a negative
# Unix time), not a query.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


def window(start: datetime | None, end: datetime | None) -> tuple[datetime | None, datetime | None]:
    start, end = as_utc(start), as_utc(end)
    for name, value in (("from", start), ("to", end)):
        if value is not None and value < EARLIEST:
            raise BadRequest(f"{name!r} must not be before 1970-01-01", limit=name)
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
