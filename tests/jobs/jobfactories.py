"""Plain factories for queue tests: a migrated database (SQLite, or PostgreSQL when asked),
tenants with policies, and queued job rows."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from tests.dbkit import drop_database as drop_schema
from tests.dbkit import fresh_database

from facegate.database import create_session_factory, utcnow
from facegate.jobs.tables import Job
from facegate.queue.claim import Claim, JobClaimer
from facegate.tenancy.tables import Policy, Tenant

#: a 1x1 PNG: the output of a test's runner that makes no picture
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010800000000"
    "3a7e9b550000000a49444154789c63680000008200816e2cfb0a0000000049454e44ae426082"
)

# id(engine) -> the private PostgreSQL schema made for it
_SCHEMAS: dict[int, str] = {}


def create_database(backend: str, tmp_path: Path) -> Engine:
    """A freshly migrated database; PostgreSQL gets a private schema per test."""
    engine, _, schema = fresh_database(backend, tmp_path, name="jobs", what="queue")
    if schema is not None:
        _SCHEMAS[id(engine)] = schema
    return engine


def drop_database(engine: Engine) -> None:
    """Dispose the engine; drop the private PostgreSQL schema a test made."""
    drop_schema(engine, _SCHEMAS.pop(id(engine), None))


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


def claim_concurrently(
    claimer: JobClaimer, *, threads: int, rounds: int, batch: int = 1
) -> list[Claim]:
    """``threads`` workers released together, each trying ``rounds`` claims of up to
    ``batch`` jobs: every claim that succeeded (to check caps and that no job was handed out
    twice)."""
    claims: list[Claim] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def worker(number: int) -> None:
        barrier.wait()
        for _ in range(rounds):
            got = claimer.claim_many(f"w{number}", limit=batch, lease_seconds=30)
            with lock:
                claims.extend(got)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return claims
