"""Worker heartbeats: each worker process keeps its row in ``workers`` fresh.

The row says who serves which tenants and how busy it is; a row whose heartbeat is older
than a few intervals is marked ``lost`` by any live worker (operators see the crash). The
jobs such a worker held come back through their own leases (facegate.queue.leases), not
through this table, so a slow heartbeat can never take a job from a live worker.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import structlog
from sqlalchemy import update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import session_scope, utcnow
from facegate.jobs.tables import WorkerRecord

log = structlog.get_logger("facegate.queue.heartbeat")

# A worker silent for this many heartbeat intervals is reported lost.
LOST_AFTER_INTERVALS = 3


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
        sessions: sessionmaker[Session],
        worker_id: str,
        *,
        tenants: list[str] | None,
        concurrency: int,
        running_jobs: Callable[[], int],
        every_seconds: float = 5.0,
    ) -> None:
        self.sessions = sessions
        self.worker_id = worker_id
        self.tenants = tenants
        self.concurrency = concurrency
        self.running_jobs = running_jobs
        self.every_seconds = every_seconds
        self.status = "running"
        self.last_beat_ok = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self) -> None:
        now = utcnow()
        with session_scope(self.sessions) as session:
            session.merge(
                WorkerRecord(
                    id=self.worker_id,
                    hostname=socket.gethostname(),
                    pid=os.getpid(),
                    tenants=self.tenants,
                    concurrency=self.concurrency,
                    status=self.status,
                    running_jobs=0,
                    started_at=now,
                    heartbeat_at=now,
                )
            )
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
        with session_scope(self.sessions) as session:
            updated = session.execute(
                update(WorkerRecord)
                .where(WorkerRecord.id == self.worker_id)
                .values(heartbeat_at=utcnow(), status=self.status, running_jobs=self.running_jobs())
            )
            registered = cast("CursorResult[Any]", updated).rowcount > 0
            lost = (
                mark_lost_workers(session, self.every_seconds * LOST_AFTER_INTERVALS)
                if registered
                else 0
            )
        if not registered:  # registration failed at start (the database was away)
            self.register()
        if lost:
            log.warning("workers.lost", count=lost)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            with session_scope(self.sessions) as session:
                session.execute(
                    update(WorkerRecord)
                    .where(WorkerRecord.id == self.worker_id)
                    .values(status="stopped", stopped_at=utcnow(), running_jobs=0)
                )
        except Exception:
            log.warning("heartbeat.final_beat_failed", worker=self.worker_id)

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            try:
                self.beat()
                self.last_beat_ok = True
            except Exception as exc:
                # The database may be restarting: keep beating, readiness reports it.
                self.last_beat_ok = False
                log.warning("heartbeat.failed", error=type(exc).__name__)
