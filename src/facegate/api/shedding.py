"""Load shedding: refuse work with 503 + ``Retry-After`` instead of letting it pile up.

Two global caps (the specification's gateway protection, next to the circuit breakers of
``facegate.resilience``): requests in flight in this process, and jobs queued across all
tenants (checked when a job is submitted, before its upload is read). Each tenant's own
queue cap is a policy matter and stays in ``jobs.service`` (429).

Counting the queue takes a database query and a worker-thread hop, more than the rest of
a submission's checks together, so :class:`QueuedEstimate` reuses a recent count while the
queue is far from the cap and counts exactly again near it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from anyio import to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from facegate.api.errors import ServiceUnavailable
from facegate.database import session_scope
from facegate.jobs.repository import JobRepository
from facegate.ratelimit.middleware import EXEMPT_PATHS, send_problem

SUBMIT_PATH = "/v1/jobs"
# How long a count of the queue may be reused while far from the cap.
QUEUED_COUNT_TTL_SECONDS = 1.0
log = structlog.get_logger(__name__)


class Overloaded(ServiceUnavailable):
    """A global capacity cap is reached; ``limit`` names it."""

    type_slug = "overloaded"
    title = "Overloaded"


def _is_long_lived(path: str) -> bool:
    # Event streams stay open for a job's lifetime; they would hold slots for minutes.
    return path.endswith("/events")


class QueuedEstimate:
    """The queued-jobs count, re-read at most every ``ttl`` seconds while it stays more
    than a tenth of ``cap`` below the cap. Each admitted submission adds one to the
    estimate (a refused upload only makes it err high), so near the cap every decision
    is taken on an exact count; what this process cannot see (other processes'
    submissions) is at most ``ttl`` seconds old."""

    def __init__(
        self, cap: int, *, ttl: float = QUEUED_COUNT_TTL_SECONDS, clock: Callable[[], float]
    ) -> None:
        self.cap = cap
        self.ttl = ttl
        self.clock = clock
        self.margin = max(1, cap // 10)
        self._count = 0
        self._read_at = -float("inf")

    def fresh(self) -> int | None:
        """The estimate when it may stand in for a count, else None (count again)."""
        if self.clock() - self._read_at > self.ttl or self._count + self.margin >= self.cap:
            return None
        return self._count

    def counted(self, queued: int) -> None:
        self._count, self._read_at = queued, self.clock()

    def admitted(self) -> None:
        self._count += 1


class LoadSheddingMiddleware:
    """Caps requests in flight (``max_in_flight``) and queued jobs (``max_queued``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_in_flight: int,
        max_queued: int,
        retry_after: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.retry_after = retry_after
        self.in_flight = 0
        self.queued = QueuedEstimate(max_queued, clock=clock)

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
                queued = self.queued.fresh()
                if queued is None:
                    queued = await to_thread.run_sync(_count_queued, scope["app"])
                    self.queued.counted(queued)
                if queued >= self.max_queued:
                    log.warning("shedding job submission", queued=queued)
                    refusal = self._refusal(
                        f"{queued} jobs are queued on this service; retry later",
                        "max_queued_jobs_total",
                        self.max_queued,
                    )
                    await send_problem(scope, send, refusal)
                    return
                self.queued.admitted()
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _count_queued(app: Any) -> int:
    with session_scope(app.state.facegate.session_factory) as session:
        return JobRepository(session).count_queued_all_tenants()
