"""The FastAPI application factory.

Routers and background services are listed here as ``"module:attribute"`` strings (the
same lazy registry pattern as the CLI): a domain package adds its router or its service by
appending one line.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI

from facegate.api.bodyguard import BodyGuardMiddleware
from facegate.api.deps import document_credentials
from facegate.api.gateway import GatewayMiddleware
from facegate.api.handlers import install_error_handlers
from facegate.api.metrics import install_observability
from facegate.api.middleware import RequestContextMiddleware
from facegate.api.shedding import LoadSheddingMiddleware
from facegate.database import (
    create_engine_from_url,
    create_session_factory,
    guard_engine,
    prepare_schema,
)
from facegate.library.analysis import AnalysisSlots
from facegate.models.requests import inference_pool_settings, installation_engine
from facegate.ratelimit.clientip import parse_networks
from facegate.ratelimit.gateway import Gateway
from facegate.resilience import BreakerConfig, CircuitBreaker
from facegate.settings import Settings
from facegate.state import AppState
from facegate.stream_registry import StreamRegistry
from facegate.tenancy.jwt import JwtVerifier

# APIRouter objects included in the app, in order.
ROUTERS: tuple[str, ...] = (
    "facegate.jobs.endpoints:router",
    "facegate.api.health:router",
    "facegate.tenancy.endpoints:router",
    "facegate.ratelimit.endpoints:router",
    "facegate.usage.endpoints:router",
    "facegate.observability.audit.endpoints:router",
    "facegate.observability.endpoints:router",
    "facegate.library.endpoints:detection_router",
    "facegate.models.endpoints:router",
    "facegate.provenance.endpoints:router",
    "facegate.webhooks.endpoints:router",
    "facegate.library.endpoints:router",
    "facegate.batches.endpoints:router",
    "facegate.templates.endpoints:router",
    "facegate.takedown.endpoints:router",
    "facegate.streams.endpoints:router",
    "facegate.api.console:router",
    "facegate.api.docs:router",
)

# A background service is a callable taking the AppState and returning an async context
# manager: entered after migrations at start-up, exited (in reverse order) at shutdown.
ServiceFactory = Callable[[AppState], AbstractAsyncContextManager[Any]]
SERVICES: tuple[str, ...] = (
    "facegate.worker.embedded:workers_service",
    "facegate.webhooks.runtime:deliveries_service",
    "facegate.streams.runtime:streams_service",
)


def default_services() -> list[ServiceFactory]:
    """The background services of ``SERVICES``, loaded."""
    return [load(name) for name in SERVICES]


def install_gateway(app: FastAPI, settings: Settings) -> None:
    """Add the middleware; call it before the request-context middleware is added, so that
    one stays outside (request ids on the gateway's refusals too). Order inside: shedding
    first (cheapest refusal), then bans and limits."""
    if settings.rate_limit_enabled:
        gateway = Gateway.from_settings(settings)
        app.state.gateway = gateway
        app.add_middleware(GatewayMiddleware, gateway=gateway)
    app.add_middleware(
        LoadSheddingMiddleware,
        max_in_flight=settings.max_in_flight_requests,
        per_client=settings.max_in_flight_per_client or settings.max_in_flight_requests // 16,
        unauthenticated=(
            settings.max_in_flight_unauthenticated or settings.max_in_flight_requests // 8
        ),
        public_uploads=(
            settings.max_in_flight_public_uploads or settings.max_in_flight_requests // 16
        ),
        trusted_proxies=parse_networks(settings.trusted_proxies),
        ipv6_prefix=settings.client_ipv6_prefix,
        max_queued=settings.max_queued_jobs_total,
        retry_after=settings.shed_retry_after_seconds,
    )


def load(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def create_app(
    settings: Settings,
    *,
    services: Sequence[ServiceFactory] | None = None,
    run_migrations: bool = True,
) -> FastAPI:
    """Build the app. ``services`` defaults to everything in ``SERVICES`` (tests pass an
    explicit list, e.g. ``[]`` to run without workers)."""
    factories: list[ServiceFactory] = list(services) if services is not None else default_services()
    # The engine runtime is built at start-up (below); a device this machine lacks stops
    # the start here already, before a server listens (InvalidSettings).
    inference_pool_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if run_migrations:
            prepare_schema(settings.database_url, settings.schema_on_start)
        engine = create_engine_from_url(settings.database_url)
        guard_engine(engine, CircuitBreaker("database", BreakerConfig.from_settings(settings)))
        state = AppState(
            settings=settings,
            engine=engine,
            session_factory=create_session_factory(engine),
            jwt_verifier=JwtVerifier.from_settings(settings),
            face_engine=installation_engine(settings),
            face_analysis=AnalysisSlots(
                settings.face_analysis_slots, settings.face_analysis_per_tenant
            ),
            public_verify_limiter=anyio.CapacityLimiter(settings.public_verify_concurrency),
            streams=StreamRegistry(
                settings.streams_per_process,
                cores=settings.stream_core_budget(),
                min_cores=settings.stream_min_cores,
            ),
        )
        app.state.facegate = state
        try:
            async with AsyncExitStack() as stack:
                for factory in factories:
                    await stack.enter_async_context(factory(state))
                yield
        finally:
            if state.stream_engines is not None:
                await anyio.to_thread.run_sync(state.stream_engines.close)
            state.face_engine.close()
            state.reads.close()
            engine.dispose()

    app = FastAPI(
        title="facegate",
        version="0.1.0",
        description="Multi-tenant face swap. Errors are RFC 9457 application/problem+json.",
        lifespan=lifespan,
        # Swagger UI from this installation (facegate.api.docs), not from a CDN; no ReDoc.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    # Innermost: authentication and body budgets before a body is read (needs the client IP
    # and the gateway, which the next middleware puts on the request).
    app.add_middleware(BodyGuardMiddleware, settings=settings)
    install_gateway(app, settings)  # rate limits, bans, load shedding (inside the next one)
    app.add_middleware(RequestContextMiddleware, hsts=settings.tls_enabled)
    # After the request-context middleware: the metrics/access-log one is then outermost.
    install_observability(app, settings)
    for name in ROUTERS:
        router = load(name)
        assert isinstance(router, APIRouter), name
        app.include_router(router)
    # The console's scripts and styles (a Mount, so not in ROUTERS); its page is at "/".
    load("facegate.api.console:mount_console_assets")(app)
    load("facegate.api.docs:mount_docs_assets")(app)
    document_credentials(app)
    return app
