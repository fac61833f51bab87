"""Plain factories for storage tests: a migrated SQLite database and a tenant row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from facegate.database import create_engine_from_url, create_session_factory, migrate
from facegate.storage.s3 import S3Store
from facegate.tenancy.tables import Policy, Tenant

# make_s3_store(**S3Options fields) -> S3Store (the fixture in conftest.py)
S3Factory = Callable[..., S3Store]


def create_database(tmp_path: Path) -> sessionmaker[Session]:
    url = f"sqlite:///{tmp_path}/storage.db"
    migrate(url)
    return create_session_factory(create_engine_from_url(url))


def create_tenant(session: Session, tenant_id: str, **policy: object) -> Tenant:
    tenant = Tenant(id=tenant_id, name=tenant_id)
    tenant.policy = Policy(**policy)
    session.add(tenant)
    session.flush()
    return tenant
