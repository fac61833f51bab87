"""Worker heartbeats: each worker process keeps its row in ``workers`` fresh.

The row says who serves which tenants and how busy it is; a row whose heartbeat is older
than a few intervals is marked ``lost`` by any live worker (operators see the crash). The
jobs such a worker held come back through their own leases (facegate.queue.leases), not
through this table, so a slow heartbeat can never take a job from a live worker.

The statements are here (the SQL queues run them); :class:`Heartbeat` beats through any
``JobQueue``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import structlog
from sqlalchemy import update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import WorkerRecord
from facegate.queue.port import LOST_AFTER_INTERVALS, JobQueue, WorkerInfo

log = structlog.get_logger("facegate.queue.heartbeat")


def register(session: Session, worker: WorkerInfo) -> None:
    now = utcnow()
    session.merge(
        WorkerRecord(
            id=worker.id,
            hostname=worker.hostname,
            pid=worker.pid,
            tenants=worker.tenants,
            concurrency=worker.concurrency,
            memory_budget_bytes=worker.memory_budget_bytes,
            status="running",
            running_jobs=0,
            started_at=now,
            heartbeat_at=now,
        )
    )


def beat(session: Session, worker_id: str, status: str, running_jobs: int) -> bool:
    """Refresh a worker's row; False when it has none."""
    updated = session.execute(
        update(WorkerRecord)
        .where(WorkerRecord.id == worker_id)
        .values(heartbeat_at=utcnow(), status=status, running_jobs=running_jobs)
    )
    return cast("CursorResult[Any]", updated).rowcount > 0


def stopped(session: Session, worker_id: str) -> None:
    session.execute(
        update(WorkerRecord)
        .where(WorkerRecord.id == worker_id)
        .values(status="stopped", stopped_at=utcnow(), running_jobs=0)
    )


def mark_lost_workers(session: Session, stale_after_seconds: float) -> int:
    """Mark workers whose heartbeat is older than ``stale_after_seconds`` as lost."""
    cutoff = utcnow() - timedelta(seconds=stale_after_seconds)
    result = session.execute(
        update(WorkerRecord)
        .where(WorkerRecord.status.in_(("running", "draining")), WorkerRecord.heartbeat_at < cutoff)
        .values(status="lost")
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


class Heartbeat:
    """Registers a worker process, beats every ``every_seconds``, records its stop."""

    def __init__(
        self,
        queue: JobQueue,
        worker: WorkerInfo,
        *,
        running_jobs: Callable[[], int],
        every_seconds: float = 5.0,
    ) -> None:
        self.queue = queue
        self.worker = worker
        self.running_jobs = running_jobs
        self.every_seconds = every_seconds
        self.status = "running"
        self.last_beat_ok = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self) -> None:
        self.queue.register_worker(self.worker)
        self.last_beat_ok = True

    def start(self) -> None:
        # A worker that starts while the database restarts must not die of it: its row is
        # written by the first beat that reaches the database instead.
        try:
            self.register()
        except SQLAlchemyError as exc:
            self.last_beat_ok = False
            log.warning("heartbeat.register_failed", error=type(exc).__name__)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        """Refresh this worker's row, and report workers that went silent."""
        lost = self.queue.beat_worker(
            self.worker.id,
            status=self.status,
            running_jobs=self.running_jobs(),
            stale_after_seconds=self.every_seconds * LOST_AFTER_INTERVALS,
        )
        if lost is None:  # registration failed at start (the database was away)
            self.register()
        elif lost:
            log.warning("workers.lost", count=lost)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self.queue.stop_worker(self.worker.id)
        except Exception:
            log.warning("heartbeat.final_beat_failed", worker=self.worker.id)

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            try:
                self.beat()
                self.last_beat_ok = True
            except Exception as exc:
                # The database may be restarting: keep beating, readiness reports it.
                self.last_beat_ok = False
                log.warning("heartbeat.failed", error=type(exc).__name__)
