"""HTTP metrics and the access log, as one pure ASGI middleware.

It is the outermost middleware, so it sees the status the client gets (including the
request-context middleware's last-resort 500). The ``route`` label is the matched route's
template (``/v1/jobs/{job_id}``), never the raw path: raw paths hold ids and would make a
series per job. Unmatched paths share one label.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from facegate.observability import metrics
from facegate.observability.labels import tenant_label
from facegate.observability.logging import (
    bind_request_scope,
    configure_logging,
    reset_request_scope,
)
from facegate.settings import Settings

UNMATCHED_ROUTE = "<unmatched>"
# Scrapes and probes are frequent and say nothing about traffic: counted, not logged.
QUIET_ROUTES = frozenset({"/metrics", "/healthz", "/readyz"})

log = structlog.get_logger("facegate.http")


def route_template(scope: Scope) -> str:
    route: Any = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    if not path:
        return UNMATCHED_ROUTE
    root = scope.get("root_path", "")
    return f"{root}{path}" if root and not path.startswith(root) else str(path)


class ObservabilityMiddleware:
    """Counts and times every HTTP request by route template, method and status, writes one
    access-log event, and exposes the scope to the log processors (tenant, request id)."""

    def __init__(self, app: ASGIApp, *, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        # A keep-alive connection starts each request's task from the previous one's
        # context: drop its log context (request id, tenant) before anything logs.
        structlog.contextvars.clear_contextvars()
        token = bind_request_scope(scope)  # type: ignore[arg-type]

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = time.perf_counter() - started
            route = route_template(scope)
            method = str(scope.get("method", ""))
            metrics.HTTP_REQUESTS.labels(route, method, str(status)).inc()
            metrics.HTTP_DURATION.labels(route, method).observe(elapsed)
            if self.access_log and route not in QUIET_ROUTES:
                log.info(
                    "http.request",
                    method=method,
                    route=route,
                    status=status,
                    duration_ms=round(elapsed * 1000, 2),
                )
            reset_request_scope(token)


def install_observability(app: FastAPI, settings: Settings) -> None:
    """Logging configuration, the tenant-label cap, the model-load hook and this middleware;
    ``create_app`` calls it after adding its own middleware, so this one is outermost and
    sees the final status."""
    configure_logging(settings.log_level, fmt=settings.log_format, secrets=settings.secret_values())
    tenant_label.reconfigure(settings.metrics_tenant_cap)
    if settings.metrics_enabled:
        app.add_middleware(ObservabilityMiddleware, access_log=settings.access_log)
