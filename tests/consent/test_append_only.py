"""consent_attestations is append-only in the database itself: UPDATE and DELETE are refused
by triggers on SQLite and PostgreSQL, whoever issues them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError
from tests.dbkit import drop_database, fresh_database

from facegate.consent.repository import ConsentRepository
from facegate.consent.tables import ConsentAttestation
from facegate.database import create_session_factory, session_scope, utcnow


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    created, _, schema = fresh_database(request.param, tmp_path, name="consent", what="consent")
    yield created
    drop_database(created, schema)


def test_update_and_delete_are_refused(engine: Engine) -> None:
    with session_scope(create_session_factory(engine)) as session:
        row = ConsentRepository(session).add(
            ConsentAttestation(
                tenant_id="acme",
                source_sha256="a" * 64,
                attested_by="Jane Roe",
                statement_version="v1",
                attested_at=utcnow(),
                recorded_by="key:k1",
            )
        )
        attestation_id = row.id
    for statement in (
        "UPDATE consent_attestations SET attested_by = 'someone else'",
        "DELETE FROM consent_attestations",
    ):
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(statement))
    with session_scope(create_session_factory(engine)) as session:
        found = ConsentRepository(session).for_source("acme", "a" * 64)
        assert [(r.id, r.attested_by) for r in found] == [(attestation_id, "Jane Roe")]
        assert ConsentRepository(session).for_source("other", "a" * 64) == []
