"""Segmented jobs: a long video cut into parts that several workers run at once.

The worker that claimed the video splits it (``split``): in one transaction, guarded by its
lease, it inserts one row per part (kind ``segment``, ``parent_id`` the video's job; the
tenant, priority and creation time of the job, so the fair order treats them as the job's
own, a microsecond apart to keep their order) and turns the job into *waiting*: ``running``
without a lease (it takes no slot of the tenant's cap and the reaper never sees it). Each
part is an ordinary queued row: the fair claim, caps, leases, the reaper and cancel apply to
it unchanged, so between two parts a worker goes back to the fair order.

The transaction that ends a part decides for the job (``part_ended``), with the job's row
locked so two parts ending at once see each other. It locks the job's row FIRST
(``lock_jobs``), before it touches the part's: every transaction that writes a job and its
parts (a cancel, a part's end, the reaper) goes job, then parts; the other way round, two
parts ending at once each held their own row and waited for the job's, one of them holding
it and waiting for the other's part to ask it to stop (PostgreSQL's deadlock detector
failed one). the last part to succeed puts the job
back in the queue for its assembly (stage ``assemble``; a worker joins the parts); a part
that failed fails the job with its reason and stops the rest; the last part to stop after a
cancel ends the job cancelled. Compute seconds add up on the job's row (the split, each
part, the assembly), so the usage record of the job bills exactly what its parts used.

System scope (by job id, across tenants), never reachable from a request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import Job

SEGMENT_KIND = "segment"
WAITING_STAGE = "segments"
ASSEMBLE_STAGE = "assemble"


@dataclass(frozen=True)
class FrameRange:
    """Frames ``[first, end)`` of the original (global indices)."""

    first: int
    end: int
    # The decisions of the people in view at ``first`` (engine.video.swap.Handover, as JSON).
    handover: tuple[dict[str, Any], ...] = ()
    # The part moderates its own input frames as it decodes them (else the split did).
    check_input: bool = False

    @property
    def frames(self) -> int:
        return self.end - self.first


Change = Literal["none", "assemble", "failed", "cancelled"]


@dataclass(frozen=True)
class PartEnded:
    """What ending a part did to its job: ``assemble`` (it was the last; the job is queued
    for its assembly), ``failed``/``cancelled`` (the job ended so; ``job`` is its row, to
    meter), or ``none``."""

    change: Change
    job: Job


def segment_of(part: Job) -> dict[str, Any]:
    """A part's place in its job: ``index``, ``count``, ``first`` and ``end`` frames (and
    ``handover``: the decisions of the people in view at ``first``, when it has them)."""
    segment: dict[str, Any] = part.spec["segment"]
    return segment


def split(
    session: Session,
    job_id: uuid.UUID,
    owner: str,
    ranges: Sequence[FrameRange],
    compute_seconds: float,
) -> list[uuid.UUID] | None:
    """Insert the parts of a held job and make it wait for them; None (nothing written)
    when the lease was lost. ``compute_seconds``: what the split itself used."""
    job = session.scalars(
        select(Job)
        .where(Job.id == job_id, Job.lease_owner == owner, Job.status == "running")
        .with_for_update()
    ).one_or_none()
    if job is None:
        return None
    total = sum(r.frames for r in ranges)
    ids: list[uuid.UUID] = []
    for index, frames in enumerate(ranges):
        share = frames.frames / total
        part = Job(
            id=uuid.uuid4(),
            tenant_id=job.tenant_id,
            status="queued",
            kind=SEGMENT_KIND,
            spec={
                **job.spec,
                "segment": {
                    "index": index,
                    "count": len(ranges),
                    "first": frames.first,
                    "end": frames.end,
                    **({"handover": list(frames.handover)} if frames.handover else {}),
                    **({"check_input": True} if frames.check_input else {}),
                },
            },
            inputs=list(job.inputs),
            priority=job.priority,
            max_attempts=job.max_attempts,
            # The job's age (a microsecond apart: the fair order takes them in order).
            created_at=job.created_at + timedelta(microseconds=index),
            parent_id=job.id,
            estimated_seconds=(
                None if job.estimated_seconds is None else job.estimated_seconds * share
            ),
            memory_bytes=job.memory_bytes,
            consent=job.consent,
        )
        session.add(part)
        ids.append(part.id)
    job.lease_owner = None
    job.lease_expires_at = None
    job.stage = WAITING_STAGE
    job.progress = 0.0
    job.progress_detail = {"parts_done": 0, "parts_total": len(ranges)}
    job.compute_seconds = compute_seconds
    session.flush()
    return ids


def job_of(session: Session, part: Job) -> Job | None:
    """The job a part belongs to."""
    return session.get(Job, part.parent_id) if part.parent_id is not None else None


def parts_of(session: Session, job_id: uuid.UUID) -> list[Job]:
    """A job's parts, in order."""
    parts = session.scalars(select(Job).where(Job.parent_id == job_id)).all()
    return sorted(parts, key=lambda part: int(segment_of(part)["index"]))


def lock_jobs(session: Session, job_ids: Iterable[uuid.UUID | None]) -> None:
    """Lock the rows of segmented jobs (in id order) before the transaction writes any of
    their parts: the lock order every such transaction keeps (see the module docstring)."""
    ids = sorted({job_id for job_id in job_ids if job_id is not None})
    if ids:
        session.execute(select(Job.id).where(Job.id.in_(ids)).order_by(Job.id).with_for_update())


def part_ended(
    session: Session,
    part: Job,
    status: str,
    compute_seconds: float,
    error_type: str | None = None,
    error_detail: str | None = None,
) -> PartEnded:
    """Decide for the job of a part that just ended (in the transaction that ended it,
    which locked the job first: ``lock_jobs``)."""
    job = session.scalars(select(Job).where(Job.id == part.parent_id).with_for_update()).one()
    job.compute_seconds = (job.compute_seconds or 0.0) + compute_seconds
    if job.is_terminal:
        return PartEnded("none", job)
    segment = segment_of(part)
    if status == "succeeded":
        return _succeeded(session, job, int(segment["count"]))
    now = utcnow()
    _stop_parts(session, job.id, now)
    if status == "failed":
        number = f"part {int(segment['index']) + 1} of {int(segment['count'])}"
        job.status, job.stage, job.finished_at = "failed", "failed", now
        job.error_type = error_type
        job.error_detail = f"{error_detail} ({number})" if error_detail else number
        return PartEnded("failed", job)
    running = session.execute(
        select(func.count())
        .select_from(Job)
        .where(Job.parent_id == job.id, Job.status == "running", Job.id != part.id)
    ).scalar_one()
    if running:
        return PartEnded("none", job)
    job.status, job.stage, job.finished_at = "cancelled", "cancelled", now
    return PartEnded("cancelled", job)


def _succeeded(session: Session, job: Job, count: int) -> PartEnded:
    done = session.execute(
        select(func.count())
        .select_from(Job)
        .where(Job.parent_id == job.id, Job.status == "succeeded")
    ).scalar_one()
    job.progress = done / count
    job.progress_detail = {"parts_done": int(done), "parts_total": count}
    if done < count:
        return PartEnded("none", job)
    # Back in the queue for the assembly: a fresh set of attempts (the split spent one).
    job.status, job.stage, job.attempts = "queued", ASSEMBLE_STAGE, 0
    return PartEnded("assemble", job)


def _stop_parts(session: Session, job_id: uuid.UUID, now: Any) -> None:
    """The job ended: its queued parts end with it, its running ones are asked to stop."""
    session.execute(
        update(Job)
        .where(Job.parent_id == job_id, Job.status == "queued")
        .values(status="cancelled", finished_at=now, cancel_requested=True, stage="cancelled")
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(Job)
        .where(Job.parent_id == job_id, Job.status == "running")
        .values(cancel_requested=True)
        .execution_options(synchronize_session=False)
    )
