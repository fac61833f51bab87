"""The streams' core budget (``FACEGATE_STREAM_CORES``, facegate.stream_cpu): a start the
budget cannot give ``stream_min_cores`` is 503 naming it, jobs still run beside a stream,
and the engine is paced so the process's CPU stays within the budget."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.jobs.test_video_jobs import TERMINAL, create_clip, submit_video
from tests.jobs.test_video_jobs import wait_for as wait_for_job
from tests.streams.streamkit import open_stream, wait_for

from facegate.machine import machine_cores
from facegate.settings import Settings
from facegate.stream_cpu import CorePacer, StreamCpu
from facegate.worker.embedded import workers_service
from facegate.worker.process import report_busy

TWO_STREAMS = {"max_concurrent_streams": 2, "requests_per_minute": 1_000_000}


async def test_a_budget_of_one_stream_refuses_the_second_and_jobs_still_run(
    make_client: Any, tmp_path: Path
) -> None:
    clip = create_clip(tmp_path / "beside.mp4", seconds=0.4, width=320, height=240, fps=10)
    async with make_client(
        services=[workers_service], workers=1, stream_cores=1.0, stream_min_cores=1.0
    ) as h:
        h.create_tenant("live", **TWO_STREAMS)
        headers = h.headers("live", ["director"])
        first, started = await open_stream(h.client, headers)
        assert started.status_code == 201, started.text
        stream_id = started.json()["id"]
        try:
            await wait_for(lambda: len(first.received) >= 5, 60)
            # The tenant's cap (2) has room; the installation's budget for streams has not.
            second, refused = await open_stream(h.client, headers)
            await second.close()
            assert refused.status_code == 503, refused.text
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["limit"] == "stream_cores"
            assert refused.json()["limit_value"] == 1.0
            assert "stream_cores" in refused.json()["detail"]
            assert refused.headers["retry-after"] == "10"
            assert len(h.state.streams.live()) == 1  # nothing left running
            # A job runs beside the stream.
            submitted = await submit_video(h.client, headers, clip)
            assert submitted.status_code == 202, submitted.text
            job = await wait_for_job(
                h.client, headers, submitted.json()["id"], lambda b: b["status"] in TERMINAL
            )
            assert job["status"] == "succeeded", job
            shown = (await h.client.get(f"/v1/streams/{stream_id}", headers=headers)).json()
            assert shown["state"] == "live"
            assert "paced" in shown["stages_ms"]
        finally:
            await h.client.delete(f"/v1/streams/{stream_id}", headers=headers)
            await first.close()
        # Once it ended, the budget has room again.
        again, answer = await open_stream(h.client, headers)
        try:
            assert answer.status_code == 201, answer.text
        finally:
            await h.client.delete(f"/v1/streams/{answer.json()['id']}", headers=headers)
            await again.close()


async def test_the_engine_is_paced_to_the_process_budget_only_while_jobs_run(
    make_client: Any,
) -> None:
    """A budget below what the stream takes (this process is the server and its client,
    whose own VP8 work is not paced). Alone, the stream is never paced; once job work runs
    on the node (a probe standing in for the workers' running jobs), the engine waits
    before frames within a second, and frames still come."""
    jobs = {"running": 0}
    async with make_client(stream_cores=0.15, stream_min_cores=0.1) as h:
        h.state.streams.cpu.watch_jobs(lambda: jobs["running"])
        h.create_tenant("live", **TWO_STREAMS)
        headers = h.headers("live", ["director"])
        live, started = await open_stream(h.client, headers)
        assert started.status_code == 201, started.text
        stream_id = started.json()["id"]
        record = h.state.streams.get("live", uuid.UUID(stream_id))
        try:
            await wait_for(lambda: len(live.received) >= 5, 60)
            await asyncio.sleep(3)
            alone = list(record.stats.stages["paced"])
            jobs["running"] = 1  # a job starts beside the stream
            before = len(live.received)
            await asyncio.sleep(1.0)
            first_second = len(record.stats.stages["paced"])
            await asyncio.sleep(4)
            got = len(live.received) - before
            paced = list(record.stats.stages["paced"])
            shown = (await h.client.get(f"/v1/streams/{stream_id}", headers=headers)).json()
        finally:
            await h.client.delete(f"/v1/streams/{stream_id}", headers=headers)
            await live.close()
    assert alone
    assert max(alone) == 0, alone  # no job: all the cores it can use
    assert first_second >= 1
    assert shown["stages_ms"]["paced"]["p95"] > 0, shown["stages_ms"]
    assert sum(1 for seconds in paced if seconds > 0) >= 3, paced
    assert got >= 3  # paced, not stopped: at least 2 frames a second are taken
    assert shown["frames_dropped"] > 0  # the camera's frames that came meanwhile


async def test_the_budget_holds_only_while_a_probe_reports_jobs() -> None:
    now = {"wall": 100.0, "cpu": 0.0}
    budget = StreamCpu(0.5, window=0.5, cpu=lambda: now["cpu"])
    budget.pacer.clock = lambda: now["wall"]
    jobs = {"running": 0}
    unwatch = budget.watch_jobs(lambda: jobs["running"])
    for _ in range(10):  # 2 cores' worth of CPU, no job: never held
        now["wall"] += 0.05
        now["cpu"] += 0.1
        assert await budget.pace() == 0.0
    assert not budget.jobs_running()
    jobs["running"] = 2
    assert budget.jobs_running()
    assert budget.pacer.delay() > 0  # the window was kept current while no job ran
    unwatch()
    assert not budget.jobs_running()

    def broken() -> int:
        raise RuntimeError("gone")

    budget.watch_jobs(broken)
    assert budget.jobs_running()  # a probe that fails holds the budget


def test_a_serve_child_reports_its_running_jobs() -> None:
    class Pool:
        jobs = 3

        def running_jobs(self) -> int:
            return self.jobs

    busy = multiprocessing.get_context("spawn").RawValue("i", 0)
    stopping = threading.Event()
    pool = Pool()
    reporter = threading.Thread(target=report_busy, args=(busy, pool, stopping))
    reporter.start()
    try:
        deadline = time.monotonic() + 2
        while busy.value != 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert busy.value == 3
        pool.jobs = 0
        time.sleep(0.3)
        assert busy.value == 0
        pool.jobs = 1
        time.sleep(0.3)
        assert busy.value == 1
    finally:
        stopping.set()
        reporter.join()
    assert busy.value == 0


@pytest.mark.parametrize(("cores", "expected"), [(0.75, 0.75), (4.0, 2.0)])
def test_the_pacer_keeps_a_greedy_worker_within_its_cores(cores: float, expected: float) -> None:
    """A worker that would take two cores, paced to 0.75 of one: its CPU over the run is
    the budget's; under a budget above its need it is never held."""
    now = {"wall": 0.0, "cpu": 0.0}
    pacer = CorePacer(cores, window=0.5, clock=lambda: now["wall"], cpu=lambda: now["cpu"])
    waited = 0.0
    while now["wall"] < 20.0:
        wait = pacer.delay()
        if wait > 0:
            now["wall"] += min(wait, 0.1)
            waited += min(wait, 0.1)
        else:  # one frame: 20 ms of wall, both cores busy
            now["wall"] += 0.02
            now["cpu"] += 0.04
    # within one frame's CPU a window (the frame that crossed the budget)
    assert abs(now["cpu"] / now["wall"] - expected) < 0.1 * expected, now
    assert (waited > 0) == (cores < 2.0)


def test_the_budget_defaults_leave_jobs_a_core() -> None:
    cores = machine_cores()
    embedded = Settings(_env_file=None, workers=2)  # type: ignore[call-arg]
    assert embedded.stream_core_budget() == max(0.5, cores - 1)
    api_only = Settings(_env_file=None, workers=0)  # type: ignore[call-arg]
    assert api_only.stream_core_budget() == cores
    set_ = Settings(_env_file=None, workers=2, stream_cores=1.5)  # type: ignore[call-arg]
    assert set_.stream_core_budget() == 1.5


def test_the_machine_cores_are_the_lower_of_the_cpus_and_the_container_limit(
    tmp_path: Path,
) -> None:
    v2 = tmp_path / "cpu.max"
    quota, period = tmp_path / "cfs_quota_us", tmp_path / "cfs_period_us"
    cpus = machine_cores(v2, (quota, period))  # no cgroup files: the CPUs it may run on
    assert cpus >= 1
    quota.write_text("-1\n")
    period.write_text("100000\n")
    assert machine_cores(v2, (quota, period)) == cpus  # v1, no quota
    quota.write_text("50000\n")
    assert machine_cores(v2, (quota, period)) == min(cpus, 0.5)
    v2.write_text("max 100000\n")
    assert machine_cores(v2, (quota, period)) == cpus  # v2 wins, no limit
    v2.write_text("150000 100000\n")
    assert machine_cores(v2, (quota, period)) == min(cpus, 1.5)
