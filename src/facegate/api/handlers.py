"""Exception handlers: every error leaves as RFC 9457 problem+json.

The database being unreachable (restart, failover, network) is a 503, not a 500: while
PostgreSQL restarts every request that needs it fails with a driver error; clients get
``503 service-unavailable`` with ``Retry-After`` and come back, and the pool
(``pool_pre_ping``) reconnects by itself once the server is back.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from facegate import errors
from facegate.api.errors import PROBLEM_CONTENT_TYPE, ProblemError, as_problem, problem_document
from facegate.api.routetable import RouteTable
from facegate.engine import errors as engine_errors

log = structlog.get_logger(__name__)

DATABASE_RETRY_AFTER_SECONDS = 5

# OperationalError: connection refused/lost, server shutting down, SQLite locked;
# InterfaceError: a closed connection; TimeoutError: no pooled connection came free.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
)

_HTTP_SLUGS = {
    400: ("bad-request", "Bad request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    406: ("not-acceptable", "Not acceptable"),
    413: ("payload-too-large", "Payload too large"),
    415: ("unsupported-media", "Unsupported media type"),
}


def problem_response(
    request: Request, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    request_id = getattr(request.state, "request_id", None)
    if request_id:
        body.setdefault("request_id", request_id)
    body.setdefault("instance", request.url.path)
    return JSONResponse(
        body, status_code=int(body["status"]), headers=headers, media_type=PROBLEM_CONTENT_TYPE
    )


async def _problem_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(request, exc.to_problem(), exc.headers)


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, engine_errors.EngineError | errors.ServiceError)
    problem = as_problem(exc)
    return problem_response(request, problem.to_problem(), problem.headers)


def _jsonable_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Only loc/msg/type: the raw input and ctx may hold bytes or objects (and user data).
    return [
        {
            "loc": [str(part) for part in error.get("loc", ())],
            "msg": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors()
    ]


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _jsonable_errors(exc)
    detail = "invalid request"
    if errors:
        location = ".".join(errors[0]["loc"])
        detail = f"{location}: {errors[0]['msg']}" if location else str(errors[0]["msg"])
    body = problem_document(422, "validation-error", "Invalid request", detail, errors=errors)
    return problem_response(request, body)


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    slug, title = _HTTP_SLUGS.get(exc.status_code, (f"http-{exc.status_code}", "Error"))
    detail: str = exc.detail if isinstance(exc.detail, str) else title
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        # Starlette names only the methods of the first route matching the path; a path
        # served by several routes (GET and POST /v1/jobs) allows all of theirs.
        allowed = RouteTable.of(request.app).allowed(request.url.path)
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
    body = problem_document(exc.status_code, slug, title, detail)
    return problem_response(request, body, headers)


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database.unavailable", error=type(exc).__name__, path=request.url.path)
    body = problem_document(
        503,
        "service-unavailable",
        "Service unavailable",
        "the database is unreachable for the moment; retry shortly",
        retry_after=DATABASE_RETRY_AFTER_SECONDS,
    )
    return problem_response(request, body, {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})


def internal_error_body() -> dict[str, Any]:
    return problem_document(
        500,
        "internal-error",
        "Internal server error",
        "the server failed to handle this request; quote the request id when reporting it",
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProblemError, _problem_error)
    app.add_exception_handler(errors.ServiceError, _service_error)
    app.add_exception_handler(engine_errors.EngineError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    for database_error in UNAVAILABLE_ERRORS:
        app.add_exception_handler(database_error, _database_unavailable)
