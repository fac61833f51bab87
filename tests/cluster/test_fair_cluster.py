"""Acceptance: real worker processes on PostgreSQL keep every tenant within its cap and
finish every job exactly once; a SIGKILLed worker's job is re-run by another after its lease
expires; SIGTERM lets a job finish within the grace period and hands back the rest."""

from __future__ import annotations

import signal
from collections import Counter, defaultdict

import pytest
from clusterkit import CapSampler, Cluster, add_jobs, add_tenants, peak_overlap, statuses, wait_for
from sqlalchemy import Engine, text

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CAPS = {"one": 1, "two": 2, "five": 5}


def outputs_per_job(engine: Engine) -> Counter[str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT job_id FROM stored_objects WHERE kind = 'outputs'"))
        return Counter(str(row[0]) for row in rows)


def duplicated_usage(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        exists = conn.execute(text("SELECT to_regclass('usage_records')")).scalar()
        if exists is None:
            return []
        rows = conn.execute(
            text("SELECT job_id FROM usage_records GROUP BY job_id HAVING count(*) > 1")
        )
        return [str(row[0]) for row in rows]


def test_four_workers_three_tenants_caps_hold_and_each_job_runs_once(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    add_tenants(cluster_engine, CAPS)
    jobs = {tenant: add_jobs(cluster_engine, tenant, 100) for tenant in CAPS}
    with CapSampler(cluster_engine) as sampler:
        for number in range(4):
            cluster.start_worker(f"worker{number}", "--concurrency", "3")
        wait_for(lambda: statuses(cluster_engine) == {"succeeded": 300}, 120, "300 jobs done")
    # sampled from the database every 10 ms
    assert sampler.samples > 10
    for tenant, cap in CAPS.items():
        assert sampler.peaks[tenant] <= cap, (tenant, dict(sampler.peaks))
    assert max(sampler.peaks.values()) > 1  # the workers did run jobs side by side
    # the runners' own log: each job completed once, never more at once than the cap
    runs = cluster.runs()
    ends = Counter(job for event, job, *_ in runs if event == "end")
    all_ids = {str(job_id) for ids in jobs.values() for job_id in ids}
    assert set(ends) == all_ids
    assert set(ends.values()) == {1}
    spans: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for _event, job, tenant, _pid, stamp in runs:
        spans[tenant].setdefault(job, []).append(stamp)
    for tenant, cap in CAPS.items():
        intervals = [(times[0], times[-1]) for times in spans[tenant].values()]
        assert peak_overlap(intervals) <= cap, tenant
    assert len({pid for *_, pid, _ in runs}) == 4  # every process took part
    with cluster_engine.connect() as conn:
        attempts = set(conn.execute(text("SELECT attempts FROM jobs")).scalars())
    assert attempts == {1}
    assert outputs_per_job(cluster_engine) == Counter(dict.fromkeys(all_ids, 1))
    assert duplicated_usage(cluster_engine) == []


def test_sigkilled_worker_job_is_rerun_by_another_after_its_lease(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    add_tenants(cluster_engine, {"acme": 5})
    (long_job,) = add_jobs(cluster_engine, "acme", 1, seconds=1.5)
    doomed = cluster.start_worker("doomed", "--concurrency", "1")
    wait_for(lambda: any(event == "start" for event, *_ in cluster.runs()), 60, "the job started")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    with cluster_engine.connect() as conn:
        row = conn.execute(text("SELECT status, attempts FROM jobs")).one()
    assert tuple(row) == ("running", 1)  # left behind, lease still valid
    survivor = cluster.start_worker("survivor", "--concurrency", "1")
    wait_for(lambda: statuses(cluster_engine) == {"succeeded": 1}, 60, "the re-run to finish")
    starts = [pid for event, _job, _t, pid, _ in cluster.runs() if event == "start"]
    ends = [pid for event, _job, _t, pid, _ in cluster.runs() if event == "end"]
    assert starts == [doomed.pid, survivor.pid]
    assert ends == [survivor.pid]
    with cluster_engine.connect() as conn:
        attempts = conn.execute(text("SELECT attempts FROM jobs")).scalar_one()
    assert attempts == 2
    assert outputs_per_job(cluster_engine) == Counter({str(long_job): 1})
    assert duplicated_usage(cluster_engine) == []


def test_sigterm_finishes_within_grace_and_hands_back_the_rest(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    add_tenants(cluster_engine, {"acme": 5})
    (quick,) = add_jobs(cluster_engine, "acme", 1, seconds=1.0)
    (slow,) = add_jobs(cluster_engine, "acme", 1, seconds=60.0)
    worker = cluster.start_worker("worker", "--concurrency", "2", "--grace", "3")
    wait_for(lambda: sum(event == "start" for event, *_ in cluster.runs()) == 2, 60, "both running")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    with cluster_engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, status, attempts, lease_owner, lease_expires_at FROM jobs")
        )
        by_id = {row[0]: tuple(row[1:]) for row in rows}
        worker_row = conn.execute(text("SELECT status, stopped_at FROM workers")).one()
    assert by_id[quick][:2] == ("succeeded", 1)
    assert by_id[slow] == ("queued", 0, None, None)  # handed back, the attempt not counted
    assert worker_row[0] == "stopped"
    assert worker_row[1] is not None
