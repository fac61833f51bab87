"""Prepared reads (facegate.prepared): the job poll's row read on the driver equals, value
for value and type for type, the same statement's row through Core, on SQLite and
PostgreSQL; a failed driver read is run again through Core; a read on the event loop
leaves no SQLite snapshot open (a WAL checkpoint completes right after it)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, bindparam, column, event, select, table
from sqlalchemy.exc import DBAPIError, IntegrityError
from tests.jobs.jobfactories import create_database, create_job, create_tenant, drop_database

from facegate.database import (
    SINGLE_READS,
    create_engine_from_url,
    create_session_factory,
    insert_rows,
    session_scope,
    utcnow,
)
from facegate.jobs.repository import JOB_VIEW_READ, ROOM, ROOM_READ, JobRepository
from facegate.jobs.tables import Job
from facegate.prepared import PreparedRead, ReadPath
from facegate.storage.tables import StoredObject
from facegate.tenancy.tables import Tenant

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    engine = create_database(request.param, tmp_path)
    try:
        yield engine
    finally:
        drop_database(engine)


def a_finished_job(engine: Engine, tenant_id: str = "acme") -> uuid.UUID:
    """A job with every column the poll shows set (JSON of each shape, timestamps, floats,
    booleans, big integers)."""
    now = utcnow()
    with session_scope(create_session_factory(engine)) as session:
        create_tenant(session, tenant_id)
        job = create_job(
            session,
            tenant_id,
            status="succeeded",
            progress=1.0,
            stage="done",
            progress_detail={"frames_done": 10, "fps": 24.5},
            attempts=2,
            cancel_requested=True,
            started_at=now - timedelta(seconds=3, microseconds=123457),
            finished_at=now,
            error_type=None,
            output_content_type="image/png",
            result_width=1920,
            result_height=1080,
            result_bytes=5_000_000_000,
            result_pixels=2_073_600,
            result_frames=1,
            compute_seconds=1.25,
            models_used={"inswapper": "v1"},
            quality=[{"face": 0, "box": [1.0, 2.0, 3.0, 4.5], "verdict": "transferred"}],
            consent=[{"attested_by": "ana", "statement_version": "v2"}],
        )
        return job.id


def core_row(engine: Engine, tenant_id: str, job_id: uuid.UUID) -> Any:
    with engine.connect().execution_options(**SINGLE_READS) as connection:
        return JobRepository.job_row(connection, tenant_id, job_id)


def driver_row(engine: Engine, tenant_id: str, job_id: uuid.UUID) -> Any:
    fairy = engine.raw_connection()
    try:
        return JOB_VIEW_READ.run(
            engine, fairy.dbapi_connection, {"tenant_id": tenant_id, "job_id": job_id}
        )
    finally:
        fairy.close()


def test_a_driver_row_equals_the_core_row_value_for_value(engine: Engine) -> None:
    job_id = a_finished_job(engine)
    core, driver = core_row(engine, "acme", job_id), driver_row(engine, "acme", job_id)
    assert core is not None
    assert driver is not None
    assert driver._fields == core._fields
    for name, expected, got in zip(core._fields, core, driver, strict=True):
        assert got == expected, name
        assert type(got) is type(expected), name
    assert driver.started_at.tzinfo is not None  # UtcDateTime's conversion applied
    # Another tenant's id and a missing one read as nothing, as through Core.
    assert driver_row(engine, "other", job_id) is None
    assert driver_row(engine, "acme", uuid.uuid4()) is None


def test_listeners_of_the_engine_see_a_prepared_read(engine: Engine) -> None:
    job_id = a_finished_job(engine)
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "after_cursor_execute", record)
    try:
        driver_row(engine, "acme", job_id)
    finally:
        event.remove(engine, "after_cursor_execute", record)
    assert len(seen) == 1
    assert "FROM jobs" in seen[0]


async def test_the_read_path_answers_as_core_does(engine: Engine) -> None:
    job_id = a_finished_job(engine)
    reads = ReadPath(engine)
    params = {"tenant_id": "acme", "job_id": job_id}
    try:
        row = await reads.first(JOB_VIEW_READ, params, fail_if_called)
        assert tuple(row) == tuple(core_row(engine, "acme", job_id))
        assert await reads.first(JOB_VIEW_READ, {**params, "tenant_id": "other"}, none) is None
    finally:
        reads.close()


def fail_if_called(_connection: Connection) -> Any:
    raise AssertionError("the prepared read fell back to Core")


def none(_connection: Connection) -> Any:
    return None


async def test_sqlite_reads_on_the_event_loop_and_leaves_no_snapshot(tmp_path: Path) -> None:
    engine = create_database("sqlite", tmp_path)
    job_id = a_finished_job(engine)
    reads = ReadPath(engine)
    threads: list[int] = []
    event.listen(engine, "before_cursor_execute", lambda *_: threads.append(threading.get_ident()))
    try:
        assert reads.on_loop
        row = await reads.first(JOB_VIEW_READ, {"tenant_id": "acme", "job_id": job_id}, none)
        assert row is not None
        assert row.id == job_id
        assert threads == [threading.get_ident()]  # no worker-thread hop
        assert not reads._connection().in_transaction
        # It never waits on the loop: a busy database raises at once, and the read goes to a
        # worker thread through Core (next test), which waits as every statement does.
        assert reads._connection().execute("PRAGMA busy_timeout").fetchone()[0] == 0
        # Nothing holds a read snapshot: a checkpoint that must wait for every reader of
        # the WAL completes (busy 0) at once.
        with engine.connect().execution_options(**SINGLE_READS) as connection:
            busy = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()[0]
        assert busy == 0
    finally:
        reads.close()
        drop_database(engine)


async def test_a_failed_driver_read_is_run_again_through_core(tmp_path: Path) -> None:
    engine = create_database("sqlite", tmp_path)
    job_id = a_finished_job(engine)
    reads = ReadPath(engine)
    fallbacks: list[int] = []

    def through_core(connection: Connection) -> Any:
        fallbacks.append(threading.get_ident())
        return JobRepository.job_row(connection, "acme", job_id)

    try:
        broken = reads._connection()
        broken.close()  # any driver error: a closed connection raises ProgrammingError
        row = await reads.first(
            JOB_VIEW_READ, {"tenant_id": "acme", "job_id": job_id}, through_core
        )
        assert row is not None
        assert row.id == job_id
        assert len(fallbacks) == 1
        assert fallbacks[0] != threading.get_ident()
        # The next read opens a fresh connection and needs no fallback.
        again = await reads.first(JOB_VIEW_READ, {"tenant_id": "acme", "job_id": job_id}, none)
        assert again is not None
        assert len(fallbacks) == 1
    finally:
        reads.close()
        drop_database(engine)


def test_an_in_memory_database_is_read_through_the_pool() -> None:
    engine = create_engine_from_url("sqlite://")
    try:
        assert not ReadPath(engine).on_loop
    finally:
        engine.dispose()


def test_the_compiled_statement_is_the_scoped_one(engine: Engine) -> None:
    """The prepared read is JOB_VIEW (built from the readable statement): the tenant and
    the parts' exclusion are in its WHERE."""
    with engine.connect() as connection:
        sql = str(JOB_VIEW_READ.statement.compile(dialect=connection.dialect))
    assert "jobs.tenant_id =" in sql
    assert "jobs.parent_id IS NULL" in sql


@contextmanager
def executions(engine: Engine) -> Iterator[list[str]]:
    """The statements the engine's cursors run inside (Core's and prepared reads')."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_read_in_a_session_binds_the_statements_own_values_and_runs_once(
    engine: Engine,
) -> None:
    """The queue-cap-and-quota reading binds literals of its own (the status, SQLite's
    OFFSET 0, COALESCE's 0): on the driver they are bound as Core binds them, the statement
    runs once, and its answer is Core's."""
    a_finished_job(engine)
    with session_scope(create_session_factory(engine)) as session:
        create_job(session, "acme")
        create_job(session, "acme")
    params = {"tenant_id": "acme", "at_most": 10}
    with session_scope(create_session_factory(engine), read_only=True) as session:
        core = tuple(session.execute(ROOM, params).one())
        with executions(engine) as seen:
            row = ROOM_READ.run_in(session, params)
        assert len(seen) == 1
        assert tuple(row) == core
        assert row[0] == 2  # the queued two, not the finished one


def test_a_statement_that_cannot_be_prepared_runs_once_through_core(engine: Engine) -> None:
    """An expanding IN list's SQL depends on its values: it is not tried on the driver
    first (on PostgreSQL a failed driver statement would also abort the transaction)."""
    job_id = a_finished_job(engine)
    read = PreparedRead(
        select(Job.id, Job.status).where(Job.id.in_(bindparam("ids", expanding=True)))
    )
    with session_scope(create_session_factory(engine), read_only=True) as session:
        with executions(engine) as seen:
            rows = read.run_in(session, {"ids": [job_id, uuid.uuid4()]}, every=True)
        assert len(seen) == 1
        assert [(row.id, row.status) for row in rows] == [(job_id, "succeeded")]
    assert read.prepared_for(engine.dialect) is None


def test_a_failed_read_in_a_session_raises_as_core_does(engine: Engine) -> None:
    """A driver error comes out as SQLAlchemy's (what the error handlers and callers of a
    Core execution catch), and the session's transaction rolls back as for any."""
    read = PreparedRead(
        select(column("id")).select_from(table("no_such_table")).where(column("id") == 1)
    )
    factory = create_session_factory(engine)
    with session_scope(factory, read_only=True) as session, pytest.raises(DBAPIError):
        read.run_in(session, {})
    assert read.prepared_for(engine.dialect) is not None  # tried on the driver, once


def test_insert_rows_inserts_what_a_flush_would(engine: Engine) -> None:
    """A job and its ledger row by Core INSERTs (one statement each): the rows read back
    as the ORM would have written them, Python-side defaults included, and the objects
    carry those defaults without being in the session."""
    with session_scope(create_session_factory(engine)) as session:
        create_tenant(session, "acme")
    job = Job(tenant_id="acme", spec={"processors": ["face_debugger"]}, kind="image")
    ledger = StoredObject(
        key="tenants/acme/inputs/x/target",
        tenant_id="acme",
        kind="inputs",
        job_id=uuid.uuid4(),
        name="target",
        content_type="image/jpeg",
        size_bytes=12,
    )
    with session_scope(create_session_factory(engine)) as session:
        with executions(engine) as seen:
            insert_rows(session, [job, ledger])
        assert [statement.split()[:3] for statement in seen if "INSERT" in statement] == [
            ["INSERT", "INTO", "jobs"],
            ["INSERT", "INTO", "stored_objects"],
        ]
        assert job not in session
        assert (job.status, job.attempts, job.inputs) == ("queued", 0, [])
        assert job.created_at.tzinfo is not None
        with pytest.raises(ValueError, match="new objects only"):
            insert_rows(session, [session.get(Tenant, "acme")])
    with session_scope(create_session_factory(engine), read_only=True) as session:
        stored = session.get(Job, job.id)
        assert stored is not None
        for column in Job.__table__.columns:
            assert getattr(stored, column.key) == getattr(job, column.key), column.key
        found = session.get(StoredObject, ledger.key)
        assert found is not None
        assert (found.size_bytes, found.created_at) == (12, ledger.created_at)


def test_insert_rows_raises_a_duplicate_as_core_does(engine: Engine) -> None:
    """Two racing submissions with one Idempotency-Key: the loser's INSERT is SQLAlchemy's
    IntegrityError (what the submit route catches), several rows of a table in one
    executemany."""
    with session_scope(create_session_factory(engine)) as session:
        create_tenant(session, "acme")

    def ledger(key: str) -> StoredObject:
        return StoredObject(
            key=key,
            tenant_id="acme",
            kind="inputs",
            job_id=uuid.uuid4(),
            name="target",
            content_type="image/jpeg",
            size_bytes=1,
        )

    with session_scope(create_session_factory(engine)) as session:
        with executions(engine) as seen:
            insert_rows(session, [ledger("a"), ledger("b")])
        assert len([one for one in seen if "INSERT" in one]) == 1
    factory = create_session_factory(engine)
    with session_scope(factory) as session, pytest.raises(IntegrityError):
        insert_rows(session, [ledger("b")])
    with session_scope(factory, read_only=True) as session:
        assert session.get(StoredObject, "b") is not None
