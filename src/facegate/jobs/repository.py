"""All SQL on jobs a tenant may see, built from one scoped statement.

``JobRepository.readable_statement(tenant_id)`` is the only place a tenant-facing query of
``Job`` starts; every method derives from it, so a job of another tenant is simply absent
(and answers 404 exactly like a missing id). ``tests/test_scope_lint.py`` fails when
code elsewhere queries ``Job`` directly. The scheduler's cross-tenant statements (claim,
leases, segments) live in ``queue/claim.py``, ``queue/leases.py`` and ``queue/segments.py``
and never serve a request. The parts of a segmented video (rows with a ``parent_id``) are
the scheduler's: no tenant-facing statement returns or counts them; the tenant sees, lists,
counts and cancels the job they belong to (``parts_statement`` reaches them only from it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    Row,
    Select,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.prepared import PreparedRead
from facegate.storage.repository import USAGE


@dataclass(frozen=True)
class Cursor:
    """Position after the last job of a page (newest first): its creation time and id."""

    created_at: datetime
    job_id: uuid.UUID


class JobRepository:
    """Tenant-scoped reads and writes of jobs within the caller's session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_statement(tenant_id: str | BindParameter[str]) -> Select[Job]:
        """Every tenant-facing query of jobs starts here (``tenant_id`` may be a bound
        parameter, for a statement built once and executed with the tenant's id). The parts
        of a segmented job are not among them."""
        return select(Job).where(Job.tenant_id == tenant_id, Job.parent_id.is_(None))

    @staticmethod
    def operator_statement() -> Select[Job]:
        """Jobs of every tenant: for the operator's CLI only, never behind an HTTP route
        (the scope lint test checks who calls it); parts are not jobs here either."""
        return select(Job).where(Job.parent_id.is_(None))

    @staticmethod
    def parts_statement(tenant_id: str, job_id: uuid.UUID | None = None) -> Select[Job]:
        """The parts of one segmented job of the tenant (its cancel), or of all of them
        (None: the tenant's erasure)."""
        if job_id is None:
            return select(Job).where(Job.tenant_id == tenant_id, Job.parent_id.is_not(None))
        return select(Job).where(Job.tenant_id == tenant_id, Job.parent_id == job_id)

    def list_for_operator(
        self, *, tenant_id: str | None = None, statuses: Sequence[str] = (), limit: int = 100
    ) -> list[Job]:
        stmt = (
            self.readable_statement(tenant_id)
            if tenant_id is not None
            else self.operator_statement()
        )
        if statuses:
            stmt = stmt.where(Job.status.in_(list(statuses)))
        stmt = stmt.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
        return list(self.session.scalars(stmt))

    @staticmethod
    def job_row(connection: Connection, tenant_id: str, job_id: uuid.UUID) -> Row[Any] | None:
        """One job of the tenant as a Core row of the columns a ``JobOut`` shows, with the
        same attribute names as a ``Job`` (None for another tenant's id): the polling
        route's read, without a Session."""
        return connection.execute(JOB_VIEW, {"tenant_id": tenant_id, "job_id": job_id}).first()

    def get(self, tenant_id: str, job_id: uuid.UUID) -> Job | None:
        return self.session.scalars(ONE_JOB, {"tenant_id": tenant_id, "job_id": job_id}).first()

    def get_many(self, tenant_id: str, job_ids: Sequence[uuid.UUID]) -> list[Job]:
        """The tenant's jobs among ``job_ids`` (others' are simply absent)."""
        if not job_ids:
            return []
        stmt = self.readable_statement(tenant_id).where(Job.id.in_(list(job_ids)))
        return list(self.session.scalars(stmt))

    def get_by_idempotency_key(self, tenant_id: str, key: str) -> Job | None:
        stmt = self.readable_statement(tenant_id).where(Job.idempotency_key == key)
        return self.session.scalars(stmt).one_or_none()

    def list_page(
        self,
        tenant_id: str,
        *,
        statuses: Sequence[str] = (),
        after: Cursor | None = None,
        limit: int = 50,
    ) -> list[Job]:
        """Newest first; ``after`` continues from the previous page's last job."""
        stmt = self.readable_statement(tenant_id)
        if statuses:
            stmt = stmt.where(Job.status.in_(list(statuses)))
        if after is not None:
            stmt = stmt.where(
                or_(
                    Job.created_at < after.created_at,
                    and_(Job.created_at == after.created_at, Job.id < after.job_id),
                )
            )
        stmt = stmt.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
        return list(self.session.scalars(stmt))

    def count_in_status(
        self, tenant_id: str, statuses: Sequence[str], *, at_most: int | None = None
    ) -> int:
        """How many of the tenant's jobs are in ``statuses``; with ``at_most``, counting
        stops there (a cap check costs the same however long the queue has grown)."""
        scoped = (
            self.readable_statement(tenant_id)
            .where(Job.status.in_(list(statuses)))
            .with_only_columns(Job.id)  # counted, not read: see _QUEUED_JOBS
        )
        if at_most is not None:
            scoped = scoped.limit(at_most)
        stmt = select(func.count()).select_from(scoped.subquery())
        return int(self.session.execute(stmt).scalar_one())

    def room(self, tenant_id: str, *, at_most: int, usage: bool) -> tuple[int, int | None]:
        """A submission's two readings in one prebuilt statement: the tenant's queued jobs
        (counted up to ``at_most``, as :meth:`count_in_status`) and, with ``usage``, the
        bytes it stores (its quota's reading; None without)."""
        read = ROOM_READ if usage else QUEUED_READ
        # On the session's driver connection (facegate.prepared): one row, always.
        row = read.run_in(self.session, {"tenant_id": tenant_id, "at_most": at_most})
        return int(row[0]), (int(row[1]) if usage else None)

    def count_queued_all_tenants(self) -> int:
        """Queued jobs of every tenant: one number for the global load-shedding cap
        (``facegate.api.shedding``); no row of any tenant leaves this method."""
        scoped = self.operator_statement().where(Job.status == "queued").with_only_columns(Job.id)
        stmt = select(func.count()).select_from(scoped.subquery())
        return int(self.session.execute(stmt).scalar_one())

    def add(self, job: Job, *, flush: bool = True) -> Job:
        """Insert ``job``; ``flush=False`` leaves it to the caller's next flush (a batch
        inserts its items' rows in one)."""
        self.session.add(job)
        if flush:
            self.session.flush()
        return job

    def request_cancel(self, tenant_id: str, job_id: uuid.UUID) -> Job | None:
        """Cancel a queued job at once; ask a running one to stop between stages.

        Returns the job as it is afterwards (terminal jobs are left as they are), or None
        when the tenant has no such job.
        """
        job = self.get(tenant_id, job_id)
        if job is None or job.is_terminal:
            return job
        now = utcnow()
        # Both updates are guarded by the status the row has now (a worker finishing in
        # between wins) and scoped by the same readable statement as every read.
        queued = self.readable_statement(tenant_id).where(Job.id == job_id, Job.status == "queued")
        self.session.execute(
            update(Job)
            .where(queued.whereclause)  # type: ignore[arg-type]
            .values(status="cancelled", finished_at=now, cancel_requested=True, stage="cancelled")
            .execution_options(synchronize_session=False)
        )
        running = self.readable_statement(tenant_id).where(
            Job.id == job_id, Job.status == "running"
        )
        self.session.execute(
            update(Job)
            .where(running.whereclause)  # type: ignore[arg-type]
            .values(cancel_requested=True)
            .execution_options(synchronize_session=False)
        )
        if job.status == "running" and job.lease_owner is None:
            self._cancel_parts(tenant_id, job_id, now)
        self.session.expire(job)
        return self.get(tenant_id, job_id)

    def _cancel_parts(self, tenant_id: str, job_id: uuid.UUID, now: datetime) -> None:
        """A segmented job waiting for its parts: the queued ones end at once, the running
        ones are asked to stop (their workers see it at their next progress report, well
        within 2 s), and the last of them to end ends the job, metered. When none is
        running, the job goes back to the queue to be ended, metered, by the next worker
        (the compute its finished parts used is billed once, with it)."""
        queued = self.parts_statement(tenant_id, job_id).where(Job.status == "queued")
        self.session.execute(
            update(Job)
            .where(queued.whereclause)  # type: ignore[arg-type]
            .values(status="cancelled", finished_at=now, cancel_requested=True, stage="cancelled")
            .execution_options(synchronize_session=False)
        )
        running = self.parts_statement(tenant_id, job_id).where(Job.status == "running")
        moved = self.session.execute(
            update(Job)
            .where(running.whereclause)  # type: ignore[arg-type]
            .values(cancel_requested=True)
            .execution_options(synchronize_session=False)
        )
        if moved.rowcount:  # type: ignore[attr-defined]
            return
        waiting = self.readable_statement(tenant_id).where(
            Job.id == job_id, Job.status == "running", Job.lease_owner.is_(None)
        )
        self.session.execute(
            update(Job)
            .where(waiting.whereclause)  # type: ignore[arg-type]
            .values(status="queued", stage="cancelling")
            .execution_options(synchronize_session=False)
        )

    def stop_running(self, tenant_id: str) -> int:
        """Ask every running job of the tenant, and every running part of its segmented
        jobs, to stop (its erasure); how many jobs run."""
        for statement in (self.readable_statement(tenant_id), self.parts_statement(tenant_id)):
            running = statement.where(Job.status == "running")
            self.session.execute(
                update(Job)
                .where(running.whereclause)  # type: ignore[arg-type]
                .values(cancel_requested=True)
                .execution_options(synchronize_session=False)
            )
        return self.count_in_status(tenant_id, ["running"])

    def delete_jobs(self, tenant_id: str, job_ids: Sequence[uuid.UUID]) -> int:
        """Delete jobs of the tenant (a takedown, a subject's erasure); how many. Their
        parts go with them (ON DELETE CASCADE)."""
        if not job_ids:
            return 0
        doomed = self.readable_statement(tenant_id).where(Job.id.in_(list(job_ids)))
        result = self.session.execute(
            delete(Job)
            .where(doomed.whereclause)  # type: ignore[arg-type]
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]


# One job of one tenant, the most frequent query (every poll), built once and executed with
# ``tenant_id`` and ``job_id`` parameters: building a statement and computing its cache key
# costs ~0.1 ms per call, three times the indexed read itself.
ONE_JOB = JobRepository.readable_statement(bindparam("tenant_id")).where(
    Job.id == bindparam("job_id")
)
# The same job, only the columns its tenant sees (``JobOut``): the polling route's read. Not
# the job's spec, outputs, lease or scheduling columns (decoding the spec's JSON alone cost
# more than the indexed read).
JOB_VIEW = ONE_JOB.with_only_columns(
    Job.id,
    Job.status,
    Job.kind,
    Job.progress,
    Job.stage,
    Job.progress_detail,
    Job.attempts,
    Job.cancel_requested,
    Job.inputs,
    Job.created_at,
    Job.started_at,
    Job.finished_at,
    Job.error_type,
    Job.error_detail,
    Job.output_content_type,
    Job.result_width,
    Job.result_height,
    Job.result_bytes,
    Job.result_pixels,
    Job.result_frames,
    Job.compute_seconds,
    Job.models_used,
    Job.consent,
    Job.quality,
)
# The polling route's read, run on the driver (facegate.prepared): JOB_VIEW's row, the same
# values, without a Core execution around it.
JOB_VIEW_READ = PreparedRead(JOB_VIEW)

# A submission's queue-cap reading (the tenant's queued jobs, counted up to the cap) and,
# with its quota's (facegate.storage.repository.USAGE), both in one statement: built once,
# executed with ``tenant_id`` and ``at_most``. Built per call they cost ~0.7 ms and ~0.4 ms
# of CPU, twice per submission (its precheck and its write transaction); this ~0.25 ms.
# The counted subquery selects only the id: with every column of the job (``select(Job)``)
# SQLite builds each row whole under the LIMIT, ~1.1 ms vs ~0.45 ms CPU per reading with
# 1000 queued jobs (benchmarks: api_bench's submissions).
_QUEUED_JOBS = (
    JobRepository.readable_statement(bindparam("tenant_id"))
    .where(Job.status == "queued")
    .with_only_columns(Job.id)
    .limit(bindparam("at_most"))
    .subquery()
)
QUEUED = select(func.count()).select_from(_QUEUED_JOBS)
ROOM = select(QUEUED.scalar_subquery(), USAGE.scalar_subquery())
QUEUED_READ, ROOM_READ = PreparedRead(QUEUED), PreparedRead(ROOM)
