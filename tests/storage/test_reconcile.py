"""``facegate storage reconcile`` through the CLI: an orphan (an object of a ledgered kind
without a ledger row) older than the grace is listed by the dry run and kept by it, then
deleted by ``--apply`` (audited); a younger orphan, every ledgered object and the models
kept in the storage without rows stay; ``--grace 0`` takes every orphan. On SQLite and
PostgreSQL with a local folder, and on S3 (moto) with its own LastModified."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fixtures
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from storagefactories import create_tenant
from tests.dbkit import drop_database, fresh_database

from facegate.cli import main
from facegate.cli.common import cli_actor
from facegate.database import create_session_factory, session_scope
from facegate.observability.audit.tables import AuditEvent
from facegate.resilience import BreakerConfig
from facegate.storage.base import ObjectStore
from facegate.storage.factory import store_from_url
from facegate.storage.s3 import S3Store
from facegate.storage.tenant import TenantStore, build_key

moto_endpoint = s3fixtures.moto_endpoint
moto_client = s3fixtures.moto_client
s3_credentials = s3fixtures.s3_credentials
make_s3_store = s3fixtures.make_s3_store

pytestmark = pytest.mark.timeout(120)
HOUR = 3600


class Seeded:
    """The objects of one test: one ledgered input, two orphans, two models."""

    def __init__(self, store: ObjectStore, sessions: sessionmaker[Session]) -> None:
        self.store = store
        with session_scope(sessions) as session:
            create_tenant(session, "acme")
            ref = TenantStore(store).put(
                session,
                tenant_id="acme",
                kind="inputs",
                job_id=uuid.uuid4(),
                name="target",
                data=b"ledgered" * 10,
                content_type="image/png",
                new=True,
            )
        self.ledgered = ref.key
        self.old_orphan = build_key("acme", "inputs", uuid.uuid4(), "target")
        self.young_orphan = build_key("acme", "outputs", uuid.uuid4(), "result.png")
        self.models = ["tenants/acme/models/own/v1/model.onnx", "models/shared/v1/manifest.json"]
        store.put(self.old_orphan, b"o" * 100)
        store.put(self.young_orphan, b"y" * 7)
        for key in self.models:
            store.put(key, b"model")

    def kept(self) -> set[str]:
        keys = [self.ledgered, self.old_orphan, self.young_orphan, *self.models]
        return {key for key in keys if self.store.exists(key)}


class Cli:
    def __init__(self, database_url: str, storage_url: str) -> None:
        self.env = {
            "FACEGATE_DATABASE_URL": database_url,
            "FACEGATE_STORAGE_URL": storage_url,
            "FACEGATE_STORAGE_ORPHAN_GRACE_SECONDS": "600",
        }

    def __call__(self, *args: str) -> str:
        result = CliRunner().invoke(
            main, ["storage", "reconcile", *args], env=self.env, catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        return result.output


def audit_events(sessions: sessionmaker[Session]) -> list[AuditEvent]:
    with session_scope(sessions, read_only=True) as session:
        return list(session.scalars(select(AuditEvent).order_by(AuditEvent.seq)))


Database = tuple[str, sessionmaker[Session]]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    engine, url, schema = fresh_database(
        request.param, tmp_path, name="reconcile", what="storage reconcile"
    )
    yield url, create_session_factory(engine)
    drop_database(engine, schema)


def test_reconcile_deletes_old_orphans_only(database: Database, tmp_path: Path) -> None:
    url, sessions = database
    storage_url = f"file://{tmp_path}/storage"
    store = store_from_url(storage_url, BreakerConfig(3, 30.0))
    seeded = Seeded(store, sessions)
    an_hour_ago = time.time() - HOUR
    for key in (seeded.ledgered, seeded.old_orphan, *seeded.models):
        os.utime(tmp_path / "storage" / key, (an_hour_ago, an_hour_ago))
    everything = seeded.kept()
    cli = Cli(url, storage_url)

    listed = cli()
    assert seeded.old_orphan in listed
    assert "1 orphans, 100 bytes, older than 600 s" in listed
    assert "1 younger kept" in listed
    assert "dry run" in listed
    for key in (seeded.ledgered, seeded.young_orphan, *seeded.models):
        assert key not in listed
    assert seeded.kept() == everything  # a dry run deletes nothing
    assert audit_events(sessions) == []

    applied = cli("--apply")
    assert "deleted 1" in applied
    assert seeded.kept() == everything - {seeded.old_orphan}
    [event] = audit_events(sessions)
    assert (event.action, event.actor, event.target) == (
        "storage.reconcile",
        cli_actor(),
        "storage:orphans",
    )
    assert event.details == {
        "deleted": 1,
        "bytes": 100,
        "grace_seconds": 600,
        "keys": [seeded.old_orphan],
    }

    taken = cli("--grace", "0", "--apply")
    assert "1 orphans, 7 bytes, older than 0 s" in taken
    assert seeded.kept() == {seeded.ledgered, *seeded.models}
    assert cli("--grace", "0").count("0 orphans, 0 bytes") == 1


def test_reconcile_on_s3_reads_last_modified(
    make_s3_store: s3fixtures.S3Factory, moto_endpoint: str, tmp_path: Path
) -> None:
    store = make_s3_store()
    engine, url, _ = fresh_database("sqlite", tmp_path, name="reconcile", what="reconcile")
    try:
        check_s3(store, create_session_factory(engine), url, moto_endpoint)
    finally:
        engine.dispose()


def check_s3(store: S3Store, sessions: sessionmaker[Session], url: str, moto_endpoint: str) -> None:
    seeded = Seeded(store, sessions)
    everything = seeded.kept()
    cli = Cli(url, f"s3://{store.options.bucket}?endpoint_url={moto_endpoint}")

    # Both orphans were written just now: inside the default grace, kept even by --apply.
    assert "0 orphans, 0 bytes, older than 600 s (of 3 objects; 2 younger kept)" in cli("--apply")
    assert seeded.kept() == everything
    listed = cli("--grace", "0")
    assert seeded.old_orphan in listed
    assert seeded.young_orphan in listed
    assert "2 orphans, 107 bytes" in listed
    assert seeded.kept() == everything
    assert "deleted 2" in cli("--grace", "0", "--apply")
    assert seeded.kept() == {seeded.ledgered, *seeded.models}
