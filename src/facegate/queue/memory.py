"""The queue in memory: the JobQueue port without a database, for unit tests of the code
that drives a queue (the same contract test as SQLite and PostgreSQL holds it to the same
behaviour). One lock serialises every operation, as SQLite's write lock does."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from facegate.database import utcnow
from facegate.queue.claim import Claim, ClaimOne
from facegate.queue.fairness import (
    ANY_FIT,
    Fit,
    QueuedJob,
    TenantLimits,
    TenantLoad,
    plan_claims,
)
from facegate.queue.leases import LeaseState, Reaped, lease_expired_detail
from facegate.queue.notify import ANY_TENANT
from facegate.queue.port import WorkerInfo


@dataclass
class MemoryJob:
    """A job row of the in-memory queue (the fields the queue reads and writes)."""

    id: uuid.UUID
    tenant_id: str
    priority: int = 0
    created_at: datetime = field(default_factory=utcnow)
    status: str = "queued"
    attempts: int = 0
    max_attempts: int = 3
    cancel_requested: bool = False
    holds_device: bool = False
    estimated_seconds: float | None = None
    memory_bytes: int | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    progress: float = 0.0
    stage: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


#: Fields of MemoryJob a finish may set (the others land in ``values``).
_COLUMNS = frozenset({"progress", "stage", "cancel_requested"})


@dataclass
class MemoryWorker:
    info: WorkerInfo
    status: str
    running_jobs: int
    heartbeat_at: datetime


class MemoryQueue(ClaimOne):
    """JobQueue in memory. ``add_tenant`` / ``add_job`` / ``cancel`` stand in for the
    service's submissions; ``jobs`` and ``workers`` are there to be read."""

    def __init__(self) -> None:
        self.jobs: dict[uuid.UUID, MemoryJob] = {}
        self.limits: dict[str, TenantLimits | None] = {}
        self.workers: dict[str, MemoryWorker] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []

    # what the service side does
    def add_tenant(self, tenant_id: str, limits: TenantLimits | None) -> None:
        """A tenant with its caps, or None when it may not run jobs (suspended)."""
        with self._lock:
            self.limits[tenant_id] = limits

    def add_job(self, job: MemoryJob) -> MemoryJob:
        with self._lock:
            self.jobs[job.id] = job
        self.announce(job.tenant_id)
        return job

    def cancel(self, job_id: uuid.UUID) -> None:
        with self._lock:
            self.jobs[job_id].cancel_requested = True

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
        with self._lock:
            queued = [
                QueuedJob(
                    j.id, j.tenant_id, j.priority, j.created_at, j.estimated_seconds, j.memory_bytes
                )
                for j in self.jobs.values()
                if j.status == "queued"
            ]
            chosen = plan_claims(
                queued, self._loads(), self.limits, limit=limit, uses_device=uses_device, fit=fit
            )
            now = utcnow()
            expires = now + timedelta(seconds=lease_seconds)
            claims = []
            for candidate in chosen:
                job = self.jobs[candidate.id]
                job.status, job.attempts = "running", job.attempts + 1
                job.lease_owner, job.lease_expires_at = worker_id, expires
                job.progress, job.stage, job.holds_device = 0.0, "claimed", uses_device
                if job.values.get("started_at") is None:  # the first start is kept
                    job.values["started_at"] = now
                claims.append(
                    Claim(
                        job.id,
                        job.tenant_id,
                        job.attempts,
                        worker_id,
                        expires,
                        job.memory_bytes or 0,
                    )
                )
            return claims

    def _loads(self) -> dict[str, TenantLoad]:
        loads: dict[str, TenantLoad] = {}
        for job in self.jobs.values():
            if job.status == "running" and job.lease_owner is not None:
                load = loads.get(job.tenant_id, TenantLoad())
                loads[job.tenant_id] = TenantLoad(
                    load.running + 1, load.devices + int(job.holds_device)
                )
        return loads

    # leases
    def _held(self, claim: Claim) -> MemoryJob | None:
        job = self.jobs.get(claim.job_id)
        if job is None or job.status != "running" or job.lease_owner != claim.lease_owner:
            return None
        return job

    def renew(self, claim: Claim, lease_seconds: float) -> LeaseState:
        with self._lock:
            job = self._held(claim)
            if job is None:
                return LeaseState(held=False, cancel_requested=True)
            job.lease_expires_at = utcnow() + timedelta(seconds=lease_seconds)
            return LeaseState(held=True, cancel_requested=job.cancel_requested)

    def report_progress(
        self,
        claim: Claim,
        progress: float,
        stage: str,
        detail: dict[str, Any] | None = None,
    ) -> LeaseState:
        with self._lock:
            job = self._held(claim)
            if job is None:
                return LeaseState(held=False, cancel_requested=True)
            job.progress, job.stage = max(0.0, min(1.0, progress)), stage[:64]
            if detail is not None:
                job.values["progress_detail"] = detail
            return LeaseState(held=True, cancel_requested=job.cancel_requested)

    def release(self, claim: Claim) -> bool:
        with self._lock:
            job = self._held(claim)
            if job is None:
                return False
            job.status, job.stage, job.progress = "queued", "requeued", 0.0
            job.attempts -= 1
            job.lease_owner = job.lease_expires_at = None
        self.announce(job.tenant_id)
        return True

    def finish(self, claim: Claim, status: str, **values: Any) -> bool:
        with self._lock:
            job = self._held(claim)
            if job is None:
                return False
            job.status = status
            job.lease_owner = job.lease_expires_at = None
            for name, value in {**values, "finished_at": utcnow()}.items():
                if name in _COLUMNS:
                    setattr(job, name, value)
                else:
                    job.values[name] = value
            return True

    # reaper
    def reap(self) -> list[Reaped]:
        now = utcnow()
        reaped: list[Reaped] = []
        with self._lock:
            for job in self.jobs.values():
                expires = job.lease_expires_at
                if job.status != "running" or expires is None or expires >= now:
                    continue
                if job.attempts >= job.max_attempts:
                    outcome = job.status = job.stage = "failed"
                    job.values.update(
                        finished_at=now,
                        error_type="lease-expired",
                        error_detail=lease_expired_detail(job.attempts),
                    )
                else:
                    job.status, job.stage, job.progress = "queued", "requeued", 0.0
                    outcome = "requeued"
                job.lease_owner = job.lease_expires_at = None
                reaped.append(Reaped(job.id, job.tenant_id, outcome))
        for item in reaped:
            if item.outcome == "requeued":
                self.announce(item.tenant_id)
        return reaped

    # heartbeats
    def register_worker(self, worker: WorkerInfo) -> None:
        with self._lock:
            self.workers[worker.id] = MemoryWorker(worker, "running", 0, utcnow())

    def beat_worker(
        self, worker_id: str, *, status: str, running_jobs: int, stale_after_seconds: float
    ) -> int | None:
        now = utcnow()
        with self._lock:
            worker = self.workers.get(worker_id)
            if worker is None:
                return None
            worker.status, worker.running_jobs, worker.heartbeat_at = status, running_jobs, now
            cutoff = now - timedelta(seconds=stale_after_seconds)
            lost = [
                w
                for w in self.workers.values()
                if w.status in ("running", "draining") and w.heartbeat_at < cutoff
            ]
            for other in lost:
                other.status = "lost"
            return len(lost)

    def stop_worker(self, worker_id: str) -> None:
        with self._lock:
            worker = self.workers.get(worker_id)
            if worker is not None:
                worker.status, worker.running_jobs = "stopped", 0

    # wake-ups
    def listen(self, on_queued: Callable[[str], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(on_queued)

        def stop() -> None:
            with self._lock:
                if on_queued in self._listeners:
                    self._listeners.remove(on_queued)

        return stop

    def announce(self, tenant_id: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(tenant_id or ANY_TENANT)
