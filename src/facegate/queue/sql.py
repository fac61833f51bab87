"""The queue on a database: the JobQueue port on SQLite (or PostgreSQL behind one lock) and
the cluster shape's PostgreSQL queue (per-tenant locks, a shared reaper lock, LISTEN/NOTIFY).

Each operation is its own transaction. What else must happen in the transaction that reaps
(metering the jobs that ran out of attempts) is handed in as ``on_reaped`` by whoever
assembles the worker, so the queue knows nothing of usage records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import session_scope
from facegate.queue import heartbeat, leases
from facegate.queue.claim import Claim, ClaimOne, JobClaimer, LockingClaimer
from facegate.queue.fairness import ANY_FIT, Fit
from facegate.queue.leases import LeaseState, Reaped
from facegate.queue.notify import ANY_TENANT, QueueListener, listen_locally, notify_locally
from facegate.queue.port import WorkerInfo
from facegate.queue.postgres import PostgresClaimer, ServedTenants
from facegate.queue.reaper import reap_expired_leases

#: Work done in the reaping transaction with what was reaped (e.g. metering failed jobs).
OnReaped = Callable[[Session, list[Reaped]], None]


class SqlQueue(ClaimOne):
    """JobQueue on SQLite or PostgreSQL; wake-ups stay within this process (the embedded
    shape's submissions and workers share it)."""

    def __init__(
        self,
        engine: Engine,
        claimer: JobClaimer | None = None,
        *,
        on_reaped: OnReaped | None = None,
        local_key: str | None = None,
        reaped_tenants: frozenset[str] | None = None,
    ) -> None:
        self.engine = engine
        # The reaper of a tenant-bound process requeues only its tenants' jobs.
        self.reaped_tenants = reaped_tenants
        # Worker transactions write; taking SQLite's write lock at BEGIN avoids the
        # "database is locked" upgrade failure of deferred transactions under WAL.
        self.sessions = sessionmaker(
            bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )
        self.claimer = claimer or LockingClaimer(engine)
        self.on_reaped = on_reaped
        # In-process wake-ups are keyed by the database URL the submissions name.
        self.local_key = local_key or engine.url.render_as_string(hide_password=False)

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
        return self.claimer.claim_many(
            worker_id, limit=limit, lease_seconds=lease_seconds, uses_device=uses_device, fit=fit
        )

    # leases
    def renew(self, claim: Claim, lease_seconds: float) -> LeaseState:
        with session_scope(self.sessions) as session:
            return leases.renew(session, claim.job_id, claim.lease_owner, lease_seconds)

    def report_progress(
        self,
        claim: Claim,
        progress: float,
        stage: str,
        detail: dict[str, Any] | None = None,
    ) -> LeaseState:
        with session_scope(self.sessions) as session:
            return leases.report_progress(
                session, claim.job_id, claim.lease_owner, progress, stage, detail
            )

    def release(self, claim: Claim) -> bool:
        with session_scope(self.sessions) as session:
            released = leases.release(session, claim.job_id, claim.lease_owner)
        if released:
            self.announce(claim.tenant_id)
        return released

    def finish(self, claim: Claim, status: str, **values: Any) -> bool:
        with session_scope(self.sessions) as session:
            return leases.finish(session, claim.job_id, claim.lease_owner, status, **values)

    # reaper
    def reap(self) -> list[Reaped]:
        with session_scope(self.sessions) as session:
            reaped = self._sweep(session)
            if reaped and self.on_reaped is not None:
                self.on_reaped(session, reaped)
        if any(item.outcome == "requeued" for item in reaped):
            self.announce(ANY_TENANT)
        return reaped

    def _sweep(self, session: Session) -> list[Reaped]:
        return leases.requeue_expired(session, tenants=self.reaped_tenants)

    # heartbeats
    def register_worker(self, worker: WorkerInfo) -> None:
        with session_scope(self.sessions) as session:
            heartbeat.register(session, worker)

    def beat_worker(
        self, worker_id: str, *, status: str, running_jobs: int, stale_after_seconds: float
    ) -> int | None:
        with session_scope(self.sessions) as session:
            if not heartbeat.beat(session, worker_id, status, running_jobs):
                return None
            return heartbeat.mark_lost_workers(session, stale_after_seconds)

    def stop_worker(self, worker_id: str) -> None:
        with session_scope(self.sessions) as session:
            heartbeat.stopped(session, worker_id)

    # wake-ups
    def listen(self, on_queued: Callable[[str], None]) -> Callable[[], None]:
        return listen_locally(self.local_key, lambda: on_queued(ANY_TENANT))

    def announce(self, tenant_id: str) -> None:
        notify_locally(self.local_key)


class PostgresQueue(SqlQueue):
    """The cluster shape's queue: the per-tenant fair claim, one reaper at a time across
    workers, and LISTEN/NOTIFY wake-ups from every process (the jobs table's triggers send
    them in the transaction that queues a job)."""

    def __init__(
        self,
        engine: Engine,
        served: ServedTenants | None = None,
        *,
        on_reaped: OnReaped | None = None,
        local_key: str | None = None,
    ) -> None:
        self.served = served or ServedTenants()
        super().__init__(
            engine, PostgresClaimer(engine, self.served), on_reaped=on_reaped, local_key=local_key
        )
        self.listener: QueueListener | None = None

    def _sweep(self, session: Session) -> list[Reaped]:
        return reap_expired_leases(session, self.served.tenants)

    def listen(self, on_queued: Callable[[str], None]) -> Callable[[], None]:
        served = self.served.tenants

        def on_notified(tenant: str) -> None:
            # A dedicated worker ignores the other tenants' jobs.
            if served is None or tenant == ANY_TENANT or tenant in served:
                on_queued(tenant)

        listener = QueueListener(self.engine.url, on_notified)
        listener.start()
        self.listener = listener
        stop_local = super().listen(on_queued)

        def stop() -> None:
            stop_local()
            listener.stop()

        return stop
