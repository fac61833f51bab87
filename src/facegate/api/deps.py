"""FastAPI dependencies: the request's transaction and its Principal.

Use the ``Annotated`` aliases in route signatures::

    def get_job(job_id: str, session: SessionDep, principal: Annotated[Principal,
                Depends(require_scope("jobs:read"))]) -> ...

Both run with ``scope="function"``: the transaction commits (or rolls back) when the route
function returns, before the response is sent, so a client never sees a success whose
commit failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from facegate.api.errors import PROBLEM_RESPONSES, Forbidden, Unauthorized
from facegate.api.state import AppState
from facegate.database import session_scope
from facegate.ratelimit.gateway import Gateway
from facegate.tenancy.identity import authenticate
from facegate.tenancy.principal import Principal
from facegate.tenancy.service import TenancyService


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.facegate
    return state


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the route returns, rolled back when it
    raises."""
    with session_scope(get_state(request).session_factory) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


# Declared as OpenAPI security schemes (the "Authorize" button of /docs); auto_error is off
# so that missing credentials become our own 401 problem+json.
_bearer = HTTPBearer(auto_error=False, description="API key (fg_...) or JWT")
_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def get_principal(
    request: Request,
    session: SessionDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key_header)],
) -> Principal:
    """The caller, from an API key or a JWT; 401 problem+json otherwise. With the gateway
    installed, failed attempts count towards the client IP's ban and the tenant's rate
    limit is applied here, where the tenant becomes known."""
    gateway: Gateway | None = getattr(request.state, "gateway", None)
    try:
        principal = authenticate(
            session,
            authorization=f"Bearer {bearer.credentials}" if bearer else None,
            api_key=api_key,
            verifier=get_state(request).jwt_verifier,
        )
    except Unauthorized:
        if gateway is not None:
            gateway.record_auth_failure(request.state.client_ip)
        raise
    request.state.principal = principal
    if gateway is not None:
        tenant_id = principal.tenant_id
        per_minute = gateway.tenant_rate(
            tenant_id, lambda: TenancyService(session).get_policy(tenant_id).requests_per_minute
        )
        request.state.ratelimit = gateway.limit_tenant(tenant_id, per_minute)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal, scope="function")]


def require_scope(scope: str) -> Callable[[Principal], Principal]:
    """A dependency that returns the Principal when it holds ``scope`` (admin holds all)."""

    def dependency(principal: PrincipalDep) -> Principal:
        if not principal.has(scope):
            raise Forbidden(f"this call needs the {scope!r} scope", scope=scope)
        return principal

    dependency.__name__ = f"require_{scope.replace(':', '_')}"
    return dependency


def scoped(scope: str) -> object:
    """``Annotated[Principal, scoped("jobs:read")]`` shorthand for require_scope."""
    return Depends(require_scope(scope), scope="function")


AdminDep = Annotated[Principal, Depends(require_scope("admin"), scope="function")]

__all__ = [
    "PROBLEM_RESPONSES",
    "AdminDep",
    "PrincipalDep",
    "SessionDep",
    "get_principal",
    "get_session",
    "require_scope",
    "scoped",
]
