"""Plain factories: a migrated database (SQLite, or PostgreSQL when asked) and audit rows."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from sqlalchemy import Engine, text

from facegate.database import create_engine_from_url, migrate

POSTGRES_HINT = (
    "set FACEGATE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test (or CI=true) "
    "to run the audit/usage tests on PostgreSQL"
)


def postgres_url() -> str | None:
    url = os.environ.get("FACEGATE_TEST_POSTGRES_URL")
    if url is None and os.environ.get("CI") == "true":
        url = "postgresql://postgres@127.0.0.1:5432/test"
    return url


def create_database(backend: str, tmp_path: Path) -> tuple[Engine, str, str | None]:
    """(engine, url, private schema) of a freshly migrated database."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/obs.db"
        migrate(url)
        return create_engine_from_url(url), url, None
    base = postgres_url()
    if base is None:
        pytest.skip(POSTGRES_HINT)
    schema = f"o_{uuid.uuid4().hex[:12]}"
    admin = create_engine_from_url(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    url = base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"
    migrate(url)
    return create_engine_from_url(url), url, schema


def drop_database(engine: Engine, schema: str | None) -> None:
    engine.dispose()
    base = postgres_url()
    if schema and base:
        admin = create_engine_from_url(base)
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


class Database(NamedTuple):
    engine: Engine
    url: str


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated database for one test: SQLite, and PostgreSQL when configured."""
    engine, url, schema = create_database(request.param, tmp_path)
    yield Database(engine, url)
    drop_database(engine, schema)
