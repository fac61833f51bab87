"""A freshly migrated database per test: SQLite in the test's folder, or a private schema
on the PostgreSQL server when one is configured (FACEGATE_TEST_POSTGRES_URL, or CI=true),
skipped with a how-to otherwise. Shared by the factories of several test packages."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from facegate.database import create_engine_from_url, migrate


def postgres_url() -> str | None:
    url = os.environ.get("FACEGATE_TEST_POSTGRES_URL")
    if url is None and os.environ.get("CI") == "true":
        url = "postgresql://postgres@127.0.0.1:5432/test"
    return url


def postgres_hint(what: str) -> str:
    return (
        "set FACEGATE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test "
        f"(or CI=true) to run the {what} tests on PostgreSQL"
    )


def fresh_database(
    backend: str, tmp_path: Path, *, name: str, what: str
) -> tuple[Engine, str, str | None]:
    """(engine, url, private schema or None) of a database migrated to head."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/{name}.db"
        migrate(url)
        return create_engine_from_url(url), url, None
    base = postgres_url()
    if base is None:
        pytest.skip(postgres_hint(what))
    schema, url = create_schema(base, name)
    return create_engine_from_url(url), url, schema


def create_schema(base: str, prefix: str) -> tuple[str, str]:
    """A fresh schema on the server at ``base``, migrated; (schema, url whose search_path
    is it)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine_from_url(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    url = base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"
    migrate(url)
    return schema, url


def drop_schema(base: str, schema: str) -> None:
    admin = create_engine_from_url(base)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def drop_database(engine: Engine, schema: str | None) -> None:
    """Dispose the engine; drop the private PostgreSQL schema the test made."""
    engine.dispose()
    base = postgres_url()
    if schema and base:
        drop_schema(base, schema)
