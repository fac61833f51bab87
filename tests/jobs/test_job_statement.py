"""The polling route reads a job as a Core row (``JobRepository.job_row`` on a plain
Connection, with the statement built once); the rest of the API reads ORM objects. Both
must give the same ``JobOut``, whatever the job holds, on both databases."""

from __future__ import annotations

import uuid
from typing import Any

from jobfactories import create_job, create_tenant, seconds_ago, sessions_of
from sqlalchemy import Connection, Engine

from facegate.database import READ_ONLY
from facegate.jobs.repository import JobRepository
from facegate.jobs.schemas import JobOut

JOBS: dict[str, dict[str, Any]] = {
    "queued": {},
    "running": {
        "status": "running",
        "attempts": 2,
        "progress": 0.4,
        "stage": "swap",
        "progress_detail": {"frames_done": 40, "frames_total": 100, "fps": 12.5},
        "started_at": seconds_ago(3),
        "cancel_requested": True,
    },
    "succeeded": {
        "status": "succeeded",
        "progress": 1.0,
        "started_at": seconds_ago(5),
        "finished_at": seconds_ago(1),
        "output_content_type": "image/jpeg",
        "result_width": 640,
        "result_height": 480,
        "result_bytes": 51_234,
        "result_pixels": 307_200,
        "result_frames": 1,
        "compute_seconds": 1.25,
        "models_used": {"face_swapper": "mesh_warp"},
    },
    "failed": {"status": "failed", "error_type": "no-face", "error_detail": "no face found"},
}


def test_a_core_row_gives_the_same_job_out_as_the_orm_object(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with sessions.begin() as session:
        create_tenant(session, "acme")
        ids = {name: create_job(session, "acme", **fields).id for name, fields in JOBS.items()}
    for name, job_id in ids.items():
        with sessions() as session:
            job = JobRepository(session).get("acme", job_id)
            assert job is not None
            expected = JobOut.of(job).model_dump_json()
        with db_engine.connect().execution_options(**READ_ONLY) as connection:
            row = JobRepository.job_row(connection, "acme", job_id)
        assert row is not None
        assert JobOut.of(row).model_dump_json() == expected, name


def _found_id(connection: Connection, tenant_id: str, job_id: uuid.UUID) -> uuid.UUID | None:
    row = JobRepository.job_row(connection, tenant_id, job_id)
    return None if row is None else row.id


def test_the_built_once_statement_finds_no_other_tenants_job(db_engine: Engine) -> None:
    sessions = sessions_of(db_engine)
    with sessions.begin() as session:
        create_tenant(session, "acme")
        create_tenant(session, "other")
        job_id = create_job(session, "acme").id
        other_id = create_job(session, "other").id
    with db_engine.connect().execution_options(**READ_ONLY) as connection:
        assert _found_id(connection, "other", job_id) is None
        assert _found_id(connection, "acme", uuid.uuid4()) is None
        # The same statement object, other parameters: each call binds its own.
        assert _found_id(connection, "acme", job_id) == job_id
        assert _found_id(connection, "other", other_id) == other_id
    with sessions() as session:
        repository = JobRepository(session)
        assert repository.get("other", job_id) is None
        job = repository.get("acme", job_id)
        assert job is not None
        assert job.id == job_id
