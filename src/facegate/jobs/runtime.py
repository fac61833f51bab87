"""Wiring of the jobs package into the running app: the TenantStore chosen by settings and
the write sessions of the submission (the in-process workers are ``facegate.worker.embedded``)."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.state import AppState
from facegate.storage.factory import shared_object_store
from facegate.storage.tenant import TenantStore


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
    assert isinstance(engine, Engine)
    return sessionmaker(
        bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
    )
