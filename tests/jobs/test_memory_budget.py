"""A worker's memory budget: the claim hands each job's estimated peak to the worker (SQLite,
PostgreSQL, in memory), and a pool holds at most its budget's worth of jobs at once — two
jobs that do not fit together run one after the other; a job larger than the whole budget
is failed by its runner's check rather than run or left blocking the queue."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from jobfactories import create_job, create_tenant, sessions_of
from sqlalchemy import Engine

from facegate.database import session_scope
from facegate.jobs.tables import Job
from facegate.provenance.marker import JobMark, marker_for
from facegate.queue.claim import LockingClaimer
from facegate.queue.fairness import Fit, TenantLimits
from facegate.queue.memory import MemoryJob, MemoryQueue
from facegate.queue.port import JobQueue
from facegate.queue.postgres import PostgresClaimer
from facegate.queue.sql import PostgresQueue, SqlQueue
from facegate.storage.memory import MemoryStore
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.output import JobOutput, ProgressFn
from facegate.worker.pool import WorkerConfig, WorkerPool

MIB = 2**20
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010800000000"
    "3a7e9b550000000a49444154789c63680000008200816e2cfb0a0000000049454e44ae426082"
)


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


def run_two_jobs(engine: Engine, tmp_path: Path, budget: int) -> tuple[OverlapRunner, list[str]]:
    """Two 600 MiB jobs of one tenant (cap 4) on a pool of two workers with ``budget``."""
    with session_scope(sessions_of(engine)) as session:
        create_tenant(session, "heavy", max_concurrent_jobs=4)
        ids = [create_job(session, "heavy", memory_bytes=600 * MIB).id for _ in range(2)]
    runner = OverlapRunner(hold=0.6)
    store = TenantStore(MemoryStore())
    pool = WorkerPool.on_database(
        engine,
        store,
        WorkerConfig(workers=2, lease_seconds=30, poll_seconds=0.05, memory_bytes=budget),
        marker=marker_for(tmp_path / "provenance", create=True),
        runner=runner,
        queue=queue_for(engine),
    )
    pool.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with session_scope(sessions_of(engine)) as session:
                done = [session.get(Job, job_id) for job_id in ids]
                statuses = [job.status for job in done if job is not None]
            if statuses == ["succeeded", "succeeded"]:
                break
            time.sleep(0.05)
    finally:
        pool.stop()
    return runner, statuses


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
