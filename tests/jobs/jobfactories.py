"""Plain factories for queue tests: a migrated database (SQLite, or PostgreSQL when asked),
tenants with policies, and queued job rows."""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from facegate.database import create_engine_from_url, create_session_factory, migrate
from facegate.db import utcnow
from facegate.jobs.models import Job
from facegate.tenancy.models import Policy, Tenant

POSTGRES_HINT = (
    "set FACEGATE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test (or CI=true) "
    "to run the queue tests on PostgreSQL"
)


# id(engine) -> the private PostgreSQL schema made for it
_SCHEMAS: dict[int, str] = {}


def postgres_url() -> str | None:
    url = os.environ.get("FACEGATE_TEST_POSTGRES_URL")
    if url is None and os.environ.get("CI") == "true":
        url = "postgresql://postgres@127.0.0.1:5432/test"
    return url


def create_database(backend: str, tmp_path: Path) -> Engine:
    """A freshly migrated database; PostgreSQL gets a private schema per test."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/jobs.db"
        migrate(url)
        return create_engine_from_url(url)
    base = postgres_url()
    if base is None:
        pytest.skip(POSTGRES_HINT)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine_from_url(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    url = base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"
    migrate(url)
    engine = create_engine_from_url(url)
    _SCHEMAS[id(engine)] = schema
    return engine


def drop_database(engine: Engine) -> None:
    """Dispose the engine; drop the private PostgreSQL schema a test made."""
    schema = _SCHEMAS.pop(id(engine), None)
    engine.dispose()
    base = postgres_url()
    if schema and base:
        admin = create_engine_from_url(base)
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def sessions_of(engine: Engine) -> sessionmaker[Session]:
    return create_session_factory(engine)


def create_tenant(session: Session, tenant_id: str, **policy: object) -> Tenant:
    tenant = Tenant(id=tenant_id, name=tenant_id)
    tenant.policy = Policy(**policy)
    session.add(tenant)
    session.flush()
    return tenant


def create_job(
    session: Session,
    tenant_id: str,
    *,
    priority: int = 0,
    created_at: datetime | None = None,
    status: str = "queued",
    **fields: object,
) -> Job:
    job = Job(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        status=status,
        kind="image",
        spec={"processors": ["face_swapper"]},
        inputs=["source-0", "target"],
        priority=priority,
        created_at=created_at or utcnow(),
        **fields,
    )
    session.add(job)
    session.flush()
    return job


def seconds_ago(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)
