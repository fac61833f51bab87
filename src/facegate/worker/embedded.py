"""The embedded shape's workers: the in-process worker pool started by the app lifespan
(``SERVICES`` in facegate.api.app), woken by the submissions of the same process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from sqlalchemy import Engine

from facegate.jobs.runtime import tenant_store_for
from facegate.provenance.marker import marker_for
from facegate.queue.claim import JobClaimer, LockingClaimer
from facegate.queue.outcomes import meter_reaped
from facegate.queue.postgres import PostgresClaimer, ServedTenants
from facegate.queue.sql import SqlQueue
from facegate.settings import warmup_list
from facegate.state import AppState
from facegate.worker.children import worker_children_service
from facegate.worker.moderation import job_moderation
from facegate.worker.pool import WorkerConfig, WorkerPool
from facegate.worker.runner import EngineRunner
from facegate.worker.scratch import ScratchSpace


def served_claimer(engine: Engine, worker_tenants: str | None) -> JobClaimer:
    """The claim of the in-process workers: every tenant's jobs, or only those of
    ``worker_tenants`` (a tenant-bound ``serve``, e.g. a tenant's Knative service, must
    never run another tenant's job from the shared database)."""
    served = ServedTenants.parse(worker_tenants)
    if engine.dialect.name == "postgresql" and served.tenants is not None:
        return PostgresClaimer(engine, served)
    return LockingClaimer(engine, served.tenants)


@asynccontextmanager
async def workers_service(state: AppState) -> AsyncIterator[WorkerPool | None]:
    """The app's workers for its lifetime: child processes (``worker_processes``, serve's
    default: facegate.worker.children), else ``settings.workers`` threads of this process
    (none when 0)."""
    settings = state.settings
    if settings.workers == 0:
        yield None
        return
    if settings.worker_processes:
        async with worker_children_service(state):
            yield None
        return
    await anyio.to_thread.run_sync(state.face_engine.hub.warm_up, warmup_list(settings))
    config = WorkerConfig(
        workers=settings.workers,
        lease_seconds=settings.job_lease_seconds,
        poll_seconds=settings.job_poll_seconds,
        memory_bytes=settings.worker_memory_budget(),
        nice=settings.job_nice(0),  # this process's live streams win the CPU from jobs
    )
    # The embedded shape makes its signing identity on first start, as it makes its database.
    marker = marker_for(settings.provenance_path, create=True)
    # Woken by this process's submissions, which name the database by its settings URL.
    # A tenant-bound serve (TENANT_ID) claims, reaps and purges only its tenants' jobs and
    # storage, as its dispatcher sends only their webhooks.
    served = ServedTenants.parse(settings.worker_tenants).tenants
    queue = SqlQueue(
        state.engine,
        served_claimer(state.engine, settings.worker_tenants),
        on_reaped=meter_reaped(config.device),
        local_key=settings.database_url,
        reaped_tenants=served,
    )
    tenant_store = tenant_store_for(settings)
    scratch = ScratchSpace()
    pool = WorkerPool.on_database(
        state.engine,
        tenant_store,
        config,
        marker=marker,
        runner=EngineRunner(
            tenant_store,
            state.face_engine,
            scratch=scratch,
            moderation=job_moderation(settings.moderation_video_gap_seconds),
            memory_budget=config.memory_bytes,
            segment_seconds=settings.video_segment_seconds,
        ),
        queue=queue,
        scratch=scratch,
        tenants=served,
    )
    await anyio.to_thread.run_sync(pool.start)
    # The streams' core budget holds while these workers run jobs (facegate.stream_cpu).
    unwatch = state.streams.cpu.watch_jobs(pool.running_jobs)
    try:
        yield pool
    finally:
        unwatch()
        await anyio.to_thread.run_sync(pool.stop)
