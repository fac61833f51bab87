"""The embedded shape's workers as child processes of ``facegate serve``.

Threads beside the event loop share its interpreter lock and its CPU priority: a long video
in a worker thread once took the API's GET p99 from 17 to 122 ms, and a one-face image
queued behind it waited for the whole video (docs/scheduling.md). So ``serve`` starts its
workers as processes, each running the cluster worker's loop (facegate.worker.process) on
the same database:

- the **general** child: ``FACEGATE_WORKERS`` workers taking any job, at a lower CPU
  priority (``FACEGATE_WORKER_NICE``);
- the **short lane** child: ``FACEGATE_SHORT_LANE_WORKERS`` workers taking only jobs
  estimated at most ``FACEGATE_SHORT_LANE_SECONDS`` (facegate.jobs.cost), at
  ``FACEGATE_SHORT_LANE_NICE``, so a short job is claimed at once whatever runs elsewhere.

Children are started with multiprocessing's ``spawn`` (a fresh interpreter running
facegate's own worker entry with a fixed argument list: no shell, nothing from a request),
woken by the parent's submissions through an Event each (SQLite has no NOTIFY; on
PostgreSQL they LISTEN as cluster workers do), stopped with SIGTERM (they drain: jobs in
hand finish within the grace period, the rest go back to the queue) and stop by themselves
when the parent is gone. Webhooks stay with the parent's dispatcher.

A child that dies while ``serve`` runs (the kernel's OOM killer, a crash in native code) is
logged (``workers.child_died``, its exit code) and started again by a watcher thread, after
a second, and after twice as long each time it dies again within a minute of its start (at
most a minute): its jobs' leases run out and the reaper gives them back to the queue, as
for any lost worker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from typing import Any

import anyio.to_thread
import structlog
from sqlalchemy import Engine

from facegate.observability.nativelog import filter_native_logs
from facegate.provenance.marker import marker_for
from facegate.queue.claim import LockingClaimer
from facegate.queue.notify import listen_locally
from facegate.queue.outcomes import meter_reaped
from facegate.queue.postgres import ServedTenants
from facegate.queue.sql import SqlQueue
from facegate.settings import Settings
from facegate.state import AppState
from facegate.worker.process import WorkerOptions, make_queue, run_worker

log = structlog.get_logger("facegate.worker")

#: Seconds a stopping child gets beyond its own drain grace before it is killed.
KILL_AFTER_SECONDS = 10.0
#: Seconds before a dead child is started again: the first wait, and the longest.
RESTART_FIRST_SECONDS, RESTART_MAX_SECONDS = 1.0, 60.0
#: A child that lived this long before it died starts again after the first wait.
STEADY_SECONDS = 60.0


@dataclass(frozen=True)
class Lane:
    """One child process: how many workers, which jobs, at what CPU priority, within how
    much memory."""

    name: str
    workers: int
    nice: int
    max_seconds: float | None = None
    memory_bytes: int | None = None


def embedded_lanes(settings: Settings) -> list[Lane]:
    """The children of ``serve``: the general workers and the short-job lane (each only
    when it has workers), at their lane's nice, raised beside live streams
    (``Settings.job_nice``: serve's API process runs them). They share the machine's memory budget
    (``Settings.worker_memory_budget``) in proportion to their workers."""
    budget = settings.worker_memory_budget()
    workers = settings.workers + settings.short_lane_workers
    lanes = [
        Lane(
            "general",
            settings.workers,
            settings.job_nice(settings.worker_nice),
            memory_bytes=budget * settings.workers // max(1, workers),
        ),
        Lane(
            "short",
            settings.short_lane_workers,
            settings.job_nice(settings.short_lane_nice),
            settings.short_lane_seconds,
            memory_bytes=budget * settings.short_lane_workers // max(1, workers),
        ),
    ]
    return [lane for lane in lanes if lane.workers > 0]


def child_queue(engine: Engine, served: ServedTenants, device: str) -> SqlQueue:
    """A child's queue: the cluster's on PostgreSQL (LISTEN/NOTIFY, per-tenant locks), the
    serialised claim on SQLite, both limited to ``served`` (a tenant-bound serve)."""
    if engine.dialect.name == "postgresql":
        return make_queue(engine, served, device)
    return SqlQueue(
        engine,
        LockingClaimer(engine, served.tenants),
        on_reaped=meter_reaped(device),
        reaped_tenants=served.tenants,
    )


def child_main(
    settings: Settings, lane: Lane, wake: Any, parent_pid: int, busy: Any = None
) -> None:
    """The entry of one child process (module-level: spawn imports it by name)."""
    filter_native_logs(settings.native_logs)
    options = WorkerOptions(
        served=ServedTenants.parse(settings.worker_tenants),
        concurrency=lane.workers,
        grace_seconds=settings.worker_grace_seconds,
        heartbeat_seconds=settings.worker_heartbeat_seconds,
        runner=settings.worker_runner,
        max_seconds=lane.max_seconds,
        memory_bytes=lane.memory_bytes,
        nice=lane.nice,
        webhooks=False,
        wake=wake,
        parent_pid=parent_pid,
        busy=busy,
    )
    run_worker(settings, options, child_queue)


@dataclass
class Child:
    lane: Lane
    process: SpawnProcess
    wake: Any
    busy: Any  # its running jobs' count, written by the child (WorkerOptions.busy)
    started_at: float = field(default_factory=time.monotonic)
    restart_after: float = RESTART_FIRST_SECONDS  # seconds after its death
    died_at: float | None = None


class WorkerChildren:
    """The running children of one ``serve``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.context = multiprocessing.get_context("spawn")
        self.children: list[Child] = []

    def start(self) -> None:
        for lane in embedded_lanes(self.settings):
            self.children.append(self._spawn(lane))

    def _spawn(self, lane: Lane) -> Child:
        wake = self.context.Event()
        busy = self.context.RawValue("i", 0)
        process = self.context.Process(
            target=child_main,
            args=(self.settings, lane, wake, os.getpid(), busy),
            name=f"facegate-worker-{lane.name}",
            daemon=False,  # a daemonic process may not start the worker's own threads
        )
        process.start()
        log.info("workers.child_started", lane=lane.name, pid=process.pid, nice=lane.nice)
        return Child(lane, process, wake, busy)

    def revive(self) -> None:
        """Start again each child that died (see the module's docstring)."""
        now = time.monotonic()
        for index, child in enumerate(self.children):
            if child.process.is_alive():
                continue
            if child.died_at is None:
                child.died_at = now
                log.error(
                    "workers.child_died",
                    lane=child.lane.name,
                    pid=child.process.pid,
                    exitcode=child.process.exitcode,
                    restart_in=child.restart_after,
                )
            if now - child.died_at < child.restart_after:
                continue
            lived = child.died_at - child.started_at
            again = self._spawn(child.lane)
            if lived < STEADY_SECONDS:  # dying again soon: wait longer next time
                again.restart_after = min(child.restart_after * 2, RESTART_MAX_SECONDS)
            self.children[index] = again

    def wake(self) -> None:
        """A job was queued by this process: let every child look now."""
        for child in self.children:
            child.wake.set()

    def running_jobs(self) -> int:
        """The jobs the living children run now (as each reported it last, 0.1 s ago at
        most)."""
        return sum(int(child.busy.value) for child in self.children if child.process.is_alive())

    def stop(self) -> None:
        """SIGTERM to each child (it drains), then wait; kill what outlives its grace."""
        for child in self.children:
            if child.process.is_alive() and child.process.pid is not None:
                os.kill(child.process.pid, signal.SIGTERM)
        for child in self.children:
            child.process.join(self.settings.worker_grace_seconds + KILL_AFTER_SECONDS)
            if child.process.is_alive():
                log.warning("workers.child_killed", lane=child.lane.name, pid=child.process.pid)
                child.process.kill()
                child.process.join(5)
        self.children.clear()


@asynccontextmanager
async def worker_children_service(state: AppState) -> AsyncIterator[WorkerChildren]:
    """Start serve's worker children for the app's lifetime, woken by its submissions."""
    # The embedded shape makes its signing identity on first start (the children load it).
    marker_for(state.settings.provenance_path, create=True)
    children = WorkerChildren(state.settings)
    await anyio.to_thread.run_sync(children.start)
    stop_listening = listen_locally(state.settings.database_url, children.wake)
    # The streams' core budget holds while the children run jobs (facegate.stream_cpu).
    unwatch = state.streams.cpu.watch_jobs(children.running_jobs)
    stopping = threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(children, stopping), name="worker-children-watch", daemon=True
    )
    watcher.start()
    try:
        yield children
    finally:
        unwatch()
        stop_listening()
        stopping.set()
        await anyio.to_thread.run_sync(watcher.join)
        await anyio.to_thread.run_sync(children.stop)


def _watch(children: WorkerChildren, stopping: threading.Event) -> None:
    """Every second until ``stopping``: start again the children that died."""
    while not stopping.wait(1.0):
        try:
            children.revive()
        except Exception:  # a failed start is logged and tried again next second
            log.exception("workers.child_restart_failed")
