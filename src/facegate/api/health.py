"""Public liveness probe (``/readyz``, the readiness probe, is in facegate.observability)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness (public): the process answers")
async def healthz() -> dict[str, Any]:
    """Alive means the event loop answers. It checks no dependency on purpose: a database
    outage must make pods unready (``/readyz``), not get them restarted."""
    return {"status": "ok"}
