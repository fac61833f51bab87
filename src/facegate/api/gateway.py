"""The gateway's ASGI middleware: banned IPs and unauthenticated per-IP limits are refused
here, before any routing or authentication work; rate-limit headers go on every answer.

Per-tenant limits need the tenant, so they are applied where identity is resolved
(``facegate.api.deps.get_principal``) and only reported here, through the request state.
"""

from __future__ import annotations

import json
from typing import Any

from anyio import to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from facegate.api.errors import PROBLEM_CONTENT_TYPE, ProblemError, as_problem
from facegate.errors import ServiceError
from facegate.observability.metrics import request_banned
from facegate.ratelimit.clientip import client_ip, client_key
from facegate.ratelimit.gateway import Gateway
from facegate.ratelimit.limiter import Decision

# Probes and scrapes come from the cluster itself, often all from one address.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_CREDENTIAL_HEADERS = (b"authorization", b"x-api-key")


class Banned(ProblemError):
    """The client IP is banned after repeated failed authentications."""

    status = 403
    type_slug = "banned"
    title = "Banned"


def has_credentials(scope: Scope) -> bool:
    return any(name in _CREDENTIAL_HEADERS for name, _ in scope.get("headers", []))


async def send_problem(scope: Scope, send: Send, error: ProblemError | ServiceError) -> None:
    """Answer with ``error`` as problem+json from below the FastAPI handlers."""
    if isinstance(error, ServiceError):
        error = as_problem(error)
    body = error.to_problem(instance=scope.get("path"))
    request_id = scope.get("state", {}).get("request_id")
    if request_id:
        body["request_id"] = request_id
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
        (b"content-length", str(len(payload)).encode()),
    ]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class GatewayMiddleware:
    """Bans and per-IP limits at the door; ``RateLimit`` headers on the way out."""

    def __init__(self, app: ASGIApp, *, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        gateway = self.gateway
        # The client's key (its address, or its IPv6 /64): what bans and limits count.
        ip = client_key(client_ip(scope, gateway.trusted_proxies), gateway.ipv6_prefix)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["client_ip"] = ip
        state["gateway"] = gateway
        try:
            authenticated = has_credentials(scope)
            if gateway.remote:
                # Sync Redis calls go to a worker thread: a slow Redis must not stall the
                # loop. In memory there is no I/O, and a thread hop would cost more.
                decision = await to_thread.run_sync(_admit, gateway, ip, authenticated)
            else:
                decision = _admit(gateway, ip, authenticated)
            state["ratelimit"] = decision
        except (ProblemError, ServiceError) as error:
            await send_problem(scope, send, error)
            return

        async def send_with_headers(message: Message) -> None:
            decision: Decision | None = state.get("ratelimit")
            if message["type"] == "http.response.start" and decision is not None:
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                for name, value in decision.headers().items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _admit(gateway: Gateway, ip: str, authenticated: bool) -> Decision | None:
    """Refuse a banned IP; count an unauthenticated request against its IP's limit."""
    ban = gateway.active_ban(ip)
    if ban is not None:
        request_banned()
        retry = ban.retry_after(gateway.clock())
        raise Banned(
            "too many failed authentications from this address; retry later",
            headers={"Retry-After": str(retry)},
            retry_after=retry,
        )
    return None if authenticated else gateway.limit_ip(ip)
