"""A stream's engine work in a child process (facegate.streams.engines): the swapped frames
come from the child (its CPU counted in the streams' budget), the child is reused by the
next stream, and a child that dies ends its stream (``failed``, ``EngineChildLost``) with
the client told and usage exact; nothing is left in shared memory."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.conftest import make_settings
from tests.streams.streamkit import LIVE_POLICY, open_stream, wait_for
from tests.streams.test_stream_endings import ended_message

from facegate.database import session_scope
from facegate.settings import Settings
from facegate.stream_cpu import StreamCpu
from facegate.streams.engines import EngineChild, StreamEngines
from facegate.streams.runtime import streams_service
from facegate.usage.tables import UsageRecord

SHM = Path("/dev/shm")


def buffers() -> set[str]:
    return {p.name for p in SHM.iterdir()} if SHM.is_dir() else set()


async def test_the_engine_child_swaps_is_reused_and_its_death_ends_the_stream(
    make_client: Any,
) -> None:
    before = buffers()
    async with make_client(stream_engine_process=True) as h:
        h.create_tenant("live", **LIVE_POLICY)
        headers = h.headers("live", ["director"])
        first, response = await open_stream(h.client, headers)
        assert response.status_code == 201, response.text
        first_id = response.json()["id"]
        shown = h.state.streams.get("live", uuid.UUID(first_id))
        # swapped in this process's thread while the child loads the engine, then by it
        await wait_for(lambda: len(first.received) >= 1, 60)
        await wait_for(lambda: "handoff" in shown.stats.stages, 90)  # the child's stage
        count = shown.stats.frames_out
        await wait_for(lambda: shown.stats.frames_out >= count + 5, 30)
        engines = h.state.stream_engines
        assert engines is not None
        assert len(engines.busy) == 1
        child = engines.busy[0]
        assert child.pid != os.getpid()
        assert child.process.is_alive()
        # its CPU counts in the streams' budget
        assert engines.cpu_seconds() > 0
        await h.client.delete(f"/v1/streams/{first_id}", headers=headers)
        await first.close()
        await wait_for(lambda: child in engines.idle, 30)

        # the next stream takes the same child (its models loaded)
        second, response = await open_stream(h.client, headers)
        assert response.status_code == 201, response.text
        stream_id = uuid.UUID(response.json()["id"])
        record = h.state.streams.get("live", stream_id)
        await wait_for(lambda: "handoff" in record.stats.stages, 30)  # at once: it was idle
        await wait_for(lambda: len(second.received) >= 5, 60)
        assert child in engines.busy

        os.kill(child.pid, signal.SIGKILL)  # killed (the OOM killer, a crash in native code)
        await wait_for(lambda: record.state == "ended" and h.state.streams.live() == [], 15)
        await asyncio.sleep(0.3)  # the data channel's last message
        await second.close()
        assert record.end_reason == "failed"
        assert record.end_detail == "EngineChildLost"
        assert ended_message(second.messages)["reason"] == "failed"
        with session_scope(h.state.session_factory) as session:
            usage = session.scalars(
                select(UsageRecord).where(UsageRecord.job_id == stream_id)
            ).one()
            assert usage.duration_seconds == pytest.approx(record.seconds, abs=0.01)
            assert usage.frames == record.stats.frames_out
        assert child not in engines.idle  # a dead child is never handed out again
        assert engines.cpu_seconds() > 0

        # the next stream gets a child that lives
        third, response = await open_stream(h.client, headers)
        assert response.status_code == 201, response.text
        shown = h.state.streams.get("live", uuid.UUID(response.json()["id"]))
        await wait_for(lambda: len(third.received) >= 3, 90)
        await wait_for(lambda: "handoff" in shown.stats.stages, 90)  # a new child took over
        await h.client.delete(f"/v1/streams/{response.json()['id']}", headers=headers)
        await third.close()
    assert engines.closed
    assert not engines.idle
    assert not engines.busy
    assert not child.process.is_alive()
    await wait_for(lambda: buffers() <= before, 10)  # every stream's buffers unlinked


def test_the_budget_counts_more_cpu_than_the_process_own() -> None:
    now = {"wall": 0.0, "own": 0.0, "child": 0.0}
    budget = StreamCpu(1.0, window=0.5, cpu=lambda: now["own"])
    budget.pacer.clock = lambda: now["wall"]
    budget.watch_jobs(lambda: 1)
    budget.count_cpu(lambda: now["child"])
    for _ in range(10):  # the process itself at 0.2 core, its engine child at 1.5
        now["wall"] += 0.05
        now["own"] += 0.01
        now["child"] += 0.075
        budget.pacer.delay()
    assert budget.pacer.delay() > 0  # over 1 core with the child's CPU counted


class _Exited:
    """A child process that has already exited (what ``EngineChild.stop`` asks of one)."""

    def join(self, timeout: float | None = None) -> None:
        return None

    def is_alive(self) -> bool:
        return False

    def kill(self) -> None:
        raise AssertionError("an exited child is not killed")


def test_a_child_stopped_from_two_threads_at_once_is_stopped_once() -> None:
    """The app's shutdown stops the children still loading while the thread that spawned
    one stops it too when its start fails: the pipe was closed twice at once (EBADF out of
    the shutdown, seen in the suite). Its close is slowed here so the two always overlap."""
    parent_end, child_end = multiprocessing.Pipe()
    child_end.close()
    real_close = parent_end._close  # type: ignore[attr-defined]
    closes: list[int] = []

    def slow_close() -> None:
        closes.append(1)
        time.sleep(0.2)
        real_close()

    parent_end._close = slow_close  # type: ignore[attr-defined]
    child = EngineChild(_Exited(), parent_end, 0)  # type: ignore[arg-type]
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            child.stop()
        except BaseException as exc:  # the test collects what escapes
            errors.append(exc)

    threads = [threading.Thread(target=stop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert closes == [1]
    assert parent_end.closed


class _Alive:
    """A child process that is running (a gated spawn's stand-in)."""

    def is_alive(self) -> bool:
        return True


class GatedEngines(StreamEngines):
    """Children "load" until ``gate`` is set; ``spawned`` counts them."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.gate = threading.Event()
        self.spawned = 0

    def _spawn(self) -> EngineChild:
        self.gate.wait(30)
        self.spawned += 1
        parent_end, child_end = multiprocessing.Pipe()
        child_end.close()
        child = EngineChild(_Alive(), parent_end, 0)  # type: ignore[arg-type]
        with self.lock:
            self.busy.append(child)
        return child


def test_a_stream_waits_for_the_warming_child_instead_of_loading_a_second(
    tmp_path: Path,
) -> None:
    engines = GatedEngines(make_settings(tmp_path))
    warming = threading.Thread(target=engines.warm_up, args=(1,))
    warming.start()
    deadline = time.monotonic() + 10
    while engines.warming != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engines.warming == 1
    taken: list[EngineChild] = []
    stream = threading.Thread(target=lambda: taken.append(engines.acquire()))
    stream.start()
    time.sleep(0.2)
    assert taken == []  # waiting for the warming child, not spawning its own
    engines.gate.set()
    stream.join(10)
    warming.join(10)
    assert engines.spawned == 1
    assert taken
    assert engines.busy == taken
    assert engines.idle == []
    # a stream with neither an idle nor a warming child starts one
    assert engines.acquire() is not taken[0]
    assert engines.spawned == 2


async def test_the_first_stream_takes_the_child_warmed_at_start_up(make_client: Any) -> None:
    async with make_client(
        services=[streams_service], stream_engine_process=True, stream_engines_warm=1
    ) as h:
        engines = h.state.stream_engines
        assert engines is not None  # made at start-up, before any stream
        await wait_for(lambda: len(engines.idle) == 1, 90)  # loaded, idle
        (warm,) = engines.idle
        h.create_tenant("live", **LIVE_POLICY)
        headers = h.headers("live", ["director"])
        client, response = await open_stream(h.client, headers)
        assert response.status_code == 201, response.text
        await wait_for(lambda: len(client.received) >= 3, 60)
        assert engines.busy == [warm]  # the stream runs in it: no second engine loaded
        assert engines.starting == []
        assert engines.idle == []
        await h.client.delete(f"/v1/streams/{response.json()['id']}", headers=headers)
        await client.close()
