"""FastAPI dependencies: the request's transaction and its Principal.

Use the ``Annotated`` aliases in route signatures::

    def get_job(job_id: str, session: SessionDep, principal: Annotated[Principal,
                Depends(require_scope("jobs:read"))]) -> ...

Both run with ``scope="function"``: the transaction commits (or rolls back) when the route
function returns, before the response is sent, so a client never sees a success whose
commit failed.

Every sync dependency costs a hop to a worker thread (two for a sync generator), and on a
busy machine each hop costs more than the database work itself. So these dependencies are
async and only hop when they must: the session is created on the event loop (it connects
on first use) and committed in a worker thread only if it was used; a recently verified API
key is answered from :mod:`facegate.tenancy.keycache` without the database; the scope check
is pure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPBearer
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from facegate.api.errors import PROBLEM_RESPONSES, document_body_problems
from facegate.api.gateway import has_credentials
from facegate.api.shedding import slot_of
from facegate.database import SINGLE_READS, session_scope
from facegate.errors import Forbidden, NotFound, Unauthenticated
from facegate.observability.audit import IP_BAN, record_audit
from facegate.principal import TENANT_ADMIN, Principal
from facegate.ratelimit.gateway import Gateway
from facegate.state import AppState
from facegate.tenancy.identity import authenticate, cached_principal
from facegate.tenancy.service import TenancyService

T = TypeVar("T")


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.facegate
    return state


async def get_session(request: Request) -> AsyncIterator[Session]:
    """One transaction per request: committed when the route returns, rolled back when it
    raises (the same contract as :func:`facegate.database.session_scope`)."""
    session = get_state(request).session_factory()  # no I/O yet: it connects on first use
    try:
        yield session
    except BaseException:
        await _end_session(session, commit=False)
        raise
    await _end_session(session, commit=True)


async def _end_session(session: Session, *, commit: bool) -> None:
    if not session.in_transaction():  # never used: nothing to commit, no connection held
        session.close()
        return
    # Shielded: a client that went away must not leave the transaction open.
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(_finish_session, session, commit)


def _finish_session(session: Session, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def run_in_session(
    request: Request, work: Callable[[Session], T], *, read_only: bool = False
) -> T:
    """Run ``work`` in one transaction in a worker thread and return its result: all of a
    read-only route's database work in a single hop. (A sync route with ``SessionDep`` costs
    three: the route, FastAPI's validation of its return value, and the commit.)"""
    factory = get_state(request).session_factory

    def run() -> T:
        with session_scope(factory, read_only=read_only) as session:
            return work(session)

    return await anyio.to_thread.run_sync(run)


async def run_on_connection(request: Request, work: Callable[[Connection], T]) -> T:
    """Run a read that needs no ORM objects, Core rows straight into a response, on one
    pooled connection in one worker-thread hop: ~0.1 ms less per call than through a
    Session (no unit of work, identity map or ORM loading; the statement and its column
    types are the same). For the hottest read, the job polling route. On SQLite each of
    ``work``'s statements is its own transaction (``SINGLE_READS``: no BEGIN, no ROLLBACK)."""
    engine = get_state(request).engine

    def run() -> T:
        with engine.connect().execution_options(**SINGLE_READS) as connection:
            return work(connection)

    return await anyio.to_thread.run_sync(run)


# The OpenAPI security schemes (the "Authorize" button of /docs): a bearer token (an API key
# or a JWT) or the X-API-Key header, either one. The principal dependencies below *are* the
# bearer scheme to FastAPI (:class:`PrincipalScheme`) and read both headers themselves: each
# dependency FastAPI resolves costs ~0.1 ms per request, and every authenticated call pays it.
# :func:`document_credentials` adds the X-API-Key alternative to the schema.
BEARER_SCHEME = "HTTPBearer"
API_KEY_SCHEME = "APIKeyHeader"
API_KEY_HEADER = "X-API-Key"


async def get_principal(request: Request) -> Principal:
    """The caller, from an API key or a JWT; 401 problem+json otherwise. With the gateway
    installed, failed attempts count towards the client IP's ban and the tenant's rate
    limit is applied here, where the tenant becomes known.

    Authentication uses its own short transaction (its ``last_used_at`` write is committed
    at once, not held by the request's transaction)."""
    resolved: Principal | None = getattr(request.state, "principal", None)
    if resolved is not None:  # once per request, however many dependencies ask for it
        return resolved
    principal = await _authenticate(request)
    request.state.principal = principal
    slot = slot_of(request.scope)
    if slot is not None:  # valid credentials: off the shares of callers without them
        slot.become("verified")
    return principal


async def _authenticate(request: Request) -> Principal:
    authorization = request.headers.get("authorization") or None
    api_key = request.headers.get(API_KEY_HEADER) or None
    principal = cached_principal(authorization, api_key)
    gateway: Gateway | None = getattr(request.state, "gateway", None)
    if principal is not None and (gateway is None or _limit_on_loop(request, gateway, principal)):
        return principal
    # A cache miss or a JWT reads the database, a Redis gateway does network I/O: both block.
    return await anyio.to_thread.run_sync(
        _resolve_principal, request, principal, authorization, api_key, gateway
    )


async def get_optional_principal(request: Request) -> Principal | None:
    """The caller of a public route: None without credentials; with credentials they must
    be valid (401 otherwise, counted towards the client's ban like any failed attempt)."""
    if not has_credentials(request.scope):
        return None
    return await get_principal(request)


class OptionalPrincipal:
    """The dependency of a public route's optional caller (:func:`get_optional_principal`):
    a class so that the body guard finds it on the route and authenticates from the headers
    before the body, as it does for :class:`PrincipalScheme`."""

    async def __call__(self, request: Request) -> Principal | None:
        return await get_optional_principal(request)


OptionalPrincipalDep = Annotated[Principal | None, Depends(OptionalPrincipal())]


class _NeedsDatabase(Exception):
    """The gateway asked for the tenant's policy: the limit must run in a worker thread."""


def _limit_on_loop(request: Request, gateway: Gateway, principal: Principal) -> bool:
    """Apply the tenant's limit without blocking when the gateway counts in memory and has
    the tenant's rate cached; False when that cannot be done on the event loop."""
    if gateway.remote:
        return False

    def needs_database() -> int:
        raise _NeedsDatabase

    tenant_id = principal.tenant_id
    try:
        per_minute = gateway.tenant_rate(tenant_id, needs_database)
    except _NeedsDatabase:
        return False
    request.state.ratelimit = gateway.limit_tenant(tenant_id, per_minute)
    return True


def _resolve_principal(
    request: Request,
    principal: Principal | None,
    authorization: str | None,
    api_key: str | None,
    gateway: Gateway | None,
) -> Principal:
    state = get_state(request)
    if principal is None:
        try:
            with session_scope(state.session_factory) as session:
                principal = authenticate(
                    session,
                    authorization=authorization,
                    api_key=api_key,
                    verifier=state.jwt_verifier,
                )
        except Unauthenticated:
            if gateway is not None:
                ban = gateway.record_auth_failure(request.state.client_ip)
                if ban is not None:  # a new ban is a sensitive action: on the audit chain
                    with session_scope(state.session_factory) as session:
                        record_audit(
                            session,
                            "system",
                            IP_BAN,
                            f"ip:{ban.ip}",
                            {"strikes": ban.strikes, "until": int(ban.expires_at)},
                        )
                # Bad credentials are no credentials: the per-IP limit applies too.
                gateway.limit_ip(request.state.client_ip)
            raise
    if gateway is not None:
        tenant_id = principal.tenant_id

        def requests_per_minute() -> int:
            with session_scope(state.session_factory) as session:
                return TenancyService(session).get_policy(tenant_id).requests_per_minute

        per_minute = gateway.tenant_rate(tenant_id, requests_per_minute)
        request.state.ratelimit = gateway.limit_tenant(tenant_id, per_minute)
    return principal


class PrincipalScheme(HTTPBearer):
    """A dependency that returns the caller's Principal, holding ``scope`` when one is given
    (admin holds all): 403 problem+json naming the scope otherwise.

    To FastAPI it is the HTTP bearer security scheme, so the routes that use it are
    documented as authenticated without resolving the header schemes as dependencies of
    their own. Async because it is pure (a sync one would cost a worker-thread hop)."""

    def __init__(self, scope: str | None = None) -> None:
        super().__init__(
            auto_error=False,
            scheme_name=BEARER_SCHEME,
            description="API key (fg_...) or JWT",
        )
        self.scope = scope

    async def __call__(self, request: Request) -> Principal:  # type: ignore[override]
        principal = await get_principal(request)
        if self.scope is not None and not principal.has(self.scope):
            raise Forbidden(f"this call needs the {self.scope!r} scope", scope=self.scope)
        return principal


def document_credentials(app: FastAPI) -> None:
    """Make the app's OpenAPI schema offer ``X-API-Key`` beside the bearer token wherever
    the bearer scheme is required (either one authenticates)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        document_body_problems(schema)
        schemes = schema.get("components", {}).get("securitySchemes", {})
        if BEARER_SCHEME in schemes:
            schemes[API_KEY_SCHEME] = {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                security = operation.get("security", [])
                if {BEARER_SCHEME: []} in security and {API_KEY_SCHEME: []} not in security:
                    security.append({API_KEY_SCHEME: []})
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


PrincipalDep = Annotated[Principal, Depends(PrincipalScheme(), scope="function")]


def require_scope(scope: str) -> PrincipalScheme:
    """A dependency that returns the Principal when it holds ``scope`` (admin holds all)."""
    return PrincipalScheme(scope)


def scoped(scope: str) -> object:
    """``Annotated[Principal, scoped("jobs:read")]`` shorthand for require_scope."""
    return Depends(require_scope(scope), scope="function")


AdminDep = Annotated[Principal, Depends(require_scope("admin"), scope="function")]


class TenantAdminScheme(PrincipalScheme):
    """The caller when it administers the path's ``{tenant_id}``: a platform admin, or
    that tenant's own ``tenant:admin``. Another tenant's id is a 404, as everywhere."""

    def __init__(self) -> None:
        super().__init__(TENANT_ADMIN)

    async def __call__(self, request: Request) -> Principal:  # type: ignore[override]
        principal = await get_principal(request)
        tenant_id = str(request.path_params.get("tenant_id", ""))
        if principal.administers(tenant_id):
            return principal
        if principal.has(TENANT_ADMIN):
            raise NotFound(f"no tenant {tenant_id!r}")
        raise Forbidden("this call needs the 'admin' or 'tenant:admin' scope", scope="admin")


TenantAdminDep = Annotated[Principal, Depends(TenantAdminScheme(), scope="function")]

__all__ = [
    "PROBLEM_RESPONSES",
    "AdminDep",
    "OptionalPrincipal",
    "OptionalPrincipalDep",
    "PrincipalDep",
    "PrincipalScheme",
    "SessionDep",
    "TenantAdminDep",
    "document_credentials",
    "get_optional_principal",
    "get_principal",
    "get_session",
    "require_scope",
    "run_in_session",
    "run_on_connection",
    "scoped",
]
