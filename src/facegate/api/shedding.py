"""Load shedding: refuse work with 503 + ``Retry-After`` instead of letting it pile up.

Two global caps (the specification's gateway protection, next to the circuit breakers of
``facegate.resilience``): requests in flight in this process, and jobs queued across all
tenants (checked when a job is submitted, before its upload is read). Each tenant's own
queue cap is a policy matter and stays in ``jobs.service`` (429).
"""

from __future__ import annotations

from typing import Any

import structlog
from anyio import to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from facegate.api.errors import ServiceUnavailable
from facegate.database import session_scope
from facegate.jobs.repository import JobRepository
from facegate.ratelimit.middleware import EXEMPT_PATHS, send_problem

SUBMIT_PATH = "/v1/jobs"
log = structlog.get_logger(__name__)


class Overloaded(ServiceUnavailable):
    """A global capacity cap is reached; ``limit`` names it."""

    type_slug = "overloaded"
    title = "Overloaded"


def _is_long_lived(path: str) -> bool:
    # Event streams stay open for a job's lifetime; they would hold slots for minutes.
    return path.endswith("/events")


class LoadSheddingMiddleware:
    """Caps requests in flight (``max_in_flight``) and queued jobs (``max_queued``)."""

    def __init__(
        self, app: ASGIApp, *, max_in_flight: int, max_queued: int, retry_after: int
    ) -> None:
        self.app = app
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.retry_after = retry_after
        self.in_flight = 0

    def _refusal(self, detail: str, limit: str, value: int) -> Overloaded:
        return Overloaded(
            detail,
            headers={"Retry-After": str(self.retry_after)},
            limit=limit,
            limit_value=value,
            retry_after=self.retry_after,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in EXEMPT_PATHS or _is_long_lived(path):
            await self.app(scope, receive, send)
            return
        if self.max_in_flight and self.in_flight >= self.max_in_flight:
            log.warning("shedding request", limit="max_in_flight_requests", path=path)
            refusal = self._refusal(
                "the server is at its limit of requests in flight; retry later",
                "max_in_flight_requests",
                self.max_in_flight,
            )
            await send_problem(scope, send, refusal)
            return
        # Counted on the event loop thread: no lock needed between the check and the add.
        self.in_flight += 1
        try:
            if self.max_queued and scope.get("method") == "POST" and path == SUBMIT_PATH:
                queued = await to_thread.run_sync(_count_queued, scope["app"])
                if queued >= self.max_queued:
                    log.warning("shedding job submission", queued=queued)
                    refusal = self._refusal(
                        f"{queued} jobs are queued on this service; retry later",
                        "max_queued_jobs_total",
                        self.max_queued,
                    )
                    await send_problem(scope, send, refusal)
                    return
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _count_queued(app: Any) -> int:
    with session_scope(app.state.facegate.session_factory) as session:
        return JobRepository(session).count_queued_all_tenants()
