"""The queue as a port: what a worker asks of the job queue, whatever stores it.

``JobQueue`` is the one interface for the claim (fair, in batches), leases (renew,
progress, release, finish), the reaper, worker heartbeats and wake-ups. Three
implementations share one contract test (``tests/queue/test_contract.py``):
``queue.sql.SqlQueue`` (SQLite, or PostgreSQL behind one lock), ``queue.sql.PostgresQueue``
(the cluster shape: per-tenant locks, LISTEN/NOTIFY) and ``queue.memory.MemoryQueue``.

Every lease operation is guarded by the claim's ``lease_owner`` and ``status='running'``:
a worker that lost its lease (the reaper requeued the job, another worker re-ran it) can
neither report progress nor finish the job, so no job is finished twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from facegate.queue.claim import Claim
from facegate.queue.fairness import ANY_FIT, Fit
from facegate.queue.leases import LeaseState, Reaped

#: A worker silent for this many heartbeat intervals is reported lost.
LOST_AFTER_INTERVALS = 3


@dataclass(frozen=True)
class WorkerInfo:
    """Who a worker process is, for its heartbeat row."""

    id: str
    hostname: str
    pid: int
    tenants: list[str] | None
    concurrency: int
    # The estimated peak memory it takes on at once (None: no budget); the API refuses a
    # job whose estimate is over every live worker's (facegate.jobs.capacity).
    memory_budget_bytes: int | None = None


class JobQueue(Protocol):
    """Claim, leases, reaper, heartbeats and wake-ups of one queue."""

    # claim
    def claim_many(
        self,
        worker_id: str,
        *,
        limit: int,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> list[Claim]:
        """Up to ``limit`` jobs in fair order, each tenant within its caps, that ``fit``
        (the worker's lane and free memory budget) admits."""
        ...

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> Claim | None: ...

    # leases
    def renew(self, claim: Claim, lease_seconds: float) -> LeaseState: ...

    def report_progress(
        self,
        claim: Claim,
        progress: float,
        stage: str,
        detail: dict[str, Any] | None = None,
    ) -> LeaseState: ...

    def release(self, claim: Claim) -> bool:
        """Give a held job back to the queue without spending an attempt."""
        ...

    def finish(self, claim: Claim, status: str, **values: Any) -> bool:
        """Move a held job to a terminal status; False when the lease was lost."""
        ...

    # reaper
    def reap(self) -> list[Reaped]:
        """Requeue running jobs whose lease expired; fail those out of attempts."""
        ...

    # heartbeats
    def register_worker(self, worker: WorkerInfo) -> None: ...

    def beat_worker(
        self, worker_id: str, *, status: str, running_jobs: int, stale_after_seconds: float
    ) -> int | None:
        """Refresh a worker's row and mark silent workers lost: how many were, or None when
        the worker has no row (it must register)."""
        ...

    def stop_worker(self, worker_id: str) -> None: ...

    # wake-ups
    def listen(self, on_queued: Callable[[str], None]) -> Callable[[], None]:
        """Call ``on_queued(tenant_id)`` (or ``"*"``: look anyway) when a job may have
        become claimable; returns the function that stops listening."""
        ...

    def announce(self, tenant_id: str) -> None:
        """A job of ``tenant_id`` was queued by this process (after its commit)."""
        ...
