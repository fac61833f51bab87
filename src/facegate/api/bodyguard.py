"""Request bodies under a budget, decided from the headers before a byte is read.

FastAPI reads (and spools) a request's whole body before it resolves any dependency, so
without this a client with no credentials could make the server buffer hundreds of
megabytes before learning it gets a 401. For every request that carries a body this
middleware, innermost of the gateway's:

1. matches the route and, when the route needs a principal, runs **the route's own
   principal dependency from the headers** (its scope, its tenant check: 401/403/404
   without reading the body; a failed authentication counts towards the client IP's ban,
   see ``api.deps``);
2. sets the route's **budget**: JSON bodies ``max_json_body_bytes``; uploads the tenant's
   ``max_input_bytes`` twice (a target at its cap and sources beside it) plus the form's
   overhead; a route marked with :func:`body_budget` the setting it names (model files
   ``max_model_bytes``, the public ``POST /v1/verify`` ``verify_max_bytes``). A
   ``Content-Length`` over it is a 413 at once; a chunked body is counted as it arrives
   and stopped at the budget;
3. holds the body to a **minimum rate**: after ``body_grace_seconds`` a body must keep
   arriving at ``body_min_bytes_per_second`` or the request ends with 408 — a client that
   drips a byte every few seconds cannot hold a slot;
4. counts the request where it belongs (its in-flight :class:`~facegate.api.shedding.Slot`):
   valid credentials off the shares of callers without them; credentials the route never
   checks as none at all. A route marked :func:`public_upload` (``POST /v1/verify``,
   ``POST /v1/reports``) checks optional credentials from the headers too (a bad one is a
   401 before the body, counted towards the ban); without them its upload takes the public
   uploads' own small share, the smaller ``public_upload_max_bytes`` budget and a
   wall-clock deadline for the whole body, ``public_upload_deadline_seconds``.

The principal resolved here is the one the route's dependencies see (``get_principal``
caches it on the request), so nothing is authenticated twice.

An upload's budget is a coarse guard (twice the tenant's ``max_input_bytes``): the exact
limit is applied to each file by the route, under the policy it reads in its own
transaction. So the budget is read from the policy at most every
:data:`INPUT_LIMIT_CACHE_SECONDS` per tenant, not in a database session of its own on every
upload (a worker-thread hop, a transaction and a query: ~1.3 ms of a submission's ~12).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
from fastapi import params
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from facegate.api.deps import OptionalPrincipal, PrincipalScheme, get_state
from facegate.api.errors import PayloadTooLarge, ProblemError, RequestTimeout
from facegate.api.gateway import send_problem
from facegate.api.routetable import RouteTable
from facegate.api.shedding import InFlight, slot_of
from facegate.database import session_scope
from facegate.errors import RateLimited, ServiceError
from facegate.principal import Principal
from facegate.settings import Settings
from facegate.tenancy.service import TenancyService

BodyKind = Literal["json", "upload", "setting"]
# Multipart framing and the small form fields (options JSON, a sidecar) of an upload.
FORM_OVERHEAD_BYTES = 1 << 20
_BUDGET_ATTRIBUTE = "__facegate_body_budget__"
_PUBLIC_ATTRIBUTE = "__facegate_public_upload__"
F = TypeVar("F", bound=Callable[..., Any])
#: How long a tenant's ``max_input_bytes`` is reused for its uploads' budgets (the
#: gateway's per-tenant rate is cached as long: ``facegate.ratelimit.gateway``).
INPUT_LIMIT_CACHE_SECONDS = 5.0
#: Tenants whose limit is remembered at once (past it the oldest are forgotten).
INPUT_LIMIT_CACHE_ENTRIES = 4096
PrincipalDependency = PrincipalScheme | OptionalPrincipal


def body_budget(setting: str) -> Callable[[F], F]:
    """Give a route the body budget of the ``Settings`` field ``setting`` (plus the form's
    overhead) instead of the tenant's ``max_input_bytes``: model files, or an upload open
    to callers without credentials (``POST /v1/verify``)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _BUDGET_ATTRIBUTE, setting)
        return endpoint

    return mark


def public_upload(setting: str) -> Callable[[F], F]:
    """Mark an upload route open to callers without credentials: with valid ones its budget
    is the ``Settings`` field ``setting`` (as :func:`body_budget`); without them the public
    uploads' share, budget and deadline (the module's docstring, point 4)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _BUDGET_ATTRIBUTE, setting)
        setattr(endpoint, _PUBLIC_ATTRIBUTE, True)
        return endpoint

    return mark


@dataclass(frozen=True)
class RouteBody:
    """What a route's body needs before it may be read."""

    kind: BodyKind
    scheme: PrincipalDependency | None  # the route's principal dependency, if it has one
    setting: str | None = None  # kind "setting": the Settings field holding the budget
    public: bool = False  # a public upload (:func:`public_upload`)


def _schemes(dependant: Dependant) -> Iterator[PrincipalDependency]:
    for dependency in dependant.dependencies:
        if isinstance(dependency.call, PrincipalScheme | OptionalPrincipal):
            yield dependency.call
        yield from _schemes(dependency)


def describe_route(route: APIRoute) -> RouteBody:
    """The body rules of ``route``, read from its declaration (its principal dependency and
    its body parameters)."""
    scheme = next(_schemes(route.dependant), None)
    setting: str | None = getattr(route.endpoint, _BUDGET_ATTRIBUTE, None)
    has_files = any(isinstance(p.field_info, params.File) for p in route.dependant.body_params)
    kind: BodyKind = "setting" if setting else ("upload" if has_files else "json")
    public = bool(getattr(route.endpoint, _PUBLIC_ATTRIBUTE, False))
    return RouteBody(kind, scheme=scheme, setting=setting, public=public)


def has_body(scope: Scope) -> bool:
    """Whether the request announces a body (a non-zero Content-Length, or chunked)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyBudget:
    """Counts a body as it arrives; raises when it goes over ``limit`` bytes or below the
    minimum rate (both as problems the middleware answers with)."""

    def __init__(
        self,
        limit: int,
        *,
        min_rate: float,
        grace: float,
        clock: Callable[[], float],
        wall: float | None = None,
    ) -> None:
        self.limit = limit
        self.min_rate = min_rate
        self.grace = grace
        self.clock = clock
        self.wall = wall  # seconds the whole body may take, whatever its rate (None: no cap)
        self.started = clock()
        self.received = 0

    def deadline(self) -> float:
        """When the next chunk must have arrived: the grace plus the time the bytes so far
        earned at the minimum rate, and never after the wall-clock deadline."""
        earned = self.started + self.grace + self.received / self.min_rate
        return earned if self.wall is None else min(earned, self.started + self.wall)

    def timeout(self) -> RequestTimeout:
        """The 408 of a body that missed :meth:`deadline`: the wall-clock deadline's when
        it was the nearer one (not "when the clock has passed it": a timer may fire a
        hair early)."""
        earned = self.started + self.grace + self.received / self.min_rate
        if self.wall is not None and self.started + self.wall <= earned:
            return RequestTimeout(
                f"the request body did not arrive within {self.wall:g} s "
                "(the deadline of a public upload)",
                limit="public_upload_deadline_seconds",
                limit_value=self.wall,
            )
        return RequestTimeout(
            f"the request body arrived too slowly (under {int(self.min_rate)} bytes per second)",
            limit="body_min_bytes_per_second",
            limit_value=int(self.min_rate),
        )

    def count(self, size: int) -> None:
        self.received += size
        if self.received > self.limit:
            raise PayloadTooLarge(
                f"the request body is over this route's {self.limit}-byte limit",
                limit="max_body_bytes",
                limit_value=self.limit,
            )


class BodyGuardMiddleware:
    """Authentication, scope and size decided from the headers; bodies read under budget."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.json_limit = settings.max_json_body_bytes
        self.min_rate = float(settings.body_min_bytes_per_second)
        self.grace = settings.body_grace_seconds
        self.clock: Callable[[], float] = time.monotonic
        self._routes: dict[int, RouteBody] = {}
        # tenant id -> (max_input_bytes, when read): INPUT_LIMIT_CACHE_SECONDS
        self._input_limits: dict[str, tuple[int, float]] = {}
        # Bodies one tenant may be sending at once (its keys may be spread over many
        # addresses, which the per-client share cannot see).
        self.per_tenant = settings.max_in_flight_per_tenant or settings.max_in_flight_requests // 4
        self.by_tenant = InFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        try:
            limit, wall = await self._admit(scope)
            tenant = self._hold_slot(scope)
        except (ProblemError, ServiceError) as error:
            await send_problem(scope, send, error)
            return
        budget = BodyBudget(
            limit, min_rate=self.min_rate, grace=self.grace, clock=self.clock, wall=wall
        )
        try:
            await self._run(scope, receive, send, budget)
        finally:
            if tenant is not None:
                self.by_tenant.remove(tenant)

    def _hold_slot(self, scope: Scope) -> str | None:
        """Count this body against its tenant's share (429 when the share is full)."""
        principal: Principal | None = scope.get("state", {}).get("principal")
        if principal is None or not self.per_tenant:
            return None
        tenant = principal.tenant_id
        held = self.by_tenant.held(tenant)
        if held >= self.per_tenant:
            raise RateLimited(
                f"this tenant has {held} request bodies in flight already; retry later",
                retry_after=self.settings.shed_retry_after_seconds,
                limit="max_in_flight_per_tenant",
                limit_value=self.per_tenant,
            )
        self.by_tenant.add(tenant)
        return tenant

    def _route(self, scope: Scope) -> RouteBody | None:
        found = RouteTable.of(scope["app"]).find(scope["method"], scope["path"])
        if found is None:
            return None
        route, path_params = found
        # What routing will set anyway, set now: the principal dependency reads the path's
        # tenant id, and metrics and logs label a refusal with its route.
        scope["route"], scope["path_params"] = route, path_params
        known = self._routes.get(id(route))
        if known is None:
            known = self._routes[id(route)] = describe_route(route)
        return known

    async def _admit(self, scope: Scope) -> tuple[int, float | None]:
        """The body budget of this request and its wall-clock deadline (None: only the
        minimum rate), after authentication, the scope check and the in-flight share."""
        route = self._route(scope)
        principal: Principal | None = None
        if route is not None and route.scheme is not None:
            principal = await route.scheme(Request(scope))
        public = route is not None and route.public and principal is None
        slot = slot_of(scope)
        if slot is not None and principal is None:
            # No valid credentials (none sent, or none this route checks): the share of
            # public uploads, or of every other request without credentials.
            slot.become("public" if public else "anonymous")
        wall: float | None = None
        if public:
            limit = self.settings.public_upload_max_bytes + FORM_OVERHEAD_BYTES
            wall = self.settings.public_upload_deadline_seconds
        else:
            limit = await self._limit(scope, route, principal)
        length = declared_length(scope)
        if length is not None and length > limit:
            raise PayloadTooLarge(
                f"the request body ({length} bytes) is over this route's {limit}-byte limit",
                limit="max_body_bytes",
                limit_value=limit,
            )
        return limit, wall

    async def _limit(self, scope: Scope, route: RouteBody | None, who: Principal | None) -> int:
        if route is not None and route.setting is not None:
            return int(getattr(self.settings, route.setting)) + FORM_OVERHEAD_BYTES
        if route is None or route.kind == "json" or who is None:
            return self.json_limit
        return 2 * await self._input_limit(scope, who.tenant_id) + FORM_OVERHEAD_BYTES

    async def _input_limit(self, scope: Scope, tenant_id: str) -> int:
        """The tenant's ``max_input_bytes``, read at most every INPUT_LIMIT_CACHE_SECONDS."""
        now = self.clock()
        cached = self._input_limits.get(tenant_id)
        if cached is not None and now - cached[1] < INPUT_LIMIT_CACHE_SECONDS:
            return cached[0]
        factory = get_state(Request(scope)).session_factory

        def max_input_bytes() -> int:
            with session_scope(factory, read_only=True) as session:
                return TenancyService(session).get_policy(tenant_id).max_input_bytes

        limit = await anyio.to_thread.run_sync(max_input_bytes)
        self._input_limits.pop(tenant_id, None)  # re-inserted last: the oldest go first
        if len(self._input_limits) >= INPUT_LIMIT_CACHE_ENTRIES:
            self._input_limits.pop(next(iter(self._input_limits)))
        self._input_limits[tenant_id] = (limit, now)
        return limit

    async def _run(self, scope: Scope, receive: Receive, send: Send, budget: BodyBudget) -> None:
        refusal: ProblemError | None = None
        started = False

        async def guarded_receive() -> Message:
            nonlocal refusal
            wait = max(0.0, budget.deadline() - budget.clock())
            try:
                with anyio.fail_after(wait):
                    message = await receive()
            except TimeoutError:
                refusal = budget.timeout()
                raise refusal from None
            if message["type"] == "http.request":
                try:
                    budget.count(len(message.get("body", b"")))
                except ProblemError as error:
                    refusal = error
                    raise
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refusal is not None and not started:
                return  # the app's answer to a body we cut off; ours goes instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except ProblemError as error:
            if error is not refusal or started:
                raise
        if refusal is not None and not started:
            await send_problem(scope, send, refusal)
