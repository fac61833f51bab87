"""Plain factories for storage tests: a migrated SQLite database and a tenant row."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from facegate.database import create_engine_from_url, create_session_factory, migrate
from facegate.tenancy.models import Policy, Tenant


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
