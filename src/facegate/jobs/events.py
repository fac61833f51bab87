"""Server-Sent Events of one job: its progress, stage and status until it is terminal.

The stream polls the job row (through the tenant-scoped repository) rather than listening
to the worker, so it works the same when the worker is another process or another pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import session_scope
from facegate.jobs.repository import JobRepository
from facegate.jobs.schemas import JobOut

POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0


def format_event(event: str, data: dict[str, Any], event_id: int) -> str:
    return f"id: {event_id}\nevent: {event}\ndata: {json.dumps(data, default=str)}\n\n"


def _snapshot(sessions: sessionmaker[Session], tenant_id: str, job_id: uuid.UUID) -> JobOut | None:
    with session_scope(sessions) as session:
        job = JobRepository(session).get(tenant_id, job_id)
        return JobOut.of(job) if job is not None else None


async def job_events(
    sessions: sessionmaker[Session], tenant_id: str, job_id: uuid.UUID
) -> AsyncIterator[str]:
    """``status`` events on every change, then one ``end`` event at a terminal status."""
    last: tuple[Any, ...] | None = None
    event_id = 0
    idle = 0.0
    while True:
        job = await anyio.to_thread.run_sync(_snapshot, sessions, tenant_id, job_id)
        if job is None:  # deleted meanwhile
            yield format_event("end", {"status": "gone"}, event_id + 1)
            return
        state = (job.status, round(job.progress, 3), job.stage)
        if state != last:
            last = state
            event_id += 1
            idle = 0.0
            yield format_event("status", job.model_dump(mode="json"), event_id)
        if job.status in ("succeeded", "failed", "cancelled"):
            yield format_event("end", {"status": job.status}, event_id + 1)
            return
        await anyio.sleep(POLL_SECONDS)
        idle += POLL_SECONDS
        if idle >= KEEPALIVE_SECONDS:
            idle = 0.0
            yield ": keep-alive\n\n"
