"""Public liveness/readiness probe."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text

from facegate.api.errors import ServiceUnavailable
from facegate.api.state import AppState

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness and database readiness (public)")
def healthz(request: Request) -> dict[str, Any]:
    state: AppState = request.app.state.facegate
    try:
        with state.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        raise ServiceUnavailable("database unreachable") from exc
    return {"status": "ok"}
