"""Wire the gateway into an app: rate limits and bans, load shedding."""

from __future__ import annotations

from fastapi import FastAPI

from facegate.api.shedding import LoadSheddingMiddleware
from facegate.ratelimit.clientip import parse_networks
from facegate.ratelimit.gateway import Gateway
from facegate.ratelimit.middleware import GatewayMiddleware
from facegate.settings import Settings


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
        trusted_proxies=parse_networks(settings.trusted_proxies),
        max_queued=settings.max_queued_jobs_total,
        retry_after=settings.shed_retry_after_seconds,
    )
