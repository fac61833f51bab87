"""One error hierarchy with HTTP meaning, rendered as RFC 9457 ``application/problem+json``.

Services raise these (or engine errors); handlers registered by :func:`install_error_handlers`
turn every client-caused failure into a problem document with a stable ``type`` and the limit
that was hit where there is one. Anything unexpected becomes a 500 that leaks nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://facegate.dev/problems/"


class ProblemError(Exception):
    """An error the client can act on. ``extra`` fields are added to the problem document."""

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


class BadRequest(ProblemError):
    """Malformed request that is not a validation error of a declared field."""


class Unauthorized(ProblemError):
    """No credentials, or credentials that do not identify an active tenant."""

    status = 401
    type_slug = "unauthorized"
    title = "Unauthorized"

    def __init__(self, detail: str = "valid credentials are required", **extra: Any) -> None:
        extra.setdefault("headers", {"WWW-Authenticate": 'Bearer realm="facegate"'})
        super().__init__(detail, **extra)


class Forbidden(ProblemError):
    """Authenticated, but not allowed (missing scope, processor not in the plan, ...)."""

    status = 403
    type_slug = "forbidden"
    title = "Forbidden"


class NotFound(ProblemError):
    """Missing, or owned by another tenant: the two are indistinguishable on purpose."""

    status = 404
    type_slug = "not-found"
    title = "Not found"


class Conflict(ProblemError):
    status = 409
    type_slug = "conflict"
    title = "Conflict"


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


class UnprocessableEntity(ProblemError):
    status = 422
    type_slug = "unprocessable"
    title = "Unprocessable request"


class QuotaExceeded(ProblemError):
    """A policy quota was hit. ``limit`` names it; 429 (queue cap, with Retry-After), 413
    (one request over a size cap) or 507 (storage quota)."""

    status = 429
    type_slug = "quota-exceeded"
    title = "Quota exceeded"

    def __init__(
        self,
        detail: str,
        *,
        limit: str,
        value: int | float | str | None = None,
        status: int = 429,
        retry_after: int | None = None,
        **extra: Any,
    ) -> None:
        headers = dict(extra.pop("headers", None) or {})
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
            extra["retry_after"] = retry_after
        if value is not None:
            extra["limit_value"] = value
        super().__init__(detail, status=status, headers=headers, limit=limit, **extra)


class RateLimited(ProblemError):
    status = 429
    type_slug = "rate-limited"
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after: int, **extra: Any) -> None:
        super().__init__(
            detail, headers={"Retry-After": str(retry_after)}, retry_after=retry_after, **extra
        )


class ServiceUnavailable(ProblemError):
    status = 503
    type_slug = "service-unavailable"
    title = "Service unavailable"


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
