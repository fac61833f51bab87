"""The service's error vocabulary: what went wrong, in the caller's terms, without HTTP.

Services, repositories, the worker and the CLI raise these; each carries a stable ``code``
(the problem type an API client sees, the ``error_type`` a failed job records), a
``detail`` for people and ``extra`` fields that name the limit hit where there is one.
No status codes here: ``facegate.api.errors.PROBLEM_STATUS`` maps each kind, and each of the
engine's errors, to its HTTP status and title in one table.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ServiceError(Exception):
    """A failure the caller can act on. ``extra`` fields go into the problem document."""

    code: ClassVar[str] = "bad-request"

    def __init__(self, detail: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code  # type: ignore[misc]
        self.extra = extra

    @property
    def retry_after(self) -> int | None:
        """Seconds after which the same call may succeed, when that is known."""
        value = self.extra.get("retry_after")
        return value if isinstance(value, int) else None


class BadRequest(ServiceError):
    """A malformed request that is not a validation error of a declared field."""


class Unauthenticated(ServiceError):
    """No credentials, or credentials that do not identify an active tenant."""

    code = "unauthorized"

    def __init__(self, detail: str = "valid credentials are required", **extra: Any) -> None:
        super().__init__(detail, **extra)


class Forbidden(ServiceError):
    """Authenticated, but not allowed (missing scope, processor not in the plan, ...)."""

    code = "forbidden"


class NotFound(ServiceError):
    """Missing, or owned by another tenant: the two are indistinguishable on purpose."""

    code = "not-found"


class Conflict(ServiceError):
    """The object is not in a state that allows the operation."""

    code = "conflict"


class Gone(ServiceError):
    """It existed and was removed on purpose (a takedown): 410, naming the case."""

    code = "gone"


class ContentTakenDown(ServiceError):
    """An input is a taken-down image or face: 451 Unavailable For Legal Reasons."""

    code = "content-taken-down"


class InvalidInput(ServiceError):
    """Well-formed, but refused: options, a consent attestation, a model file, a cursor."""

    code = "unprocessable"


class QuotaExceeded(ServiceError):
    """A policy quota was hit; ``limit`` names it and ``limit_value`` gives its value."""

    code = "quota-exceeded"

    def __init__(
        self,
        detail: str,
        *,
        limit: str,
        value: int | float | str | None = None,
        retry_after: int | None = None,
        **extra: Any,
    ) -> None:
        if retry_after is not None:
            extra["retry_after"] = retry_after
        if value is not None:
            extra["limit_value"] = value
        super().__init__(detail, limit=limit, **extra)


class OutOfStorage(QuotaExceeded):
    """The tenant's storage quota cannot hold what the request would store."""


class MemoryBudgetExceeded(ServiceError):
    """A job's estimated peak memory (facegate.jobs.cost) is more than a worker may hold:
    at submission, more than every live worker's budget; on a worker, once the target is
    decoded, more than its own budget. ``limit_value`` is the budget, ``estimated_bytes``
    the job's figure."""

    code = "memory-budget-exceeded"

    def __init__(self, detail: str, *, estimated_bytes: int, budget_bytes: int) -> None:
        super().__init__(
            detail,
            limit="worker_memory_bytes",
            limit_value=budget_bytes,
            estimated_bytes=estimated_bytes,
        )


class RateLimited(ServiceError):
    """Too many calls in the window; ``retry_after`` says when the next one is allowed."""

    code = "rate-limited"

    def __init__(self, detail: str, *, retry_after: int, **extra: Any) -> None:
        super().__init__(detail, retry_after=retry_after, **extra)


class Unavailable(ServiceError):
    """A dependency (database, Redis, object store, signing key) cannot serve for now."""

    code = "service-unavailable"


class SchemaNotCurrent(RuntimeError):
    """The database is not at this release's head revision (and this process may not
    migrate it)."""


class InvalidSettings(ValueError):
    """A ``FACEGATE_*`` setting this process cannot start with: out of range, of the wrong
    type, or asking for what this machine lacks (a CUDA device). The message names the
    variable; the CLI prints it as one line."""
