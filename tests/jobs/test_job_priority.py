"""Jobs run below live streams: beside a process's streams every job worker runs at least
``stream_job_nice`` (serve's short lane too, where a video's segments run), a worker process
lowers every thread it already has, and the embedded threads shape lowers each worker
thread and so the threads its job starts (facegate.worker.priority)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from jobfactories import PNG_1X1, create_job, create_tenant, sessions_of
from sqlalchemy import Engine
from tests.conftest import make_settings

from facegate.database import session_scope
from facegate.jobs.tables import Job
from facegate.provenance.marker import JobMark, marker_for
from facegate.queue.sql import SqlQueue
from facegate.storage.memory import MemoryStore
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.children import embedded_lanes
from facegate.worker.output import JobOutput, ProgressFn
from facegate.worker.pool import WorkerConfig, WorkerPool


def thread_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def lane_nices(tmp_path: Path, **overrides: object) -> dict[str, int]:
    settings = make_settings(tmp_path, workers=1, short_lane_workers=1, **overrides)
    return {lane.name: lane.nice for lane in embedded_lanes(settings)}


def test_serve_lanes_run_below_its_streams(tmp_path: Path) -> None:
    # serve's defaults: streams on (2 a process), so its short lane is niced too
    assert lane_nices(tmp_path) == {"general": 19, "short": 10}
    assert lane_nices(tmp_path, stream_job_nice=15) == {"general": 19, "short": 15}
    # no streams in this process: the lanes' own nice values
    assert lane_nices(tmp_path, streams_per_process=0) == {"general": 19, "short": 0}
    assert lane_nices(tmp_path, stream_job_nice=0) == {"general": 19, "short": 0}


def test_a_worker_process_lowers_the_threads_it_already_has(tmp_path: Path) -> None:
    """In a process of its own (a nice value cannot be taken back): a thread started before
    lower_priority, the main thread, and a thread started after, all at +5."""
    script = textwrap.dedent(
        """
        import os, threading
        from facegate.worker.priority import lower_priority

        def nice(tid):
            return os.getpriority(os.PRIO_PROCESS, tid)

        base = nice(threading.get_native_id())
        parked, stop = [], threading.Event()
        def park():
            parked.append(threading.get_native_id())
            stop.wait()

        early = threading.Thread(target=park)
        early.start()
        while not parked:
            pass
        lower_priority(5)
        late = []
        after = threading.Thread(target=lambda: late.append(nice(threading.get_native_id())))
        after.start(); after.join()
        print(nice(parked[0]) - base, nice(threading.get_native_id()) - base, late[0] - base)
        stop.set()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["5", "5", "5"]


class NiceRunner:
    """Records the nice of the thread running each job and of a thread that job starts."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        started: list[int] = []
        helper = threading.Thread(target=lambda: started.append(thread_nice()))
        helper.start()
        helper.join()
        self.seen.append((thread_nice(), started[0]))
        return JobOutput(data=PNG_1X1, format="png", width=1, height=1, frames=1, compute_seconds=0)


def test_the_threads_shape_lowers_each_worker_thread_only(
    db_engine: Engine, tmp_path: Path
) -> None:
    with session_scope(sessions_of(db_engine)) as session:
        create_tenant(session, "t", max_concurrent_jobs=2)
        job_id = create_job(session, "t").id
    runner = NiceRunner()
    pool = WorkerPool.on_database(
        db_engine,
        TenantStore(MemoryStore()),
        WorkerConfig(workers=1, poll_seconds=0.05, nice=3),
        marker=marker_for(tmp_path / "provenance", create=True),
        runner=runner,
        queue=SqlQueue(db_engine),
    )
    base = thread_nice()
    pool.start()
    try:
        deadline = time.monotonic() + 30
        while not runner.seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        pool.stop()
    with session_scope(sessions_of(db_engine)) as session:
        assert session.get(Job, job_id).status == "succeeded"  # type: ignore[union-attr]
    expected = min(19, base + 3)
    assert runner.seen == [(expected, expected)]  # the job's thread and the one it started
    assert thread_nice() == base  # the process's other threads keep their priority
