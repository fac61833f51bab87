"""``/metrics`` (Prometheus exposition) and ``/readyz`` (readiness)."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from facegate.api.readiness import run_checks
from facegate.errors import Forbidden, Unauthenticated
from facegate.jobs.gauges import JobGaugeCollector
from facegate.observability.metrics import exposition
from facegate.ratelimit.clientip import client_ip, parse_networks
from facegate.state import AppState
from facegate.takedown.gauges import TakedownGaugeCollector

router = APIRouter(tags=["operations"])


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.facegate
    return state


@router.get(
    "/metrics",
    summary="Prometheus metrics (text exposition)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(request: Request) -> Response:
    """Every process's metrics (multiprocess mode) and the queue gauges from the database.
    When ``FACEGATE_METRICS_TOKEN`` is set, a scrape must send it as a bearer token;
    otherwise only private addresses may scrape (unless ``FACEGATE_METRICS_PUBLIC``)."""
    state = _state(request)
    settings = state.settings
    token = settings.metrics_token
    if token is None and not settings.metrics_public and not _private_peer(request):
        # Tenant labels say who uses the service and how much: not for the internet.
        raise Forbidden(
            "/metrics answers scrapers on private addresses only; "
            "set FACEGATE_METRICS_TOKEN to scrape it from elsewhere"
        )
    if token is not None:
        presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(presented.encode(), token.get_secret_value().encode()):
            raise Unauthenticated("this scrape needs the metrics token")
    collectors = [JobGaugeCollector(state.engine), TakedownGaugeCollector(state.engine)]
    body, content_type = await anyio.to_thread.run_sync(lambda: exposition(collectors))
    return Response(body, media_type=content_type)


def _private_peer(request: Request) -> bool:
    """Whether the client (past trusted proxies) is on loopback or a private network: a
    cluster's scraper is, an internet client is not."""
    proxies = parse_networks(_state(request).settings.trusted_proxies)
    try:
        return ipaddress.ip_address(client_ip(request.scope, proxies)).is_private
    except ValueError:  # no peer address at all (an in-process transport)
        return True


@router.get("/readyz", summary="Readiness: database, storage, Redis, models (public)")
async def readyz(request: Request) -> Any:
    results = await anyio.to_thread.run_sync(run_checks, _state(request))
    ready = all(value in {"ok", "not configured"} for value in results.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": results},
        status_code=200 if ready else 503,
    )
