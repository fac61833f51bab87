"""Errors as RFC 9457 ``application/problem+json``: the HTTP side of the error vocabulary.

Services raise ``facegate.errors`` (and the engine ``facegate.engine.errors``); this module
maps each kind to a status and title in one table (``PROBLEM_STATUS``), and handlers
registered by ``facegate.api.handlers.install_error_handlers`` turn every client-caused
failure into a problem document with a stable ``type`` and the limit that was hit where
there is one. ``ProblemError`` is for the HTTP layer's own refusals (a body too slow or too
big, an overloaded server, a banned address). Anything unexpected becomes a 500 that leaks
nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar

from facegate import errors
from facegate.engine import errors as engine_errors
from facegate.provenance.errors import ProvenanceUnavailable
from facegate.ratelimit.gateway import LimitReached

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://facegate.dev/problems/"


class ProblemError(Exception):
    """An HTTP answer the client can act on. ``extra`` fields are added to the problem
    document."""

    status: ClassVar[int] = 400
    type_slug: ClassVar[str] = "bad-request"
    title: ClassVar[str] = "Bad request"

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        type_slug: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status  # type: ignore[misc]
        if type_slug is not None:
            self.type_slug = type_slug  # type: ignore[misc]
        self.headers = dict(headers or {})
        self.extra = extra

    def to_problem(self, instance: str | None = None) -> dict[str, Any]:
        return problem_document(
            self.status, self.type_slug, self.title, self.detail, instance, **self.extra
        )


class RequestTimeout(ProblemError):
    """The request body did not arrive in time (too slow a client)."""

    status = 408
    type_slug = "request-timeout"
    title = "Request timeout"


class PayloadTooLarge(ProblemError):
    """A request body over its route's budget (``limit`` names the setting)."""

    status = 413
    type_slug = "payload-too-large"
    title = "Payload too large"


# The one table from the engine's and the service's errors to HTTP: (status, title). The
# most derived class of an error that is listed wins.
PROBLEM_STATUS: dict[type[Exception], tuple[int, str]] = {
    engine_errors.UnsupportedMedia: (415, "Unsupported media type"),
    engine_errors.MediaTooLarge: (413, "Media too large"),
    engine_errors.CorruptMedia: (422, "Corrupt media"),
    engine_errors.NoFaceDetected: (422, "No face detected"),
    engine_errors.SourceUnusable: (422, "Source face unusable"),
    engine_errors.WeakSwap: (422, "Swap did not carry the identity"),
    engine_errors.InvalidOptions: (422, "Invalid options"),
    engine_errors.ModelUnavailable: (503, "Model unavailable"),
    engine_errors.Cancelled: (409, "Cancelled"),
    engine_errors.ContentPolicyViolation: (422, "Content policy violation"),
    engine_errors.EngineError: (422, "Media rejected"),
    errors.BadRequest: (400, "Bad request"),
    errors.Unauthenticated: (401, "Unauthorized"),
    errors.Forbidden: (403, "Forbidden"),
    errors.NotFound: (404, "Not found"),
    errors.Gone: (410, "Gone"),
    errors.ContentTakenDown: (451, "Unavailable for legal reasons"),
    errors.Conflict: (409, "Conflict"),
    errors.InvalidInput: (422, "Unprocessable request"),
    errors.MemoryBudgetExceeded: (422, "Memory budget exceeded"),
    errors.QuotaExceeded: (429, "Quota exceeded"),
    errors.OutOfStorage: (507, "Quota exceeded"),
    errors.RateLimited: (429, "Too many requests"),
    errors.Unavailable: (503, "Service unavailable"),
    ProvenanceUnavailable: (503, "Results cannot be marked"),
    errors.ServiceError: (400, "Bad request"),
}
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="facegate"'}


def as_problem(exc: engine_errors.EngineError | errors.ServiceError) -> ProblemError:
    """The problem an engine or service error answers with, from ``PROBLEM_STATUS``:
    ``Retry-After`` where the error knows when to retry, the Bearer challenge on 401."""
    status, title = next(
        PROBLEM_STATUS[kind] for kind in type(exc).__mro__ if kind in PROBLEM_STATUS
    )
    extra: dict[str, Any]
    headers: dict[str, str] = {}
    if isinstance(exc, errors.ServiceError):
        extra = dict(exc.extra)
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        if isinstance(exc, errors.Unauthenticated):
            headers.update(BEARER_CHALLENGE)
        if isinstance(exc, LimitReached):
            headers.update(exc.decision.headers())
    elif isinstance(exc, engine_errors.MediaTooLarge):
        extra = {"limit": exc.limit_name, "limit_value": exc.limit, "actual": exc.actual}
    else:
        extra = {}
    problem = ProblemError(exc.detail, status=status, type_slug=exc.code, headers=headers, **extra)
    problem.title = title  # type: ignore[misc]
    return problem


def problem_document(
    status: int,
    type_slug: str,
    title: str,
    detail: str,
    instance: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + type_slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    body.update(extra)
    return body


_PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "request_id": {"type": "string"},
        "limit": {"type": "string"},
    },
    "additionalProperties": True,
}


def problem_openapi(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": _PROBLEM_SCHEMA}},
    }


# Spread into a route's ``responses=`` so OpenAPI declares the problem documents.
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: problem_openapi("Malformed request"),
    401: problem_openapi("Missing or invalid credentials"),
    403: problem_openapi("Not allowed (scope, policy)"),
    404: problem_openapi("Not found (or owned by another tenant)"),
    422: problem_openapi("Invalid request"),
    429: problem_openapi("Rate limit, in-flight share or queue quota exceeded"),
    503: problem_openapi("Overloaded, or a dependency is unavailable (Retry-After)"),
}
# Routes that take a body: it may be over its budget or arrive too slowly.
BODY_PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    **PROBLEM_RESPONSES,
    408: problem_openapi("The request body arrived too slowly"),
    413: problem_openapi("The request body is over this route's limit"),
}
UPLOAD_PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    **BODY_PROBLEM_RESPONSES,
    413: problem_openapi("Upload over a size limit"),
    415: problem_openapi("Unsupported media type"),
    507: problem_openapi("Storage quota exceeded"),
}


def document_body_problems(schema: dict[str, Any]) -> None:
    """Declare in the OpenAPI ``schema`` the 408 and 413 every operation with a request
    body may answer (``facegate.api.bodyguard``'s refusals)."""
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                responses = operation.setdefault("responses", {})
                for status, response in BODY_PROBLEM_RESPONSES.items():
                    responses.setdefault(str(status), response)
