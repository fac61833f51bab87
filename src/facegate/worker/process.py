"""``facegate worker``: one worker process of the cluster shape.

It claims jobs with the cross-process fair claim (PostgreSQL), wakes on LISTEN/NOTIFY,
beats its heartbeat, reaps expired leases, answers probes on its own port, and on SIGTERM
stops claiming, lets the jobs in hand finish within a grace period and hands back the rest
(status queued, lease cleared, the attempt not counted).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import structlog
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from facegate.database import create_engine_from_url, prepare_schema
from facegate.jobs.runtime import tenant_store_for
from facegate.models.requests import installation_engine
from facegate.observability.logging import configure_logging
from facegate.provenance.marker import marker_for
from facegate.queue.heartbeat import Heartbeat
from facegate.queue.outcomes import meter_reaped
from facegate.queue.port import WorkerInfo
from facegate.queue.postgres import ServedTenants
from facegate.queue.sql import PostgresQueue, SqlQueue
from facegate.settings import Settings, warmup_list
from facegate.storage.tenant import TenantStore
from facegate.webhooks.dispatcher import DeliveryConfig, WebhookDispatcher
from facegate.worker.moderation import job_moderation
from facegate.worker.output import JobRunner
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.priority import lower_priority
from facegate.worker.probes import ProbeServer
from facegate.worker.runner import EngineRunner
from facegate.worker.scratch import ScratchSpace

log = structlog.get_logger("facegate.worker")


@dataclass(frozen=True)
class WorkerOptions:
    """What ``facegate worker`` was asked to do (flags or FACEGATE_WORKER_* variables)."""

    served: ServedTenants
    concurrency: int = 2
    grace_seconds: float = 30.0
    heartbeat_seconds: float = 5.0
    uses_device: bool = False
    runner: str | None = None  # "module:factory" of a JobRunner; default: the engine
    probe_port: int | None = None
    # The short-job lane: only jobs estimated at most this many seconds (None: any job).
    max_seconds: float | None = None
    # Nice increment taken at start, before any thread exists (all of them inherit it).
    nice: int = 0
    # Whether this process sends webhooks (serve's children leave them to the API process).
    webhooks: bool = True
    # serve's children: a multiprocessing Event the parent sets when it queued a job (the
    # SQLite shape has no NOTIFY), and the parent's pid (a child whose parent is gone stops).
    wake: Any = None
    parent_pid: int | None = None
    memory_bytes: int | None = None  # the memory budget (Settings.worker_memory_budget)
    # serve's children: a shared integer this process keeps at its running jobs' count
    # (every BUSY_EVERY_SECONDS), so the parent's live streams know when jobs run beside
    # them (facegate.stream_cpu: their core budget holds only then).
    busy: Any = None


def make_queue(engine: Engine, served: ServedTenants, device: str) -> SqlQueue:
    """The cluster queue on PostgreSQL; on SQLite the serialised claim (one machine)."""
    if engine.dialect.name == "postgresql":
        return PostgresQueue(engine, served, on_reaped=meter_reaped(device))
    if served.tenants is not None:
        raise ValueError("dedicated workers (--tenants) need PostgreSQL")
    return SqlQueue(engine, on_reaped=meter_reaped(device))


def load_runner(
    target: str | None,
    tenant_store: TenantStore,
    scratch: ScratchSpace,
    settings: Settings,
    memory_bytes: int | None = None,
) -> JobRunner:
    """The engine runner (this process's engine runtime, its warm-up list loaded now), or
    ``module:factory`` called with the TenantStore (a plug-in runner: another engine build,
    or the cheap runner the queue's acceptance tests use)."""
    if target is None:
        engine = installation_engine(settings)
        engine.hub.warm_up(warmup_list(settings))
        return EngineRunner(
            tenant_store,
            engine,
            scratch=scratch,
            moderation=job_moderation(settings.moderation_video_gap_seconds),
            memory_budget=memory_bytes,
            segment_seconds=settings.video_segment_seconds,
        )
    module_name, _, attribute = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    runner: JobRunner = factory(tenant_store)
    return runner


class ClusterWorkerPool(WorkerPool):
    """WorkerPool with a graceful drain (the queue brings the cross-worker reaper)."""

    def threads_alive(self) -> bool:
        return all(thread.is_alive() for thread in self._threads)

    def drain(self, grace_seconds: float) -> None:
        """Stop claiming; renew the jobs in hand while they finish; after ``grace_seconds``
        cancel the rest, which the workers hand back to the queue."""
        self._stop.set()
        self.wake()
        deadline = time.monotonic() + grace_seconds
        renew_every = max(0.05, self.config.lease_seconds / 3)
        next_renew = time.monotonic() + renew_every
        while self.running_jobs() and time.monotonic() < deadline:
            if time.monotonic() >= next_renew:
                next_renew += renew_every
                try:
                    self.renew_leases()
                except Exception:
                    log.warning("worker.renew_failed_while_draining")
            time.sleep(0.05)
        self.stop(timeout=5.0)  # cancels what is left: released, not failed
        with self._lock:
            stuck = [flight.claim for flight in self._in_flight.values()]
        for claim in stuck:  # a runner that ignored the cancel: hand its job back anyway
            self.queue.release(claim)
            log.warning("job.released_on_exit", tenant_id=claim.tenant_id, job_id=str(claim.job_id))


def _database_ready(engine: Engine) -> tuple[bool, str]:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        return False, f"database unreachable ({type(exc).__name__})"
    return True, "ok"


#: How long a starting worker waits for an unreachable database (a restart, a failover, a
#: pod that came up first) before giving up and letting its supervisor restart it.
START_WAIT_SECONDS = 120.0


def prepare_schema_when_reachable(
    url: str, mode: str = "migrate", wait_seconds: float = START_WAIT_SECONDS
) -> None:
    """``prepare_schema(url, mode)``, retried while the database cannot be reached."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            prepare_schema(url, mode)
            return
        except OperationalError as exc:
            if time.monotonic() >= deadline:
                raise
            log.warning("worker.waiting_for_database", error=type(exc).__name__)
            time.sleep(1.0)


def follow_parent(options: WorkerOptions, pool: WorkerPool, stopping: threading.Event) -> None:
    """serve's child: wake the pool when the parent queued a job; stop when it is gone."""
    while not stopping.is_set():
        if options.parent_pid is not None and os.getppid() != options.parent_pid:
            log.warning("worker.parent_gone", parent=options.parent_pid)
            stopping.set()
            return
        if options.wake is None:
            stopping.wait(0.5)
        elif options.wake.wait(0.5):
            options.wake.clear()  # before the claim the wake causes: a later set is kept
            pool.wake()


#: how often a serve child writes its running jobs' count to ``WorkerOptions.busy``
BUSY_EVERY_SECONDS = 0.1


def report_busy(busy: Any, pool: WorkerPool, stopping: threading.Event) -> None:
    """serve's child: keep ``busy`` (a shared integer) at the pool's running jobs."""
    while not stopping.wait(BUSY_EVERY_SECONDS):
        busy.value = pool.running_jobs()
    busy.value = 0


QueueFactory = Callable[[Engine, ServedTenants, str], SqlQueue]


def run_worker(
    settings: Settings, options: WorkerOptions, queue_factory: QueueFactory | None = None
) -> None:
    """Run one worker process until SIGTERM/SIGINT, then drain and exit. ``queue_factory``:
    the queue on the engine (default :func:`make_queue`, the cluster's)."""
    lower_priority(options.nice)
    # The api configures logging in create_app; a worker has no app, so here: the same
    # format (FACEGATE_LOG_FORMAT, JSON by default) and masking as the api's lines.
    configure_logging(settings.log_level, fmt=settings.log_format, secrets=settings.secret_values())
    prepare_schema_when_reachable(settings.database_url, settings.schema_on_start)
    # No pre-ping round trip per checkout: a connection the database dropped fails one
    # statement, SQLAlchemy then invalidates the pool and the loops simply go on.
    engine = create_engine_from_url(
        settings.database_url, pool_size=options.concurrency + 4, pool_pre_ping=False
    )
    tenant_store = tenant_store_for(settings)
    config = WorkerConfig(
        workers=options.concurrency,
        lease_seconds=settings.job_lease_seconds,
        poll_seconds=settings.job_poll_seconds,
        uses_device=options.uses_device,
        max_seconds=options.max_seconds,
        memory_bytes=options.memory_bytes,
    )
    queue = (queue_factory or make_queue)(engine, options.served, config.device)
    scratch = ScratchSpace()
    pool = ClusterWorkerPool.on_database(
        engine,
        tenant_store,
        config,
        # A cluster worker signs with the installation's mounted Secret; without it, it
        # does not start (ProvenanceUnavailable names the folder).
        marker=marker_for(settings.provenance_path),
        runner=load_runner(options.runner, tenant_store, scratch, settings, options.memory_bytes),
        queue=queue,
        scratch=scratch,
        tenants=options.served.tenants,  # a dedicated worker purges only its tenants
    )
    served = options.served.tenants
    worker = WorkerInfo(
        id=pool.name,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        tenants=sorted(served) if served is not None else None,
        concurrency=options.concurrency,
        memory_budget_bytes=options.memory_bytes,
    )
    heartbeat = Heartbeat(
        queue, worker, running_jobs=pool.running_jobs, every_seconds=options.heartbeat_seconds
    )
    # Webhooks go out from the shared workers only: a tenant's dedicated worker (its own
    # namespace and network) never sends another tenant's messages.
    webhooks = (
        WebhookDispatcher(engine, DeliveryConfig.from_settings(settings))
        if served is None and options.webhooks
        else None
    )
    stopping = threading.Event()

    def ready() -> tuple[bool, str]:
        if stopping.is_set():
            return False, "draining"
        return _database_ready(engine)

    def alive() -> tuple[bool, str]:
        return (pool.threads_alive() or stopping.is_set()), "workers"

    probes = (
        ProbeServer(settings.host, options.probe_port, alive=alive, ready=ready)
        if options.probe_port is not None
        else None
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("worker.stopping", signal=signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    heartbeat.start()
    pool.start()
    # Everything this process writes to the temporary directory (a plug-in runner's files,
    # probes) goes into its scratch folder, reclaimed if the process is killed.
    scratch.use_for_process()
    if webhooks is not None:
        webhooks.start()
    if probes is not None:
        probes.start()
    if options.wake is not None or options.parent_pid is not None:
        threading.Thread(
            target=follow_parent, args=(options, pool, stopping), name="follow-parent", daemon=True
        ).start()
    if options.busy is not None:
        threading.Thread(
            target=report_busy, args=(options.busy, pool, stopping), name="report-busy", daemon=True
        ).start()
    log.info(
        "worker.started",
        worker=pool.name,
        tenants=options.served.describe(),
        concurrency=options.concurrency,
        lane="short" if options.max_seconds is not None else "any",
        nice=options.nice,
        probes=probes.port if probes is not None else None,
    )
    try:
        while not stopping.wait(0.5):
            pass
        heartbeat.status = "draining"
        pool.drain(options.grace_seconds)
    finally:
        if webhooks is not None:
            webhooks.stop()
        heartbeat.stop()
        if probes is not None:
            probes.stop()
        engine.dispose()
        log.info("worker.stopped", worker=pool.name)
