"""Segmented video: one long video on 1 worker against 2 workers that run its parts at once.

A synthetic clip with a face (``engine/video/synth.py``; default 60 s of 1080p at 30 fps) is
swapped with one source face, through the real worker pool: ``--workers`` worker processes
(each a ``WorkerPool`` of one thread with the engine, as ``facegate worker`` runs them) on
one SQLite database and one local store, from submission until the result is stored. The
baseline is one worker running the video whole (``segment_seconds`` 0); the other run cuts
it into parts of ``--segment-seconds`` that 2 workers claim. Rounds alternate the order
(A B B A ...) so drift on a shared machine hits both; the wall times of every run, their
medians, the ratio (the issue asks >= 0.8 x N = 1.6 on 2 workers), the compute seconds
billed and the machine's load are printed.

    .venv/bin/python benchmarks/segments_bench.py [--seconds 60] [--height 1080]
        [--segment-seconds 6] [--rounds 2]

On this 2-core machine one worker's run of a whole video already uses both cores (render
threads, FFmpeg's decoder and x264 threads): 60 s of 1080p took 99.9 s wall on 1 worker and
103.1 s on 2 workers sharing the cores (0.97x): nothing to gain without more cores. Two
workers with a core each (``--cores-per-worker 1``: two 1-core pods, the shape a cluster
gives) model N = 2. Measured 2026-12-03, other agents' processes moved into an idle CPU
cgroup (they still ran on whatever the run left idle; the two cores may be hyperthreads of
one), one round each:

- before input moderation ran as the parts decode (the split decoded the whole input for
  it: 19.2 s serial): whole 142.7 s, parts 95.7 s: 1.49x;
- now: whole 147.6 s, parts 91.5 s (split 12 s: the count of faces in view, which decodes
  the video; 10 parts of ~15 s, 5 per worker; assembly 0.4 s; billed 166.9 s): **1.61x**;
- ``--reference`` (the split also runs the analyse stage up to the last border to hand the
  parts their people's decisions: 27 s serial): whole 147.9 s, parts 116.4 s: 1.27x.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import select

from benchkit import FACES, like_a_facegate_process, load_average
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.engine.runtime import EngineRuntime
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.jobs.tables import Job
from facegate.provenance.marker import marker_for
from facegate.storage.local import LocalStore
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy, Tenant
from facegate.usage.tables import UsageRecord
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.runner import EngineRunner

TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "man_frontal_glasses.jpg"


def run_worker(
    url: str,
    folder: str,
    segment_seconds: float,
    cores: set[int] | None,
    ready: Event,
    stop: Event,
) -> None:
    """One worker process: a pool of one thread on the shared database and store; on
    ``cores`` only when given (a pod's CPU limit, as several machines would give)."""
    if cores:
        os.sched_setaffinity(0, cores)
    like_a_facegate_process()
    engine = create_engine_from_url(url)
    store = TenantStore(LocalStore(Path(folder) / "storage"))
    runtime = EngineRuntime.create(Path(folder) / "models")
    pool = WorkerPool.on_database(
        engine,
        store,
        WorkerConfig(workers=1, poll_seconds=0.1),
        marker=marker_for(Path(folder) / "provenance", create=True),
        runner=EngineRunner(store, runtime, segment_seconds=segment_seconds),
    )
    pool.start()
    ready.set()
    stop.wait()
    pool.stop()
    runtime.close()


def submit(url: str, folder: Path, clip: bytes, reference: bool) -> uuid.UUID:
    sessions = create_session_factory(create_engine_from_url(url))
    store = TenantStore(LocalStore(folder / "storage"))
    job_id = uuid.uuid4()
    spec: dict[str, Any] = {"processors": ["face_swapper"]}
    with session_scope(sessions) as session:
        inputs = {"source-0": SOURCE.read_bytes(), "target": clip}
        if reference:  # the clip's own person: the split hands the parts their decisions
            inputs["reference"] = TARGET.read_bytes()
            spec["selector"] = {"mode": "reference"}
        for name, data in inputs.items():
            store.put(
                session,
                tenant_id="studio",
                kind="inputs",
                job_id=job_id,
                name=name,
                data=data,
                content_type="application/octet-stream",
            )
        session.add(
            Job(
                id=job_id,
                tenant_id="studio",
                kind="video",
                spec=spec,
                inputs=list(inputs),
            )
        )
    return job_id


def finished(url: str, job_id: uuid.UUID) -> tuple[str, float] | None:
    sessions = create_session_factory(create_engine_from_url(url))
    with session_scope(sessions, read_only=True) as session:
        job = session.get(Job, job_id)
        assert job is not None
        if job.status not in ("succeeded", "failed", "cancelled"):
            return None
        record = session.scalars(
            select(UsageRecord).where(UsageRecord.job_id == job_id)
        ).one_or_none()
        return job.status, record.compute_seconds if record is not None else 0.0


def one_run(
    folder: Path,
    clip: bytes,
    workers: int,
    segment_seconds: float,
    cores_per_worker: int,
    reference: bool,
) -> dict[str, Any]:
    """Start the workers, submit the video, wait for its result; wall seconds from the
    submission, and the compute seconds billed."""
    run = folder / uuid.uuid4().hex[:8]
    run.mkdir()
    url = f"sqlite:///{run}/bench.db"
    migrate(url)
    sessions = create_session_factory(create_engine_from_url(url))
    with session_scope(sessions) as session:
        tenant = Tenant(id="studio", name="studio")
        tenant.policy = Policy(
            max_concurrent_jobs=workers, max_video_seconds=600, max_input_bytes=2**30
        )
        session.add(tenant)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    processes = []
    available = sorted(os.sched_getaffinity(0))
    for number in range(workers):
        ready = context.Event()
        cores = None
        if cores_per_worker:
            first = number * cores_per_worker
            cores = {available[(first + i) % len(available)] for i in range(cores_per_worker)}
        process = context.Process(
            target=run_worker, args=(url, str(run), segment_seconds, cores, ready, stop)
        )
        process.start()
        ready.wait()
        processes.append(process)
    try:
        started = time.perf_counter()
        job_id = submit(url, run, clip, reference)
        while (outcome := finished(url, job_id)) is None:
            time.sleep(0.2)
        wall = time.perf_counter() - started
    finally:
        stop.set()
        for process in processes:
            process.join(60)
    status, compute = outcome
    return {"wall": wall, "status": status, "compute": compute}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--segment-seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--cores-per-worker",
        type=int,
        default=0,
        help="pin each worker process to this many cores of its own (0: share them all); "
        "1 on a 2-core machine models two 1-core pods",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="selector mode reference: the split first follows the faces up to the last "
        "border (engine/video/census.py), a serial cost before the parts start",
    )
    args = parser.parse_args()
    print(like_a_facegate_process())
    width = args.height * 16 // 9 // 2 * 2
    with tempfile.TemporaryDirectory(prefix="segments-bench-") as name:
        folder = Path(name)
        path = folder / "clip.mp4"
        frames = make_face_clip(
            path, TARGET, ClipSpec(seconds=args.seconds, width=width, height=args.height)
        )
        print(f"clip: {args.seconds:g} s, {width}x{args.height}, {frames} frames")
        clip = path.read_bytes()
        cases = {
            "1 worker, whole": (1, 0.0),
            f"2 workers, parts of {args.segment_seconds:g} s": (2, args.segment_seconds),
        }
        names = list(cases)
        walls: dict[str, list[float]] = {case: [] for case in names}
        for round_number in range(args.rounds):
            order = names if round_number % 2 == 0 else names[::-1]
            for case in order:
                workers, segment = cases[case]
                result = one_run(
                    folder, clip, workers, segment, args.cores_per_worker, args.reference
                )
                walls[case].append(result["wall"])
                print(
                    f"round {round_number + 1} {case:<28} {result['status']:<9} "
                    f"wall {result['wall']:7.1f} s  billed {result['compute']:7.1f} s  "
                    f"({load_average()})",
                    flush=True,
                )
        base, split = (statistics.median(walls[case]) for case in names)
        print(f"median wall: {names[0]} {base:.1f} s, {names[1]} {split:.1f} s")
        print(f"speed-up on 2 workers: {base / split:.2f}x (goal >= 1.6x)")


if __name__ == "__main__":
    main()
