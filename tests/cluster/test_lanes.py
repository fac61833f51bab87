"""The short-job lane and the workers' CPU priority, with real processes: a heavy tenant with
its cap full of long jobs cannot make a light tenant's short job wait for them.

Cluster shape (PostgreSQL): ``facegate worker`` (any job, nice 19) beside ``facegate worker
--lane short`` (nice 0). Embedded shape (SQLite): ``facegate serve`` runs the same two as
child processes (its lane at nice 10: below the live streams it serves), woken by its
submissions and gone when it is gone. Jobs run the cheap runner
(tests/cluster/cheap_runner.py): everything around it is the production path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from clusterkit import FACEGATE, Cluster, add_jobs, add_tenants, free_port, wait_for
from sqlalchemy import Engine, select
from tests.testdata import FACES

from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.jobs.tables import WorkerRecord
from facegate.tenancy.schemas import KeyCreate
from facegate.tenancy.service import TenancyService

LONG, SHORT = 600.0, 0.5  # estimated seconds (facegate.jobs.cost) of the two kinds of job


def nice_of(pid: int) -> int:
    """A process's nice value (field 19 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16])


def started(cluster: Cluster, job: str) -> float | None:
    return next((t for event, j, *_, t in cluster.runs() if event == "start" and j == job), None)


def heavy_cap_full(cluster: Cluster, engine: Engine) -> list[str]:
    """Tenant heavy (cap 2) with four long jobs queued, two of them running; light (cap 2)."""
    add_tenants(engine, {"heavy": 2, "light": 2})
    heavy = [str(j) for j in add_jobs(engine, "heavy", 4, seconds=60, estimated_seconds=LONG)]
    wait_for(lambda: sum(started(cluster, j) is not None for j in heavy) == 2, 60, "heavy x2")
    return heavy


@pytest.mark.postgres
@pytest.mark.slow
def test_a_light_job_is_claimed_at_once_beside_a_heavy_tenants_full_cap(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    general = cluster.start_worker("general", "--concurrency", "2")
    short = cluster.start_worker("short", "--lane", "short", "--concurrency", "1")
    heavy = heavy_cap_full(cluster, cluster_engine)
    (light,) = add_jobs(cluster_engine, "light", 1, seconds=0.05, estimated_seconds=SHORT)
    queued_at = time.time()
    wait_for(lambda: started(cluster, str(light)) is not None, 10, "the light job to start")
    waited = (started(cluster, str(light)) or 0) - queued_at
    assert waited < 2.0, waited  # NOTIFY wakes the lane; no long job stands in its way
    # The long jobs went on (nothing was preempted) and only the general worker runs them.
    runs = cluster.runs()
    assert not [e for e, j, *_ in runs if j in heavy and e in ("end", "cancelled")]
    assert {pid for e, j, _t, pid, _s in runs if j in heavy} == {general.pid}
    assert {pid for e, j, _t, pid, _s in runs if j == str(light)} == {short.pid}
    assert nice_of(general.pid) == 19
    assert nice_of(short.pid) == 0


@pytest.mark.postgres
@pytest.mark.slow
def test_without_the_lane_the_light_job_waits_for_a_whole_long_job(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    """The control: the same workers' capacity with no lane (the set-up before it)."""
    cluster.start_worker("general", "--concurrency", "2")
    heavy_cap_full(cluster, cluster_engine)
    (light,) = add_jobs(cluster_engine, "light", 1, seconds=0.05, estimated_seconds=SHORT)
    time.sleep(3.0)
    assert started(cluster, str(light)) is None


def serve_with_children(
    tmp_path: Path, cluster: Cluster
) -> tuple[subprocess.Popen[bytes], str, str]:
    """``facegate serve`` on SQLite with its default worker children (cheap runner); long
    polls, so only the submission's wake-up can start a job quickly."""
    url = f"sqlite:///{tmp_path}/facegate.db"
    migrate(url)
    port = free_port()
    env = cluster.env() | {
        "FACEGATE_DATABASE_URL": url,
        "FACEGATE_JOB_POLL_SECONDS": "5",
        "FACEGATE_WORKER_GRACE_SECONDS": "1",
        "FACEGATE_PROVENANCE_DIR": str(tmp_path / "provenance"),
    }
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen(
            [FACEGATE, "serve", "--port", str(port)], env=env, stdout=log, stderr=log
        )
    cluster.processes.append(process)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 60, "serve to start")
    return process, url, base


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def worker_children(pid: int, engine: Engine) -> dict[int, int]:
    """serve's worker children (pid -> nice): those that registered a worker heartbeat (serve
    has other children: its warm stream engine, multiprocessing's resource tracker)."""
    with engine.connect() as connection:
        workers = set(connection.scalars(select(WorkerRecord.pid)))
    return {child: nice_of(child) for child in children_of(pid) if child in workers}


@pytest.mark.slow
def test_serve_runs_its_workers_as_children_with_a_short_lane(
    tmp_path: Path, cluster: Cluster
) -> None:
    serve, url, base = serve_with_children(tmp_path, cluster)
    engine = create_engine_from_url(url)
    try:
        lanes_and_restart(tmp_path, serve, base, cluster, engine)
    finally:
        engine.dispose()


def lanes_and_restart(
    tmp_path: Path, serve: subprocess.Popen[bytes], base: str, cluster: Cluster, engine: Engine
) -> None:
    # The children lower their priority first thing: the general one to 19, the lane
    # to 10 (serve runs live streams: Settings.stream_job_nice).
    wait_for(
        lambda: sorted(worker_children(serve.pid, engine).values()) == [10, 19],
        60,
        "two worker children, at nice 19 and 10",
    )
    heavy_cap_full(cluster, engine)
    key = light_key(engine)
    # Through the API: serve's submission wakes its children at once (the lane's poll is
    # 5 s here, so only the wake-up can start the job sooner).
    sent = time.time()
    answer = httpx.post(
        f"{base}/v1/jobs",
        headers={"Authorization": f"Bearer {key}"},
        files={
            "source": ("s.jpg", (FACES / "woman_a_selfie_frontal_01.jpg").read_bytes()),
            "target": ("t.jpg", (FACES / "man_frontal_glasses.jpg").read_bytes()),
        },
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    light = answer.json()["id"]
    wait_for(lambda: started(cluster, light) is not None, 10, "the light job")
    assert (started(cluster, light) or 0) - sent < 2.0
    # A child that dies (the OOM killer's SIGKILL) is started again, and said so in the log.
    (lane,) = [pid for pid, nice in worker_children(serve.pid, engine).items() if nice == 10]
    os.kill(lane, signal.SIGKILL)
    wait_for(
        lambda: (
            sorted(worker_children(serve.pid, engine).values()) == [10, 19]
            and lane not in worker_children(serve.pid, engine)
        ),
        60,
        "the short lane started again",
    )
    assert "workers.child_died" in (tmp_path / "serve.log").read_text()
    # The parent killed outright: its children (the warm stream engine too) notice and stop
    # (jobs go back to the queue).
    children = children_of(serve.pid)
    os.kill(serve.pid, signal.SIGKILL)
    serve.wait()
    wait_for(lambda: not any(Path(f"/proc/{c}").exists() for c in children), 20, "children gone")


def light_key(engine: Engine) -> str:
    with session_scope(create_session_factory(engine)) as session:
        return TenancyService(session).create_key("light", KeyCreate(scopes=["jobs:write"])).token
