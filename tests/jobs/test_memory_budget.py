"""A worker's memory budget: the claim hands each job's estimated peak to the worker (SQLite,
PostgreSQL, in memory), and a pool holds at most its budget's worth of jobs at once — two
jobs that do not fit together run one after the other; a job larger than the whole budget
is failed by its runner's check rather than run or left blocking the queue."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from jobfactories import PNG_1X1, create_job, create_tenant, sessions_of
from sqlalchemy import Engine
from tests.fakedevice import FakeDevice

from facegate.database import session_scope
from facegate.engine.image import encode_image
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.errors import MemoryBudgetExceeded
from facegate.jobs.capacity import memory_limit
from facegate.jobs.cost import TargetShape, estimate_cost
from facegate.jobs.tables import Job, WorkerRecord
from facegate.provenance.marker import JobMark, marker_for
from facegate.queue.claim import LockingClaimer
from facegate.queue.fairness import Fit, TenantLimits
from facegate.queue.memory import MemoryJob, MemoryQueue
from facegate.queue.port import JobQueue, WorkerInfo
from facegate.queue.postgres import PostgresClaimer
from facegate.queue.sql import PostgresQueue, SqlQueue
from facegate.storage.memory import MemoryStore
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.output import JobOutput, JobRunner, ProgressFn
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.runner import EngineRunner
from facegate.worker.video_runner import check_decoded_memory

MIB = 2**20


class OverlapRunner:
    """Holds each job ``hold`` seconds and records how many ran at once."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.running = 0
        self.most = 0
        self.ran: list[str] = []
        self._lock = threading.Lock()

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.ran.append(str(job.id))
        try:
            cancel.wait(self.hold)
        finally:
            with self._lock:
                self.running -= 1
        return JobOutput(data=PNG_1X1, format="png", width=1, height=1, frames=1, compute_seconds=0)


def queue_for(engine: Engine) -> JobQueue:
    """The claim each shape's workers use: the cluster's per-tenant claim function on
    PostgreSQL, the serialised claim on SQLite."""
    if engine.dialect.name == "postgresql":
        return PostgresQueue(engine)
    return SqlQueue(engine)


def run_jobs(
    engine: Engine, tmp_path: Path, runner: JobRunner, config: WorkerConfig, sizes: list[int]
) -> list[str]:
    """Jobs of these estimated sizes, of one tenant (cap 4, device limit 4), on a pool with
    ``config``; their statuses once all succeeded (or after 30 s)."""
    with session_scope(sessions_of(engine)) as session:
        create_tenant(session, "heavy", max_concurrent_jobs=4, device_limit=4)
        ids = [create_job(session, "heavy", memory_bytes=size).id for size in sizes]
    pool = WorkerPool.on_database(
        engine,
        TenantStore(MemoryStore()),
        config,
        marker=marker_for(tmp_path / "provenance", create=True),
        runner=runner,
        queue=queue_for(engine),
    )
    pool.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with session_scope(sessions_of(engine)) as session:
                statuses = [session.get(Job, job_id).status for job_id in ids]  # type: ignore[union-attr]
            if set(statuses) == {"succeeded"}:
                break
            time.sleep(0.05)
    finally:
        pool.stop()
    return statuses


def run_two_jobs(engine: Engine, tmp_path: Path, budget: int) -> tuple[OverlapRunner, list[str]]:
    """Two 600 MiB jobs on a pool of two workers with ``budget``."""
    runner = OverlapRunner(hold=1.5)
    config = WorkerConfig(workers=2, lease_seconds=30, poll_seconds=0.05, memory_bytes=budget)
    return runner, run_jobs(engine, tmp_path, runner, config, [600 * MIB] * 2)


def test_two_jobs_over_one_budget_run_one_after_the_other(
    db_engine: Engine, tmp_path: Path
) -> None:
    runner, statuses = run_two_jobs(db_engine, tmp_path, budget=1024 * MIB)
    assert statuses == ["succeeded", "succeeded"]  # the second waited, then ran
    assert runner.most == 1  # never both at once


def test_two_jobs_within_the_budget_run_together(db_engine: Engine, tmp_path: Path) -> None:
    # The same scenario with room for both: the pool does run them at once, so the test
    # above would see an overlap if the budget were not kept.
    runner, statuses = run_two_jobs(db_engine, tmp_path, budget=1200 * MIB)
    assert statuses == ["succeeded", "succeeded"]
    assert runner.most == 2


class DeviceRunner(OverlapRunner):
    """Holds each job's estimated bytes on a fake device while it runs (the device refuses
    what does not fit, as a CUDA allocation would)."""

    def __init__(self, device: FakeDevice, hold: float) -> None:
        super().__init__(hold)
        self.device = device

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        size = job.memory_bytes or 0
        self.device.reserve(size)
        try:
            return super().run(job, policy, cancel, on_progress, mark)
        finally:
            self.device.release(size)


def test_a_device_worker_holds_no_more_than_its_devices_memory(
    db_engine: Engine, tmp_path: Path
) -> None:
    """A CUDA worker's budget is its device's memory: three 400 MiB jobs on a 1 GiB device
    and three threads run two at a time, none refused by the device."""
    device = FakeDevice(total=1024 * MIB)
    runner = DeviceRunner(device, hold=1.5)
    config = WorkerConfig(workers=3, poll_seconds=0.05, uses_device=True, memory_bytes=device.total)
    statuses = run_jobs(db_engine, tmp_path, runner, config, [400 * MIB] * 3)
    assert statuses == ["succeeded"] * 3
    assert runner.most == 2
    assert device.peak == 800 * MIB


def test_a_claim_carries_the_jobs_memory_estimate(db_engine: Engine) -> None:
    with session_scope(sessions_of(db_engine)) as session:
        create_tenant(session, "a", max_concurrent_jobs=5)
        sized = create_job(session, "a", memory_bytes=300 * MIB).id
        unknown = create_job(session, "a").id
    claimer = (
        PostgresClaimer(db_engine)
        if db_engine.dialect.name == "postgresql"
        else LockingClaimer(db_engine)
    )
    claims = claimer.claim_many("w", limit=5, lease_seconds=30)
    assert {c.job_id: c.memory_bytes for c in claims} == {sized: 300 * MIB, unknown: 0}


def test_the_memory_queue_hands_the_estimate_too() -> None:
    queue = MemoryQueue()
    queue.add_tenant("a", TenantLimits(2, 1))
    job = queue.add_job(MemoryJob(id=uuid.uuid4(), tenant_id="a", memory_bytes=7))
    claim = queue.claim("w", lease_seconds=30)
    assert claim is not None
    assert (claim.job_id, claim.memory_bytes) == (job.id, 7)


def test_the_fit_is_what_the_held_jobs_leave_of_the_budget() -> None:
    assert WorkerConfig().fit(10**12) == Fit()  # no budget: no bound
    config = WorkerConfig(memory_bytes=1000, max_seconds=2.0)
    assert config.fit() == Fit(max_seconds=2.0, memory_bytes=1000)
    assert config.fit(600) == Fit(max_seconds=2.0, memory_bytes=400)
    assert config.fit(1500) == Fit(max_seconds=2.0, memory_bytes=0)


@pytest.mark.parametrize("held", [0, 1])
def test_a_job_over_the_whole_budget_is_taken_alone_by_an_idle_pool(
    tmp_path: Path, held: int
) -> None:
    """An idle pool takes the oversized head of the queue alone (its runner's check then
    fails it); a pool that holds a job leaves it queued."""
    queue = MemoryQueue()
    queue.add_tenant("a", TenantLimits(9, 9))
    pool = WorkerPool(
        queue,
        outcomes=None,  # type: ignore[arg-type]  # _next only claims
        config=WorkerConfig(workers=1, memory_bytes=1000),
        marker=marker_for(tmp_path / "provenance", create=True),
        runner=OverlapRunner(0),
    )
    if held:
        small = queue.add_job(MemoryJob(id=uuid.uuid4(), tenant_id="a", memory_bytes=10))
        first = pool._next("w")
        assert first is not None
        assert first.claim.job_id == small.id
    big = queue.add_job(MemoryJob(id=uuid.uuid4(), tenant_id="a", memory_bytes=5000))
    flight = pool._next("w")
    if held:
        assert flight is None  # 5000 does not fit what 10 leaves of 1000: it waits
        assert queue.jobs[big.id].status == "queued"
    else:
        assert flight is not None
        assert flight.claim.job_id == big.id


def test_the_runner_rechecks_the_estimate_from_the_decoded_target(
    db_engine: Engine, face_engine: EngineRuntime
) -> None:
    """The job row says 1 byte (its header lied, or the figure is stale): the runner
    estimates again from the target it decoded and fails the job over its budget."""
    if db_engine.dialect.name == "postgresql":
        pytest.skip("the runner reads no database")
    with session_scope(sessions_of(db_engine)) as session:
        create_tenant(session, "a", allowed_processors=["face_debugger"])
        job = create_job(session, "a", memory_bytes=1)
        job.spec = {"processors": ["face_debugger"]}
        policy = session.get(Policy, "a")
        assert policy is not None
        session.expunge_all()
    store = TenantStore(MemoryStore())
    target = encode_image(np.zeros((1000, 1200, 3), np.uint8), "png")
    for name, data in (("source-0", target), ("target", target)):
        store.write_new(
            tenant_id="a",
            kind="inputs",
            job_id=job.id,
            name=name,
            data=data,
            content_type="image/png",
        )
    needed = estimate_cost(["face_debugger"], {}, TargetShape(1200, 1000), video=False)
    mark = JobMark(1, 1, "test", b"k" * 32)
    runner = EngineRunner(store, face_engine, memory_budget=needed.memory_bytes - 1)
    with pytest.raises(MemoryBudgetExceeded) as refused:
        runner.run(job, policy, threading.Event(), lambda *_a, **_k: None, mark)
    assert refused.value.code == "memory-budget-exceeded"
    assert refused.value.extra == {
        "limit": "worker_memory_bytes",
        "limit_value": needed.memory_bytes - 1,
        "estimated_bytes": needed.memory_bytes,
    }
    check_decoded_memory(  # the same target fits a budget of its size
        PipelineSpec.model_validate(job.spec), TargetShape(1200, 1000), needed.memory_bytes
    )


def test_a_worker_registers_its_budget(db_engine: Engine) -> None:
    queue = queue_for(db_engine)
    queue.register_worker(WorkerInfo("w1", "h", 1, None, 2, memory_budget_bytes=3 * MIB))
    queue.register_worker(WorkerInfo("w2", "h", 2, ["b"], 2, memory_budget_bytes=9 * MIB))
    with session_scope(sessions_of(db_engine)) as session:
        assert session.get(WorkerRecord, "w1").memory_budget_bytes == 3 * MIB  # type: ignore[union-attr]
        assert memory_limit(session, "a", fallback=1) == 3 * MIB  # w2 serves only b
        assert memory_limit(session, "b", fallback=1) == 9 * MIB
    queue.register_worker(WorkerInfo("w3", "h", 3, None, 2))  # no budget: takes anything
    with session_scope(sessions_of(db_engine)) as session:
        assert memory_limit(session, "a", fallback=1) is None
    for name in ("w1", "w2", "w3"):
        queue.stop_worker(name)
    with session_scope(sessions_of(db_engine)) as session:
        assert memory_limit(session, "a", fallback=1) == 1  # none live: the setting
