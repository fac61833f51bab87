"""The database being unreachable (restart, failover, network) is a 503, not a 500.

While PostgreSQL restarts every request that needs it fails with a driver error; clients
get ``503 service-unavailable`` problem+json with ``Retry-After`` and come back, and the
pool (``pool_pre_ping``) reconnects by itself once the server is back.
"""

from __future__ import annotations

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc

from facegate.api.errors import problem_document

RETRY_AFTER_SECONDS = 5

# OperationalError: connection refused/lost, server shutting down, SQLite locked;
# InterfaceError: a closed connection; TimeoutError: no pooled connection came free.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
)

log = structlog.get_logger(__name__)


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    from facegate.api.handlers import problem_response

    log.warning("database.unavailable", error=type(exc).__name__, path=request.url.path)
    body = problem_document(
        503,
        "service-unavailable",
        "Service unavailable",
        "the database is unreachable for the moment; retry shortly",
        retry_after=RETRY_AFTER_SECONDS,
    )
    return problem_response(request, body, {"Retry-After": str(RETRY_AFTER_SECONDS)})
