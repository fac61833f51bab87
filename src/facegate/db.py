"""Database plumbing shared by every domain package: the declarative Base, the engine and
session factory built from a URL (SQLite for the embedded shape, PostgreSQL for the cluster).

Tables are created only by the Alembic migrations in ``facegate/migrations`` (never by
``create_all``), so SQLite and PostgreSQL always have the same schema.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def utcnow() -> datetime:
    """Timezone-aware now in UTC (stored as such on PostgreSQL, naive-UTC on SQLite)."""
    return datetime.now(UTC)
