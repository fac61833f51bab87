"""Workers: N threads that claim jobs fairly, run them, and record the outcome.

A thread that finds nothing to run claims for itself and for the threads idle beside it in
one round trip (``JobQueue.claim_many``); the extra claims wait in the pool's hand for
those threads, their leases renewed like the running ones'. One maintenance thread renews
the leases of the jobs in hand (and passes on cancel requests), requeues jobs whose lease
expired (a crashed process, a hung worker) and purges artifacts past their tenant's
retention. At start-up the reaper runs once, so jobs left running by a crash go back to the
queue as soon as their lease has expired; queued jobs are simply claimed again.

The pool drives two ports and issues no SQL of its own: the ``JobQueue`` (claim, leases,
reaper, wake-ups) and ``JobOutcomes`` (the transactions that begin and end a job).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import structlog
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from facegate.consent.service import check_job_consent
from facegate.engine.errors import Cancelled, EngineError
from facegate.errors import ServiceError
from facegate.jobs.tables import Job
from facegate.observability.metrics import worker_heartbeat
from facegate.provenance.marker import JobMark, ResultMarker
from facegate.queue.claim import Claim
from facegate.queue.fairness import Fit
from facegate.queue.outcomes import (
    JobOutcomes,
    ModerationRecord,
    RenderedPart,
    StartedJob,
    StoredResult,
    meter_reaped,
)
from facegate.queue.port import JobQueue
from facegate.queue.sql import SqlQueue
from facegate.storage.base import StorageError, StorageQuotaExceeded
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.usage.service import Consumption
from facegate.worker.moderation import refusal_record
from facegate.worker.observe import observe_finished
from facegate.worker.output import JobOutput, JobRunner, ProgressFn
from facegate.worker.priority import lower_thread_priority
from facegate.worker.scratch import ScratchSpace, reclaim
from facegate.worker.segments import SegmentingRunner, SplitPlan

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
    # A short-job lane: only jobs estimated to take at most this many seconds
    # (facegate.jobs.cost); None takes any job.
    max_seconds: float | None = None
    # The memory budget: the estimated peaks of the jobs this pool holds (running and in
    # hand) stay within it (Settings.worker_memory_budget; None: no bound).
    memory_bytes: int | None = None
    # Added to each worker thread's nice when it starts (facegate.worker.priority): the
    # embedded threads shape's jobs beside the API process's live streams
    # (Settings.job_nice); a worker process lowers itself whole instead.
    nice: int = 0

    def fit(self, held_bytes: int = 0) -> Fit:
        """What this pool's workers may claim now, holding jobs estimated at
        ``held_bytes``."""
        if self.memory_bytes is None:
            return Fit(max_seconds=self.max_seconds)
        free = max(0, self.memory_bytes - held_bytes)
        return Fit(max_seconds=self.max_seconds, memory_bytes=free)

    @property
    def device(self) -> str:
        return "gpu" if self.uses_device else "cpu"


@dataclass
class _InFlight:
    claim: Claim
    cancel: threading.Event = field(default_factory=threading.Event)


class WorkerPool:
    """The workers of one process: the embedded shape's (started and stopped by the app
    lifespan) or a ``facegate worker``'s."""

    def __init__(
        self,
        queue: JobQueue,
        outcomes: JobOutcomes,
        config: WorkerConfig | None = None,
        *,
        marker: ResultMarker,
        runner: JobRunner,
        scratch: ScratchSpace | None = None,
    ) -> None:
        self.config = config or WorkerConfig()
        self.queue = queue
        # This process's temporary files; opened at start, where the folders of killed
        # workers are reclaimed (and on each reaper round).
        self.scratch = scratch or ScratchSpace()
        self.outcomes = outcomes
        self.marker = marker  # every result is marked; there is no pool without it
        self.runner = runner
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._in_flight: dict[uuid.UUID, _InFlight] = {}  # running or in hand
        self._in_hand: deque[_InFlight] = deque()  # claimed for an idle thread
        self._idle = 0  # threads waiting for work
        self._lock = threading.Lock()
        # One claim at a time: each claims within what the jobs held leave of the budget.
        self._claiming = threading.Lock()
        self._unlisten: Callable[[], None] | None = None

    @classmethod
    def on_database(
        cls,
        engine: Engine,
        tenant_store: TenantStore,
        config: WorkerConfig | None = None,
        *,
        marker: ResultMarker,
        runner: JobRunner,
        queue: JobQueue | None = None,
        scratch: ScratchSpace | None = None,
        tenants: frozenset[str] | None = None,
    ) -> Self:
        """A pool on ``engine``'s database: the serialised claim unless ``queue`` says
        otherwise; jobs the reaper fails are metered in the reaping transaction. ``tenants``:
        the hourly purge walks only theirs (a tenant-bound process)."""
        config = config or WorkerConfig()
        scratch = scratch or ScratchSpace()
        return cls(
            queue or SqlQueue(engine, on_reaped=meter_reaped(config.device)),
            JobOutcomes(engine, tenant_store, marker, tenants),
            config,
            marker=marker,
            runner=runner,
            scratch=scratch,
        )

    # lifecycle
    def start(self) -> None:
        self.scratch.open()
        try:
            self.reap()  # jobs a crashed worker left running go back to the queue at once
        except OperationalError as exc:
            # The database is away (a restart): the maintenance loop reaps once it is back,
            # and the work loops retry their claims; a worker must not die of it at start.
            log.warning("workers.start_reap_failed", pool=self.name, error=type(exc).__name__)
        self._stop.clear()
        self._unlisten = self.queue.listen(lambda _tenant: self.wake())
        for number in range(self.config.workers):
            worker_id = f"{self.name}/w{number}"
            self._spawn(self._work_loop, worker_id)
        self._spawn(self._maintenance_loop, f"{self.name}/maintenance")
        log.info("workers.started", workers=self.config.workers, pool=self.name)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming, ask running jobs to stop, and wait for the threads."""
        self._stop.set()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        with self._lock:
            for flight in self._in_flight.values():
                flight.cancel.set()
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()
        self._hand_back()
        self.scratch.close()

    def _hand_back(self) -> None:
        """Jobs claimed for threads that will not run them go back to the queue."""
        while True:
            with self._lock:
                if not self._in_hand:
                    return
                flight = self._in_hand.popleft()
                self._in_flight.pop(flight.claim.job_id, None)
            try:
                self.queue.release(flight.claim)
            except Exception:
                log.warning("job.release_failed", job_id=str(flight.claim.job_id))

    def running_jobs(self) -> int:
        """Jobs running or in hand (a live stream's core budget holds while any do)."""
        with self._lock:
            return len(self._in_flight)

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
        lower_thread_priority(self.config.nice)
        while not self._stop.is_set():
            try:
                worked = self.run_once(worker_id)
            except Exception:
                log.exception("worker.error", worker=worker_id)
                worked = False
            if not worked:
                with self._wake:
                    self._idle += 1
                    try:
                        self._wake.wait(self.config.poll_seconds)
                    finally:
                        self._idle -= 1

    def _maintenance_loop(self, name: str) -> None:
        renew_every = max(0.05, self.config.lease_seconds / 3)
        last_purge = time.monotonic()
        while not self._stop.wait(renew_every):
            worker_heartbeat()
            try:
                self.renew_leases()
                self.reap()
                reclaim(self.scratch.parent)  # the scratch of workers killed meanwhile
                if time.monotonic() - last_purge >= self.config.purge_every_seconds:
                    last_purge = time.monotonic()
                    self.purge()
            except Exception:
                log.exception("workers.maintenance_error", pool=self.name)

    # one step each; public so tests can drive the pool without threads
    def run_once(self, worker_id: str) -> bool:
        """Take one job (in hand, or claimed now) and run it to a terminal status; False
        when nothing was claimable."""
        flight = self._next(worker_id)
        if flight is None:
            return False
        try:
            self._process(flight)
        finally:
            with self._lock:
                self._in_flight.pop(flight.claim.job_id, None)
        return True

    def _next(self, worker_id: str) -> _InFlight | None:
        with self._lock:
            if self._in_hand:
                return self._in_hand.popleft()
        if self._stop.is_set():
            return None
        with self._claiming:
            with self._lock:
                if self._in_hand:  # claimed for this thread while it waited
                    return self._in_hand.popleft()
                idle = self._idle
                held = self.held_bytes()
            claims = self._claim(worker_id, 1 + idle, self.config.fit(held))
            if not claims and held == 0 and self.config.memory_bytes is not None:
                # Nothing fits a whole budget: the job at the head of the fair order may be
                # larger than it (estimated before this budget was set). Taken alone, it is
                # failed by its runner's check (memory-budget-exceeded) instead of blocking
                # every job behind it on this worker.
                claims = self._claim(worker_id, 1, Fit(max_seconds=self.config.max_seconds))
            if not claims:
                return None
            flights = [_InFlight(claim) for claim in claims]
            with self._lock:
                for flight in flights:
                    self._in_flight[flight.claim.job_id] = flight
                self._in_hand.extend(flights[1:])
        if len(flights) > 1:
            self.wake()
        return flights[0]

    def _claim(self, worker_id: str, limit: int, fit: Fit) -> list[Claim]:
        return self.queue.claim_many(
            worker_id,
            limit=limit,
            lease_seconds=self.config.lease_seconds,
            uses_device=self.config.uses_device,
            fit=fit,
        )

    def held_bytes(self) -> int:
        """The estimated peak memory of the jobs this pool holds (call under ``_lock``)."""
        return sum(flight.claim.memory_bytes for flight in self._in_flight.values())

    def renew_leases(self) -> None:
        with self._lock:
            flights = list(self._in_flight.values())
        for flight in flights:
            state = self.queue.renew(flight.claim, self.config.lease_seconds)
            if not state.held or state.cancel_requested:
                flight.cancel.set()

    def reap(self) -> None:
        """Requeue jobs whose lease expired; those out of attempts fail, and are metered
        like every finished job (no compute is billed: their worker vanished)."""
        reaped = self.queue.reap()
        for item in reaped:
            log.warning(
                "job.lease_expired",
                tenant_id=item.tenant_id,
                job_id=str(item.job_id),
                outcome=item.outcome,
            )
        failed = [item for item in reaped if item.outcome == "failed"]
        if failed:
            nothing = Consumption(compute_seconds=0.0, device=self.device)
            for job in self.outcomes.jobs(failed):
                observe_finished(job, "failed", nothing)
        if reaped:
            self.wake()

    def purge(self) -> int:
        purged = self.outcomes.purge()
        if purged:
            log.info("storage.purged", objects=purged)
        return purged

    # one job
    def _process(self, flight: _InFlight) -> None:
        claim = flight.claim
        bound = log.bind(tenant_id=claim.tenant_id, job_id=str(claim.job_id), attempt=claim.attempt)
        started = self.outcomes.start(claim)
        if started is None:
            bound.warning("job.claim_lost")
            return
        job, policy, mark = started.job, started.policy, started.mark
        if started.cancel_requested:
            flight.cancel.set()
        bound.info("job.started", worker=claim.lease_owner)
        began = time.perf_counter()
        try:
            if flight.cancel.is_set():
                raise Cancelled("the job was cancelled before it started")
            if started.whole is None:  # a part's were checked when its job was split
                # The tenant's policy of now: require_consent switched on after submission.
                check_job_consent(
                    job.spec.get("processors", []), job.inputs, job.consent, policy.require_consent
                )
            output = self._run(flight, started)
            if isinstance(output, JobOutput):
                output = self._mark_result(job, mark, output)
        except Cancelled:
            if self._stop.is_set():
                self._release(flight, bound)
            else:
                self._finish(flight, bound, "cancelled", job=job, began=began, stage="cancelled")
        except (EngineError, ServiceError) as exc:
            # Expected failures say why on the job, with the same type slug an API call gets.
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                began=began,
                moderation=refusal_record(exc),
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
                began=began,
                error_type="internal-error",
                error_detail=f"unexpected {type(exc).__name__} while processing the job",
            )
        else:
            if isinstance(output, SplitPlan):
                self._split(flight, bound, job, output)
            elif isinstance(output, RenderedPart):
                try:
                    self._store_part(flight, bound, job, output)
                finally:
                    output.discard()
            else:
                try:
                    stored = self._store_result(flight, bound, job, policy, output)
                finally:
                    output.discard()  # a video result's scratch folder, stored or not
                if stored and started.parts:
                    self.outcomes.discard_parts(job)
        bound.info("job.done", seconds=round(time.perf_counter() - began, 3))

    def _run(self, flight: _InFlight, started: StartedJob) -> JobOutput | RenderedPart | SplitPlan:
        """Run a claimed job: whole; or, on a runner that segments video, a part of one, the
        assembly of a segmented one, or the split of a long one (facegate.worker.segments)."""
        job, policy, mark = started.job, started.policy, started.mark
        progress = self._progress_fn(flight)
        if isinstance(self.runner, SegmentingRunner):
            if started.whole is not None:
                return self.runner.run_part(job, policy, flight.cancel, progress, mark)
            if started.parts:
                return self.runner.assemble(job, started.parts, policy, progress)
            plan = self.runner.split(job, policy, flight.cancel, progress)
            if plan is not None:
                return plan
        elif started.whole is not None:
            raise RuntimeError("this worker's runner does not run parts of a segmented video")
        return self.runner.run(job, policy, flight.cancel, progress, mark)

    def _split(
        self,
        flight: _InFlight,
        bound: structlog.typing.FilteringBoundLogger,
        job: Job,
        plan: SplitPlan,
    ) -> None:
        """Record the parts; the job waits for them, taking no worker (any worker of any
        process claims them in the fair order)."""
        if not self.outcomes.split(
            flight.claim, job, plan.ranges, plan.compute_seconds, plan.moderation
        ):
            bound.warning("job.lease_lost_before_split")
            return
        bound.info("job.split", parts=len(plan.ranges))
        self.queue.announce(job.tenant_id)
        self.wake()

    def _store_part(
        self,
        flight: _InFlight,
        bound: structlog.typing.FilteringBoundLogger,
        part: Job,
        rendered: RenderedPart,
    ) -> None:
        change = self.outcomes.finish_part(flight.claim, part, rendered)
        if change is None:
            bound.warning("job.lease_lost_before_finish")
            return
        bound.info("job.part_succeeded", frames=rendered.frames, job=str(part.parent_id))
        if change == "assemble":  # the last part: the job is queued for its assembly
            self.queue.announce(part.tenant_id)
            self.wake()

    def _progress_fn(self, flight: _InFlight) -> ProgressFn:
        last = [0.0]

        def report(fraction: float, stage: str, detail: dict[str, Any] | None = None) -> None:
            now = time.monotonic()
            if now - last[0] < self.config.progress_every_seconds and fraction < 1.0:
                return
            last[0] = now
            state = self.queue.report_progress(flight.claim, fraction, stage, detail)
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
    ) -> bool:
        """Store, finish and meter a result; whether the job succeeded here."""
        # Measured once (a video result's size is a stat of its file): the job row, the usage
        # record and the log line all report the same figures.
        consumption = self._consumption(output)
        result = StoredResult(
            name=output.name,
            data=output.data,
            content_type=output.content_type,
            sidecar=output.sidecar,
            fields={
                "output_content_type": output.content_type,
                "result_width": output.width,
                "result_height": output.height,
                "result_bytes": consumption.output_bytes,
                "result_pixels": consumption.output_pixels,
                "result_frames": output.frames,
                "compute_seconds": output.compute_seconds,
                "models_used": dict(output.models_used) or None,
                "quality": list(output.quality) or None,
            },
            moderation=output.moderation,
        )
        try:
            done = self.outcomes.succeed(flight.claim, job, policy, result, consumption)
        except StorageQuotaExceeded as exc:
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                error_type="storage-quota-exceeded",
                error_detail=str(exc),
            )
            return False
        except StorageError as exc:
            self._finish(
                flight,
                bound,
                "failed",
                job=job,
                error_type="storage-error",
                error_detail=type(exc).__name__,
            )
            return False
        if not done:
            bound.warning("job.lease_lost_before_finish")
            return False
        observe_finished(job, "succeeded", consumption)
        bound.info(
            "job.succeeded",
            width=output.width,
            height=output.height,
            bytes=consumption.output_bytes,
            compute_seconds=round(output.compute_seconds, 3),
        )
        return True

    @property
    def device(self) -> str:
        return self.config.device

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
        moderation: ModerationRecord | None = None,
        **values: object,
    ) -> None:
        # A job that ran without a result still used compute: it is metered (status says
        # how it ended), in the transaction that finishes it.
        consumption = Consumption(
            compute_seconds=time.perf_counter() - began if began is not None else 0.0,
            device=self.device,
        )
        done = self.outcomes.end(
            flight.claim, job, status, consumption, moderation=moderation, **values
        )
        if done:
            if job is not None and job.parent_id is None:  # a part is counted in its job
                observe_finished(job, status, consumption)
            bound.info(f"job.{status}", error_type=values.get("error_type"))
        else:
            bound.warning("job.lease_lost_before_finish", status=status)

    def _release(self, flight: _InFlight, bound: structlog.typing.FilteringBoundLogger) -> None:
        # Shutting down: the job goes back to the queue for the next start (or another
        # process), rather than being reported as cancelled by its owner.
        released = self.queue.release(flight.claim)
        bound.info("job.released", released=released)
