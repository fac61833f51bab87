"""Plain factories: a migrated database (SQLite, or PostgreSQL when asked) and audit rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from sqlalchemy import Engine
from tests.dbkit import drop_database, fresh_database


def create_database(backend: str, tmp_path: Path) -> tuple[Engine, str, str | None]:
    """(engine, url, private schema) of a freshly migrated database."""
    return fresh_database(backend, tmp_path, name="obs", what="audit/usage")


class Database(NamedTuple):
    engine: Engine
    url: str


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated database for one test: SQLite, and PostgreSQL when configured."""
    engine, url, schema = create_database(request.param, tmp_path)
    yield Database(engine, url)
    drop_database(engine, schema)
