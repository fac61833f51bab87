"""Wiring of the jobs package into the running app: the TenantStore chosen by settings and
the write sessions of the submission (the in-process workers are ``facegate.worker.embedded``)."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.resilience import BreakerConfig
from facegate.settings import Settings
from facegate.state import AppState
from facegate.storage.factory import shared_object_store
from facegate.storage.tenant import TenantStore


def tenant_store_for(settings: Settings) -> TenantStore:
    """The TenantStore of ``settings``: one per storage URL per process (a ``memory://``
    store is then shared), its S3 breaker configured by ``FACEGATE_BREAKER_*``."""
    return _tenant_store(settings.storage_url, BreakerConfig.from_settings(settings))


@lru_cache(maxsize=16)
def _tenant_store(storage_url: str, breaker: BreakerConfig) -> TenantStore:
    return TenantStore(shared_object_store(storage_url, breaker))


def write_sessions(state: AppState) -> sessionmaker[Session]:
    """Sessions whose SQLite transactions take the write lock at BEGIN: the submission's
    checks (queue cap, quota) and its inserts then see no concurrent writer in between."""
    return _write_sessions(state.engine)


@lru_cache(maxsize=16)
def _write_sessions(engine: object) -> sessionmaker[Session]:
    assert isinstance(engine, Engine)
    return sessionmaker(
        bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
    )
