"""Wiring of the jobs package into the running app: the TenantStore chosen by settings and
the in-process worker pool started by the app lifespan (``SERVICES`` in facegate.api.app)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache

import anyio.to_thread
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.api.state import AppState
from facegate.jobs.claim import JobClaimer, LockingClaimer
from facegate.jobs.claim_postgres import PostgresClaimer, ServedTenants
from facegate.jobs.worker import WorkerConfig, WorkerPool
from facegate.models.requests import use_installation_models
from facegate.provenance.marker import marker_for
from facegate.storage.factory import shared_object_store
from facegate.storage.tenant import TenantStore

# Running pools by database URL, so a submission can wake an idle worker at once.
_POOLS: dict[str, WorkerPool] = {}


@lru_cache(maxsize=16)
def tenant_store_for(storage_url: str) -> TenantStore:
    """One TenantStore per storage URL per process (a ``memory://`` store is then shared)."""
    return TenantStore(shared_object_store(storage_url))


def write_sessions(state: AppState) -> sessionmaker[Session]:
    """Sessions whose SQLite transactions take the write lock at BEGIN: the submission's
    checks (queue cap, quota) and its inserts then see no concurrent writer in between."""
    return _write_sessions(state.engine)


@lru_cache(maxsize=16)
def _write_sessions(engine: object) -> sessionmaker[Session]:
    from sqlalchemy import Engine

    assert isinstance(engine, Engine)
    return sessionmaker(
        bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
    )


def wake_workers(state: AppState) -> None:
    pool = _POOLS.get(state.settings.database_url)
    if pool is not None:
        pool.wake()


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
    """Start ``settings.workers`` worker threads for the app's lifetime (none when 0)."""
    settings = state.settings
    if settings.workers == 0:
        yield None
        return
    use_installation_models(settings)
    config = WorkerConfig(
        workers=settings.workers,
        lease_seconds=settings.job_lease_seconds,
        poll_seconds=settings.job_poll_seconds,
    )
    # The embedded shape makes its signing identity on first start, as it makes its database.
    marker = marker_for(settings.provenance_path, create=True)
    pool = WorkerPool(
        state.engine,
        tenant_store_for(settings.storage_url),
        config,
        claimer=served_claimer(state.engine, settings.worker_tenants),
        marker=marker,
    )
    await anyio.to_thread.run_sync(pool.start)
    _POOLS[settings.database_url] = pool
    try:
        yield pool
    finally:
        _POOLS.pop(settings.database_url, None)
        await anyio.to_thread.run_sync(pool.stop)
