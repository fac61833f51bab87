"""In-process workers: N threads that claim jobs fairly, run them, and record the outcome.

One maintenance thread renews the leases of the jobs in flight (and passes on cancel
requests), requeues jobs whose lease expired (a crashed process, a hung worker) and purges
artifacts past their tenant's retention. At start-up the reaper runs once, so jobs left
running by a crash go back to the queue as soon as their lease has expired; queued jobs are
simply claimed again.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import session_scope, utcnow
from facegate.engine.errors import Cancelled, ContentPolicyViolation, EngineError
from facegate.errors import ServiceError
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import Job
from facegate.observability.metrics import worker_heartbeat
from facegate.provenance.marker import SIDECAR_NAME, JobMark, ResultMarker
from facegate.queue import leases
from facegate.queue.claim import Claim, JobClaimer, LockingClaimer
from facegate.storage.base import StorageError, StorageQuotaExceeded
from facegate.storage.tenant import TenantStore
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.tables import Policy
from facegate.usage.service import Consumption, record_job_usage
from facegate.worker.observe import audit_moderation, observe_finished
from facegate.worker.output import JobOutput, JobRunner, ProgressFn
from facegate.worker.runner import EngineRunner

log = structlog.get_logger("facegate.jobs")


@dataclass(frozen=True)
class WorkerConfig:
    """How many workers, how long a lease lasts and how often the loops look around."""

    workers: int = 2
    lease_seconds: float = 30.0
    poll_seconds: float = 0.5
    purge_every_seconds: float = 3600.0
    uses_device: bool = False
    progress_every_seconds: float = 0.2


@dataclass
class _InFlight:
    claim: Claim
    cancel: threading.Event = field(default_factory=threading.Event)


class WorkerPool:
    """The embedded shape's workers, started and stopped by the app lifespan (or the CLI)."""

    def __init__(
        self,
        engine: Engine,
        tenant_store: TenantStore,
        config: WorkerConfig | None = None,
        *,
        marker: ResultMarker,
        runner: JobRunner | None = None,
        claimer: JobClaimer | None = None,
    ) -> None:
        self.config = config or WorkerConfig()
        self.tenant_store = tenant_store
        self.marker = marker  # every result is marked; there is no pool without it
        # Worker transactions write; taking SQLite's write lock at BEGIN avoids the
        # "database is locked" upgrade failure of deferred transactions under WAL.
        self.sessions = sessionmaker(
            bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )
        self.runner = runner or EngineRunner(tenant_store)
        self.claimer = claimer or LockingClaimer(engine)
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._in_flight: dict[uuid.UUID, _InFlight] = {}
        self._lock = threading.Lock()

    # lifecycle
    def start(self) -> None:
        try:
            self.reap()  # jobs a crashed worker left running go back to the queue at once
        except OperationalError as exc:
            # The database is away (a restart): the maintenance loop reaps once it is back,
            # and the work loops retry their claims; a worker must not die of it at start.
            log.warning("workers.start_reap_failed", pool=self.name, error=type(exc).__name__)
        self._stop.clear()
        for number in range(self.config.workers):
            worker_id = f"{self.name}/w{number}"
            self._spawn(self._work_loop, worker_id)
        self._spawn(self._maintenance_loop, f"{self.name}/maintenance")
        log.info("workers.started", workers=self.config.workers, pool=self.name)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming, ask running jobs to stop, and wait for the threads."""
        self._stop.set()
        with self._lock:
            for flight in self._in_flight.values():
                flight.cancel.set()
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()

    def wake(self) -> None:
        """A job was submitted: let an idle worker look now instead of at its next poll."""
        with self._wake:
            self._wake.notify_all()

    def _spawn(self, target: Callable[[str], None], name: str) -> None:
        thread = threading.Thread(target=target, args=(name,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # the loops
    def _work_loop(self, worker_id: str) -> None:
        while not self._stop.is_set():
            try:
                worked = self.run_once(worker_id)
            except Exception:
                log.exception("worker.error", worker=worker_id)
                worked = False
            if not worked:
                with self._wake:
                    self._wake.wait(self.config.poll_seconds)

    def _maintenance_loop(self, name: str) -> None:
        renew_every = max(0.05, self.config.lease_seconds / 3)
        last_purge = time.monotonic()
        while not self._stop.wait(renew_every):
            worker_heartbeat()
            try:
                self.renew_leases()
                self.reap()
                if time.monotonic() - last_purge >= self.config.purge_every_seconds:
                    last_purge = time.monotonic()
                    self.purge()
            except Exception:
                log.exception("workers.maintenance_error", pool=self.name)

    # one step each; public so tests can drive the pool without threads
    def run_once(self, worker_id: str) -> bool:
        """Claim one job and run it to a terminal status; False when nothing was claimable."""
        claim = self.claimer.claim(
            worker_id, lease_seconds=self.config.lease_seconds, uses_device=self.config.uses_device
        )
        if claim is None:
            return False
        flight = _InFlight(claim)
        with self._lock:
            self._in_flight[claim.job_id] = flight
        try:
            self._process(flight)
        finally:
            with self._lock:
                self._in_flight.pop(claim.job_id, None)
        return True

    def renew_leases(self) -> None:
        with self._lock:
            flights = list(self._in_flight.values())
        for flight in flights:
            with session_scope(self.sessions) as session:
                state = leases.renew(
                    session,
                    flight.claim.job_id,
                    flight.claim.lease_owner,
                    self.config.lease_seconds,
                )
            if not state.held or state.cancel_requested:
                flight.cancel.set()

    def reap(self) -> None:
        """Requeue jobs whose lease expired; those out of attempts fail, and are metered
        like every finished job (no compute is billed: their worker vanished)."""
        failed: list[Job] = []
        nothing = Consumption(compute_seconds=0.0, device=self.device)
        with session_scope(self.sessions) as session:
            reaped = self._sweep(session)
            for item in reaped:
                log.warning(
                    "job.lease_expired",
                    tenant_id=item.tenant_id,
                    job_id=str(item.job_id),
                    outcome=item.outcome,
                )
                if item.outcome != "failed":
                    continue
                job = JobRepository(session).get(item.tenant_id, item.job_id)
                if job is not None:
                    record_job_usage(session, job, "failed", nothing)
                    failed.append(job)
        for job in failed:
            observe_finished(job, "failed", nothing)
        if reaped:
            self.wake()

    def _sweep(self, session: Session) -> list[leases.Reaped]:
        """The expired-lease sweep; the cluster pool's takes a lock shared by all workers."""
        return leases.requeue_expired(session)

    def purge(self) -> int:
        with session_scope(self.sessions) as session:
            retention = TenancyRepository(session).retention_days()
            purged = self.tenant_store.purge_expired(session, utcnow(), retention)
        if purged:
            log.info("storage.purged", objects=purged)
        return purged

    # one job
    def _process(self, flight: _InFlight) -> None:
        claim = flight.claim
        bound = log.bind(tenant_id=claim.tenant_id, job_id=str(claim.job_id), attempt=claim.attempt)
        with session_scope(self.sessions) as session:
            job = leases.load_claimed(session, claim.job_id, claim.lease_owner)
            policy = TenancyRepository(session).get_policy(claim.tenant_id)
            cancel_requested = bool(job and job.cancel_requested)
            mark = self.marker.issue(session, job) if job is not None else None
        if job is None or policy is None or mark is None:
            bound.warning("job.claim_lost")
            return
        if cancel_requested:
            flight.cancel.set()
        bound.info("job.started", worker=claim.lease_owner)
        started = time.perf_counter()
        try:
            if flight.cancel.is_set():
                raise Cancelled("the job was cancelled before it started")
            output = self.runner.run(job, policy, flight.cancel, self._progress_fn(flight), mark)
            output = self._mark_result(job, mark, output)
        except Cancelled:
            if self._stop.is_set():
                self._release(flight, bound)
            else:
                self._finish(flight, bound, "cancelled", job=job, began=started, stage="cancelled")
        except (EngineError, ServiceError) as exc:
            # Expected failures say why on the job, with the same type slug an API call gets.
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                began=started,
                refused=exc.what if isinstance(exc, ContentPolicyViolation) else None,
                error_type=exc.code,
                error_detail=exc.detail,
            )
        except OperationalError as exc:
            # The database went away mid-job (a restart, a failover), e.g. under a progress
            # write: not the job's fault, so it must not fail. Its lease is no longer renewed
            # (the flight ends here); once it expires the reaper queues the job again.
            bound.warning("job.interrupted", reason="database unavailable", error=str(exc)[:200])
            return
        except Exception as exc:
            bound.exception("job.crashed")
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                began=started,
                error_type="internal-error",
                error_detail=f"unexpected {type(exc).__name__} while processing the job",
            )
        else:
            try:
                self._store_result(flight, bound, job, policy, output)
            finally:
                output.discard()  # a video result's scratch folder, stored or not
        bound.info("job.done", seconds=round(time.perf_counter() - started, 3))

    def _progress_fn(self, flight: _InFlight) -> ProgressFn:
        last = [0.0]

        def report(fraction: float, stage: str, detail: dict[str, Any] | None = None) -> None:
            now = time.monotonic()
            if now - last[0] < self.config.progress_every_seconds and fraction < 1.0:
                return
            last[0] = now
            with session_scope(self.sessions) as session:
                state = leases.report_progress(
                    session, flight.claim.job_id, flight.claim.lease_owner, fraction, stage, detail
                )
            if not state.held or state.cancel_requested:
                flight.cancel.set()
            if flight.cancel.is_set():
                raise Cancelled("the job was cancelled")

        return report

    def _mark_result(self, job: Job, mark: JobMark, output: JobOutput) -> JobOutput:
        """The C2PA manifest on the encoded result (the watermark is already in its pixels).
        A result that cannot be signed is not stored: the job fails saying why."""
        try:
            processors = list(job.spec.get("processors") or [])
            consent = [ref["attestation_id"] for ref in job.consent or []]
            return self.marker.sign(output, mark, processors, consent)
        except BaseException:
            output.discard()
            raise

    def _store_result(
        self,
        flight: _InFlight,
        bound: structlog.typing.FilteringBoundLogger,
        job: Job,
        policy: Policy,
        output: JobOutput,
    ) -> None:
        claim = flight.claim
        # Measured once (a video result's size is a stat of its file): the job row, the usage
        # record and the log line all report the same figures.
        consumption = self._consumption(output)
        try:
            with session_scope(self.sessions) as session:
                # Same key on every attempt: a re-run overwrites, never duplicates.
                self.tenant_store.put(
                    session,
                    tenant_id=claim.tenant_id,
                    kind="outputs",
                    job_id=claim.job_id,
                    name=output.name,
                    data=output.data,
                    content_type=output.content_type,
                    quota_bytes=policy.storage_quota_bytes,
                )
                if output.sidecar is not None:
                    self.tenant_store.put(
                        session,
                        tenant_id=claim.tenant_id,
                        kind="outputs",
                        job_id=claim.job_id,
                        name=SIDECAR_NAME,
                        data=output.sidecar,
                        content_type="application/c2pa",
                        quota_bytes=policy.storage_quota_bytes,
                    )
                done = leases.finish(
                    session,
                    claim.job_id,
                    claim.lease_owner,
                    "succeeded",
                    stage="done",
                    progress=1.0,
                    outputs=[output.name] + ([SIDECAR_NAME] if output.sidecar else []),
                    output_content_type=output.content_type,
                    result_width=output.width,
                    result_height=output.height,
                    result_bytes=consumption.output_bytes,
                    result_pixels=consumption.output_pixels,
                    result_frames=output.frames,
                    compute_seconds=output.compute_seconds,
                    models_used=dict(output.models_used) or None,
                )
                if not done:
                    raise _LeaseLost
                record_job_usage(session, job, "succeeded", consumption)
                audit_moderation(session, job, output.moderated)
        except _LeaseLost:
            bound.warning("job.lease_lost_before_finish")
            return
        except StorageQuotaExceeded as exc:
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                error_type="storage-quota-exceeded",
                error_detail=str(exc),
            )
            return
        except StorageError as exc:
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                error_type="storage-error",
                error_detail=type(exc).__name__,
            )
            return
        observe_finished(job, "succeeded", consumption)
        bound.info(
            "job.succeeded",
            width=output.width,
            height=output.height,
            bytes=consumption.output_bytes,
            compute_seconds=round(output.compute_seconds, 3),
        )

    @property
    def device(self) -> str:
        return "gpu" if self.config.uses_device else "cpu"

    def _consumption(self, output: JobOutput) -> Consumption:
        return Consumption(
            compute_seconds=output.compute_seconds,
            device=self.device,
            frames=output.frames,
            input_pixels=output.input_pixels,
            output_pixels=output.width * output.height * output.frames,
            input_bytes=output.input_bytes,
            output_bytes=output.size,
        )

    def _finish(
        self,
        flight: _InFlight,
        bound: structlog.typing.FilteringBoundLogger,
        status: str,
        *,
        job: Job | None = None,
        began: float | None = None,
        refused: str | None = None,
        **values: object,
    ) -> None:
        # A job that ran without a result still used compute: it is metered (status says
        # how it ended), in the transaction that finishes it.
        consumption = Consumption(
            compute_seconds=time.perf_counter() - began if began is not None else 0.0,
            device=self.device,
        )
        with session_scope(self.sessions) as session:
            done = leases.finish(
                session, flight.claim.job_id, flight.claim.lease_owner, status, **values
            )
            if done and job is not None:
                record_job_usage(session, job, status, consumption)
                if refused is not None:  # content moderation refused an input or the output
                    audit_moderation(session, job, (), refused)
        if done:
            if job is not None:
                observe_finished(job, status, consumption)
            bound.info(f"job.{status}", error_type=values.get("error_type"))
        else:
            bound.warning("job.lease_lost_before_finish", status=status)

    def _release(self, flight: _InFlight, bound: structlog.typing.FilteringBoundLogger) -> None:
        # Shutting down: the job goes back to the queue for the next start (or another
        # process), rather than being reported as cancelled by its owner.
        with session_scope(self.sessions) as session:
            released = leases.release(session, flight.claim.job_id, flight.claim.lease_owner)
        bound.info("job.released", released=released)


class _LeaseLost(Exception):
    """The job was taken from this worker before it could record the result."""
