"""The transactions that begin and end a claimed job: the queue's lease guard together with
what must be written in the same transaction.

- ``start``: the claimed job, its tenant's policy and its provenance mark, read and issued
  together (None when the claim was lost meanwhile); for a part of a segmented video, the
  job it belongs to (whose mark it carries), for a segmented video its parts;
- ``split``, ``finish_part``: a long video cut into parts, a part's render stored and its
  job told (``queue/segments.py``);
- ``succeed``: the result's objects stored under the tenant's prefix, the job finished, its
  usage record and moderation audit — all or nothing;
- ``end``: a job that ran without a result (failed, cancelled) finished and metered;
- ``meter_reaped``: the usage record of each job the reaper failed, in the reaping
  transaction (``SqlQueue(on_reaped=...)``);
- ``purge``: artifacts past each tenant's retention, and objects a killed process left
  without a ledger row.

The worker pool calls these and the ``JobQueue`` port; it issues no SQL of its own.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import session_scope, utcnow
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import Job
from facegate.observability.audit import (
    MODERATION_ACTOR,
    MODERATION_ALLOWED,
    MODERATION_REFUSED,
    record_audit,
)
from facegate.provenance.marker import SIDECAR_NAME, JobMark, ResultMarker
from facegate.queue import leases, segments
from facegate.queue.claim import Claim
from facegate.queue.leases import Reaped
from facegate.queue.sql import OnReaped
from facegate.storage.tenant import TenantStore
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.tables import Policy
from facegate.usage.service import Consumption, record_job_usage

#: The actor of moderation events: the service itself, on the tenant's policy.


@dataclass(frozen=True)
class StartedJob:
    """A claimed job as its run needs it."""

    job: Job
    policy: Policy
    mark: JobMark
    cancel_requested: bool
    # A part: the segmented job it belongs to. A segmented job back for its assembly: its
    # parts, in order (empty for every other job).
    whole: Job | None = None
    parts: tuple[Job, ...] = ()


@dataclass(frozen=True)
class ModerationRecord:
    """What content moderation decided in one job, for its audit: the items checked and
    allowed, the one refused (the job failed), and for each source image the decision it
    used (``{"decision": id, "made_for": "job:<id>"}``: a batch's items share the decision
    made for the first of them on the same bytes)."""

    allowed: tuple[str, ...] = ()
    refused: str | None = None
    decisions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class RenderedPart:
    """A part's render, to store until the assembly: the file (in its scratch folder), its
    frames, the compute seconds it took."""

    data: Path
    scratch: Path
    extension: str
    content_type: str
    frames: int
    compute_seconds: float
    # What its moderation checked and allowed (its own input frames, its output frames):
    # audited under its job when the part is stored.
    moderation: ModerationRecord = field(default_factory=ModerationRecord)
    # The quality reports of its sampled frames (the whole video's frame indices), kept on
    # its row until the assembly gathers them into the job's.
    quality: list[dict[str, Any]] = field(default_factory=list)

    def discard(self) -> None:
        """Delete the render's scratch folder (stored or not)."""
        shutil.rmtree(self.scratch, ignore_errors=True)


@dataclass(frozen=True)
class StoredResult:
    """What a successful run leaves: the result (bytes, or a file for a video), the C2PA
    sidecar where the format cannot embed one, the job's result fields, what moderation
    allowed."""

    name: str
    data: bytes | Path
    content_type: str
    sidecar: bytes | None
    fields: dict[str, Any]
    moderation: ModerationRecord


class JobOutcomes:
    """The worker's transactions on jobs, stored objects, usage and audit."""

    def __init__(
        self,
        engine: Engine,
        tenant_store: TenantStore,
        marker: ResultMarker,
        tenants: frozenset[str] | None = None,
    ) -> None:
        # Worker transactions write; taking SQLite's write lock at BEGIN avoids the
        # "database is locked" upgrade failure of deferred transactions under WAL.
        self.sessions = sessionmaker(
            bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )
        self.tenant_store = tenant_store
        self.marker = marker
        # A tenant-bound process purges only its tenants' storage.
        self.tenants = tenants
        # Objects without a ledger row at the last purge (deleted if still so at the next).
        self._orphan_suspects: set[str] = set()

    def start(self, claim: Claim) -> StartedJob | None:
        with session_scope(self.sessions) as session:
            job = leases.load_claimed(session, claim.job_id, claim.lease_owner)
            policy = TenancyRepository(session).get_policy(claim.tenant_id)
            if job is None or policy is None:
                return None
            if job.parent_id is not None:
                whole = segments.job_of(session, job)
                if whole is None:
                    return None
                # Every part carries the mark of the job it belongs to.
                mark = self.marker.issue(session, whole)
                stop = job.cancel_requested or whole.cancel_requested or whole.is_terminal
                return StartedJob(job, policy, mark, bool(stop), whole=whole)
            mark = self.marker.issue(session, job)
            parts = segments.parts_of(session, job.id) if job.kind == "video" else []
            return StartedJob(job, policy, mark, bool(job.cancel_requested), parts=tuple(parts))

    def split(
        self,
        claim: Claim,
        job: Job,
        ranges: Sequence[segments.FrameRange],
        compute_seconds: float,
        moderation: ModerationRecord,
    ) -> bool:
        """Cut a held video job into parts (its inputs checked: their moderation audited
        now, once); False when the lease was lost (nothing written)."""
        with session_scope(self.sessions) as session:
            ids = segments.split(session, job.id, claim.lease_owner, ranges, compute_seconds)
            if ids is None:
                return False
            audit_moderation(session, job, moderation)
        return True

    def finish_part(
        self, claim: Claim, part: Job, rendered: RenderedPart
    ) -> segments.Change | None:
        """Store a part's render under its job (kind ``parts``), finish the part and tell its
        job; None when the lease was lost (nothing recorded)."""
        segment = segments.segment_of(part)
        name = f"part-{int(segment['index']):04d}.{rendered.extension}"
        assert part.parent_id is not None
        try:
            with session_scope(self.sessions) as session:
                self.tenant_store.put(
                    session,
                    tenant_id=claim.tenant_id,
                    kind="parts",
                    job_id=part.parent_id,
                    name=name,
                    data=rendered.data,
                    content_type=rendered.content_type,
                )
                segments.lock_jobs(session, [part.parent_id])
                done = leases.finish(
                    session,
                    claim.job_id,
                    claim.lease_owner,
                    "succeeded",
                    stage="done",
                    progress=1.0,
                    outputs=[name],
                    result_frames=rendered.frames,
                    compute_seconds=rendered.compute_seconds,
                    quality=rendered.quality or None,
                )
                if not done:
                    raise _LeaseLost
                ended = segments.part_ended(session, part, "succeeded", rendered.compute_seconds)
                audit_moderation(session, part, rendered.moderation)
        except _LeaseLost:
            return None
        return ended.change

    def discard_parts(self, job: Job) -> int:
        """Delete the rendered parts of a segmented job (after its result was stored, or it
        ended without one); retention purges any a crash left behind."""
        with session_scope(self.sessions) as session:
            return self.tenant_store.delete_kind(session, job.tenant_id, "parts", job.id)

    def succeed(
        self,
        claim: Claim,
        job: Job,
        policy: Policy,
        result: StoredResult,
        consumption: Consumption,
    ) -> bool:
        """Store and finish; False (nothing recorded) when the lease was lost. Storage
        errors (quota, backend) propagate, the transaction rolled back."""
        try:
            self._succeed(claim, job, policy, result, consumption)
        except _LeaseLost:
            return False
        return True

    def _succeed(
        self,
        claim: Claim,
        job: Job,
        policy: Policy,
        result: StoredResult,
        consumption: Consumption,
    ) -> None:
        with session_scope(self.sessions) as session:
            # Same key on every attempt: a re-run overwrites, never duplicates.
            self._put(session, claim, policy, result.name, result.data, result.content_type)
            outputs = [result.name]
            if result.sidecar is not None:
                self._put(session, claim, policy, SIDECAR_NAME, result.sidecar, "application/c2pa")
                outputs.append(SIDECAR_NAME)
            done = leases.finish(
                session,
                claim.job_id,
                claim.lease_owner,
                "succeeded",
                stage="done",
                progress=1.0,
                outputs=outputs,
                **result.fields,
            )
            if not done:
                raise _LeaseLost
            record_job_usage(session, job, "succeeded", consumption)
            audit_moderation(session, job, result.moderation)

    def _put(
        self,
        session: Session,
        claim: Claim,
        policy: Policy,
        name: str,
        data: bytes | Path,
        content_type: str,
    ) -> None:
        self.tenant_store.put(
            session,
            tenant_id=claim.tenant_id,
            kind="outputs",
            job_id=claim.job_id,
            name=name,
            data=data,
            content_type=content_type,
            quota_bytes=policy.storage_quota_bytes,
        )

    def end(
        self,
        claim: Claim,
        job: Job | None,
        status: str,
        consumption: Consumption,
        *,
        moderation: ModerationRecord | None = None,
        **values: object,
    ) -> bool:
        """Finish a job without a result, metered in the same transaction (status says how
        it ended; ``moderation`` when content moderation refused an input or the output);
        False when the lease was lost. A part is not metered: its compute seconds go to its
        job, which is metered (and audited) when the part's end ends it."""
        if job is not None and job.parent_id is not None:
            return self._end_part(claim, job, status, consumption, moderation, values)
        with session_scope(self.sessions) as session:
            done = leases.finish(session, claim.job_id, claim.lease_owner, status, **values)
            if done and job is not None:
                # A segmented job also bills what its split and parts used before.
                consumption = dataclasses.replace(
                    consumption,
                    compute_seconds=consumption.compute_seconds + (job.compute_seconds or 0.0),
                )
                record_job_usage(session, job, status, consumption)
                if moderation is not None:
                    audit_moderation(session, job, moderation)
        return done

    def _end_part(
        self,
        claim: Claim,
        part: Job,
        status: str,
        consumption: Consumption,
        moderation: ModerationRecord | None,
        values: Mapping[str, object],
    ) -> bool:
        with session_scope(self.sessions) as session:
            segments.lock_jobs(session, [part.parent_id])
            seconds = consumption.compute_seconds
            done = leases.finish(
                session, claim.job_id, claim.lease_owner, status, compute_seconds=seconds, **values
            )
            if not done:
                return False
            error_type, error_detail = values.get("error_type"), values.get("error_detail")
            ended = segments.part_ended(
                session,
                part,
                status,
                seconds,
                None if error_type is None else str(error_type),
                None if error_detail is None else str(error_detail),
            )
            if ended.change in ("failed", "cancelled"):
                used = dataclasses.replace(
                    consumption, compute_seconds=ended.job.compute_seconds or 0.0
                )
                record_job_usage(session, ended.job, ended.change, used)
            if moderation is not None:
                audit_moderation(session, ended.job, moderation)
        return True

    def jobs(self, reaped: Sequence[Reaped]) -> list[Job]:
        """The rows of reaped jobs (after the reaping commit, for their metrics)."""
        with session_scope(self.sessions, read_only=True) as session:
            found = (JobRepository(session).get(r.tenant_id, r.job_id) for r in reaped)
            return [job for job in found if job is not None]

    def purge(self) -> int:
        """Delete artifacts past their tenant's retention, and the objects a killed process
        left without a ledger row (seen on two purges in a row); how many in all."""
        with session_scope(self.sessions) as session:
            retention = TenancyRepository(session).retention_days()
            if self.tenants is not None:
                retention = {t: days for t, days in retention.items() if t in self.tenants}
            expired = self.tenant_store.purge_expired(session, utcnow(), retention)
            orphans, self._orphan_suspects = self.tenant_store.sweep_orphans(
                session, sorted(retention), self._orphan_suspects
            )
        return expired + orphans


def meter_reaped(device: str) -> OnReaped:
    """The reaper's hook: a job failed for want of a live worker is metered like every
    finished job, with no compute billed (its worker vanished), in the reaping transaction."""

    def meter(session: Session, reaped: list[Reaped]) -> None:
        for item in reaped:
            if item.outcome != "failed":
                continue
            # A part is not a job of the tenant (None here): its job is metered instead,
            # with what its parts used (a job's compute seconds are set only as it ends,
            # or as its parts end).
            job = JobRepository(session).get(item.tenant_id, item.job_id)
            if job is not None:
                used = Consumption(compute_seconds=job.compute_seconds or 0.0, device=device)
                record_job_usage(session, job, "failed", used)

    return meter


def audit_moderation(session: Session, job: Job, record: ModerationRecord) -> None:
    """Audit a job's moderation (in the transaction that ends the job): what was refused
    (the job failed), else what was checked and allowed (nothing when the tenant's
    moderation is off), and the decision each source image used."""
    details: dict[str, object] = {"allowed": list(record.allowed)}
    if record.refused is not None:
        details["refused"], action = record.refused, MODERATION_REFUSED
    elif record.allowed:
        action = MODERATION_ALLOWED
    else:
        return
    if record.decisions:
        details["decisions"] = {what: dict(used) for what, used in record.decisions.items()}
    details["kind"] = job.kind
    if job.parent_id is not None:  # a part of a segmented video: audited under its job
        details["part"] = int(segments.segment_of(job)["index"])
    record_audit(
        session,
        MODERATION_ACTOR,
        action,
        f"job:{job.parent_id or job.id}",
        details,
        tenant_id=job.tenant_id,
    )


class _LeaseLost(Exception):
    """The job was taken from this worker before it could record the result."""
