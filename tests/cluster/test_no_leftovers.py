"""No leftovers when a process dies. A SIGKILLed ``facegate worker`` leaves its scratch
folder (a video job's target copy, its partial result) in the temporary directory: the
next worker to start — or a live worker's reaper round — reclaims it, and a live worker's
folder is never touched. A ``facegate api`` SIGKILLed mid-submission leaves an input in
the store with no job and no ledger row: the retention purge reconciles the store with the
ledger. Real processes, real SIGKILLs."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
import yaml
from clusterkit import FACEGATE, Cluster, add_jobs, add_tenants, statuses, wait_for
from sqlalchemy import Engine, text
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, debug_options, job_files, photo

from facegate.provenance.marker import ResultMarker, marker_for
from facegate.queue.outcomes import JobOutcomes
from facegate.storage.local import LocalStore
from facegate.storage.tenant import TenantStore
from facegate.worker.scratch import LOCK_NAME, PREFIX, reclaim

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]


def scratch_of(tmpdir: Path) -> dict[int, Path]:
    """The scratch folders in ``tmpdir`` by the pid that made them."""
    found: dict[int, Path] = {}
    for folder in tmpdir.glob(f"{PREFIX}*"):
        try:
            found[int((folder / LOCK_NAME).read_text().split()[0])] = folder
        except (OSError, IndexError, ValueError):
            continue
    return found


def partial_files(folder: Path) -> list[Path]:
    return list(folder.glob("facegate-video-*/target"))


def store_for(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "storage")


def marker(tmp_path: Path) -> ResultMarker:
    return marker_for(tmp_path / "provenance")


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(10)


def test_a_killed_workers_scratch_is_reclaimed_by_a_live_reaper_and_at_start(
    cluster: Cluster, cluster_engine: Engine, tmp_path: Path
) -> None:
    cluster.tmpdir = tmp_path / "tmp"
    cluster.tmpdir.mkdir()
    add_tenants(cluster_engine, {"x": 1, "y": 1})
    add_jobs(cluster_engine, "x", 1, seconds=60, test_scratch=True)

    # Worker a (tenant x) is mid-job, its partial file in its scratch folder; worker b
    # (tenant y, idle) is alive beside it.
    a = cluster.start_worker("a", "--tenants", "x")
    wait_for(lambda: any(partial_files(f) for f in scratch_of(cluster.tmpdir).values()), 60, "a")
    b = cluster.start_worker("b", "--tenants", "y")
    wait_for(lambda: b.pid in scratch_of(cluster.tmpdir), 60, "b's scratch folder")
    a_folder = scratch_of(cluster.tmpdir)[a.pid]
    b_folder = scratch_of(cluster.tmpdir)[b.pid]

    kill(a)
    assert partial_files(a_folder), "a SIGKILL leaves the folder behind"
    # b's reaper round (every third of the 2 s lease) takes it; its own stays.
    wait_for(lambda: not a_folder.exists(), 15, "b's reaper to reclaim a's scratch")
    assert b_folder.exists()

    # Nobody alive: b's folder stays until the next worker starts.
    kill(b)
    assert b_folder.exists()
    c = cluster.start_worker("c", "--tenants", "x")
    wait_for(lambda: c.pid in scratch_of(cluster.tmpdir), 60, "c's scratch folder")
    assert not b_folder.exists()
    assert list(scratch_of(cluster.tmpdir)) == [c.pid]

    # The killed job itself comes back through its lease and runs on c (its partial
    # file in c's folder now), as before.
    wait_for(
        lambda: any(partial_files(f) for f in scratch_of(cluster.tmpdir).values()),
        60,
        "the job to run again on c",
    )
    assert statuses(cluster_engine) == {"running": 1}


def test_an_api_killed_mid_submission_leaves_an_orphan_that_the_purge_reconciles(
    cluster: Cluster, cluster_engine: Engine, tmp_path: Path
) -> None:
    cluster.tmpdir = tmp_path / "tmp"
    cluster.tmpdir.mkdir()
    env = cluster.env()
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"id": "sub", "policy": DEBUG_TENANT_POLICY}))
    subprocess.run([FACEGATE, "tenant", "apply", "-f", str(tenants)], env=env, check=True)
    token = subprocess.run(
        [FACEGATE, "key", "create", "sub"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    base = cluster.start_api()
    api = cluster.processes[-1]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        kept = client.post("/v1/jobs", files=job_files(photo()), data=debug_options())
        assert kept.status_code == 202, kept.text
    inputs = tmp_path / "storage" / "tenants" / "sub" / "inputs"
    before = set(inputs.rglob("target"))

    # A transaction holding the tenant's row makes the next submission wait at its job
    # insert (the foreign key), after its input is in the store: the window a SIGKILL hit.
    with cluster_engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM tenants WHERE id = 'sub' FOR UPDATE"))

        def submit() -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                try:
                    client.post("/v1/jobs", files=job_files(photo()), data=debug_options())
                except httpx.HTTPError:
                    pass  # the server was killed under it

        request = threading.Thread(target=submit)
        request.start()
        wait_for(lambda: set(inputs.rglob("target")) - before, 60, "the input to be stored")
        api_scratch = scratch_of(cluster.tmpdir)[api.pid]
        kill(api)
        holder.rollback()
    request.join(60)
    # The API's own temporary folder is left too, and the next reclaim (a starting
    # process, a worker's reaper round) takes it.
    assert api_scratch.exists()
    assert reclaim(cluster.tmpdir) == [api_scratch]

    [orphan] = set(inputs.rglob("target")) - before
    with cluster_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar_one() == 1
        ledger = set(conn.execute(text("SELECT key FROM stored_objects")).scalars())
    assert not any(orphan.as_posix().endswith(key) for key in ledger)

    # The retention purge reconciles the store with the ledger: the first sweep only
    # suspects the orphan (a submission in flight looks the same), the next deletes it;
    # the committed job's inputs stay.
    outcomes = JobOutcomes(cluster_engine, TenantStore(store_for(tmp_path)), marker(tmp_path))
    assert outcomes.purge() == 0
    assert orphan.exists()
    assert outcomes.purge() == 1
    assert not orphan.exists()
    assert set(inputs.rglob("target")) == before
