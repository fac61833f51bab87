"""Migrations: upgrade/downgrade on SQLite always, on PostgreSQL when available; the
migrated schema matches the models (no autogenerate diff)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from facegate.database import (
    MIGRATION_LOCK_KEY,
    Base,
    create_engine_from_url,
    create_session_factory,
    current_revision,
    head_revision,
    migrate,
    session_scope,
)

POSTGRES_URL = os.environ.get("FACEGATE_TEST_POSTGRES_URL") or (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test" if os.environ.get("CI") == "true" else None
)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema per test on the test PostgreSQL, dropped afterwards."""
    if POSTGRES_URL is None:
        pytest.skip(
            "PostgreSQL tests: set FACEGATE_TEST_POSTGRES_URL="
            "postgresql+psycopg://postgres@127.0.0.1:5432/test (or CI=true)"
        )
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine_from_url(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def assert_schema_matches_models(url: str) -> None:
    import facegate.tenancy.tables  # noqa: F401  (register tables)

    for module in ("facegate.jobs.tables", "facegate.storage.tables"):
        try:
            __import__(module)
        except ModuleNotFoundError:
            pass
    engine = create_engine_from_url(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    if url.startswith("sqlite"):
        diff = _without_unnamed_fk_renames(diff)
    assert diff == [], diff


def _without_unnamed_fk_renames(diff: list[Any]) -> list[Any]:
    """SQLite's reflection reads the names of table-level foreign keys only: a key added
    with a column (``ALTER TABLE ADD COLUMN ... CONSTRAINT name REFERENCES``, the one way
    to add one without rebuilding the table and losing its triggers) comes back unnamed,
    and without its ON DELETE, and compare_metadata reports it removed and added. Such a
    pair, same columns and target, is no difference (the SQLite test below reads the key's
    ON DELETE from the database itself)."""

    def shape(fk: Any) -> tuple[Any, ...]:
        return (
            fk.table.name,
            tuple(c.name for c in fk.columns),
            fk.referred_table.name,
        )

    removed = {shape(d[1]) for d in diff if d[0] == "remove_fk" and d[1].name is None}
    added = {shape(d[1]) for d in diff if d[0] == "add_fk"}
    same = removed & added
    return [d for d in diff if not (d[0] in ("remove_fk", "add_fk") and shape(d[1]) in same)]


def check_round_trip(url: str) -> None:
    migrate(url)
    assert current_revision(url) is not None
    engine = create_engine_from_url(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"tenants", "policies", "api_keys"} <= tables
    assert_schema_matches_models(url)
    migrate(url)  # idempotent


def test_sqlite_migrations(tmp_path: Path) -> None:
    check_round_trip(f"sqlite:///{tmp_path}/nested/dir/facegate.db")


def test_sqlite_pragmas(tmp_path: Path) -> None:
    engine = create_engine_from_url(f"sqlite:///{tmp_path}/p.db")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_migrations(postgres_url: str) -> None:
    check_round_trip(postgres_url)


def test_sqlite_read_then_write_waits_for_a_concurrent_writer(tmp_path: Path) -> None:
    """WAL + a DEFERRED transaction that reads, then writes after another connection
    committed, fails at once ("database is locked"); transactions begin IMMEDIATE so the
    other writer waits instead (two API requests, or a request and a worker)."""
    engine = create_engine_from_url(f"sqlite:///{tmp_path / 't.db'}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    factory = create_session_factory(engine)
    read_done, other_done = threading.Event(), threading.Event()

    def other_writer() -> None:
        read_done.wait(5)
        with session_scope(factory) as session:
            session.execute(text("INSERT INTO t VALUES (2)"))
        other_done.set()

    thread = threading.Thread(target=other_writer)
    thread.start()
    with session_scope(factory) as session:
        assert session.execute(text("SELECT count(*) FROM t")).scalar_one() == 0
        read_done.set()
        assert not other_done.wait(0.5)  # the other writer queues behind this transaction
        session.execute(text("INSERT INTO t VALUES (1)"))
    thread.join(10)
    assert other_done.is_set()
    with session_scope(factory, read_only=True) as session:
        assert session.execute(text("SELECT count(*) FROM t")).scalar_one() == 2
    engine.dispose()


def test_sqlite_read_only_sessions_run_beside_a_writer(tmp_path: Path) -> None:
    engine = create_engine_from_url(f"sqlite:///{tmp_path / 't.db'}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    factory = create_session_factory(engine)
    with session_scope(factory) as writer:
        writer.execute(text("INSERT INTO t VALUES (1)"))
        with session_scope(factory, read_only=True) as reader:  # no wait for the write lock
            assert reader.execute(text("SELECT count(*) FROM t")).scalar_one() == 0
    engine.dispose()


def _facegate(*args: str, url: str, **env: str) -> subprocess.Popen[str]:
    """A real ``facegate`` process (the venv's console script) on the database ``url``."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "facegate"), *args],
        env={**os.environ, "FACEGATE_DATABASE_URL": url, "FACEGATE_LOG_FORMAT": "console", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    out, _ = process.communicate(timeout=timeout)
    return process.returncode, out


@pytest.mark.postgres
def test_racing_processes_migrate_once_under_the_lock(postgres_url: str) -> None:
    # The init containers of several api replicas (`db upgrade`) and processes migrating at
    # start (`tenant list` opens the database with FACEGATE_SCHEMA_ON_START=migrate), all at
    # once on an empty schema: every one succeeds, the schema is migrated exactly once.
    processes = [_facegate("db", "upgrade", url=postgres_url) for _ in range(2)]
    processes += [_facegate("tenant", "list", url=postgres_url) for _ in range(2)]
    results = [_finish(process) for process in processes]
    assert [code for code, _ in results] == [0, 0, 0, 0], results
    assert current_revision(postgres_url) == head_revision()
    assert_schema_matches_models(postgres_url)


@pytest.mark.postgres
def test_upgrade_waits_for_the_migration_lock(postgres_url: str) -> None:
    holder = create_engine_from_url(postgres_url)
    try:
        with holder.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            process = _facegate("db", "upgrade", url=postgres_url)
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=4)  # blocked on the lock, nothing migrated
            assert current_revision(postgres_url) is None
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
            connection.commit()
        code, out = _finish(process)
    finally:
        holder.dispose()
    assert code == 0, out
    assert f"database at {head_revision()}" in out


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_check_mode_refuses_an_old_schema_until_upgraded(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = (
        f"sqlite:///{tmp_path}/facegate.db"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    if backend == "sqlite":
        migrate(url, "0001_tenancy")  # an old release's schema
    refused = [
        _facegate(*command, url=url, FACEGATE_SCHEMA_ON_START="check")
        for command in (["api"], ["worker", "--no-device"], ["db", "check"])
    ]
    for code, out in (_finish(process) for process in refused):
        assert code == 1, out
        assert "run `facegate db upgrade`" in out, out
        assert "Traceback" not in out
    # Nothing was migrated by the refusing processes.
    assert current_revision(url) == ("0001_tenancy" if backend == "sqlite" else None)
    code, out = _finish(_facegate("db", "upgrade", url=url))
    assert code == 0, out
    code, out = _finish(_facegate("db", "check", url=url, FACEGATE_SCHEMA_ON_START="check"))
    assert (code, out.strip()) == (0, f"database at {head_revision()}")
    code, out = _finish(_facegate("db", "current", url=url))
    assert out.splitlines() == [f"database: {head_revision()}", f"release head: {head_revision()}"]


def test_the_migrations_keep_the_jobs_tables_triggers_on_sqlite(tmp_path: Path) -> None:
    """A migration that rebuilds ``jobs`` on SQLite (alembic's batch mode) drops its
    triggers: the webhook outbox's went once (0023), and no webhook was sent. The parts'
    key to their job deletes them with it."""
    url = f"sqlite:///{tmp_path}/triggers.db"
    migrate(url)
    engine = create_engine_from_url(url)
    try:
        with engine.connect() as conn:
            triggers = set(
                conn.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                ).scalars()
            )
            keys = conn.exec_driver_sql("PRAGMA foreign_key_list(jobs)").all()
    finally:
        engine.dispose()
    assert "jobs_webhook_event" in triggers
    assert ("jobs", "parent_id", "id", "CASCADE") in {(k[2], k[3], k[4], k[6]) for k in keys}
