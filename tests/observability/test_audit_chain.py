"""The audit chain: appends link up, and ``facegate audit verify`` names an edited,
inserted or deleted row (on SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text, update

from facegate.cli import main
from facegate.database import create_session_factory, session_scope
from facegate.observability.audit import KEY_CREATE, record_audit
from facegate.observability.audit.chain import row_hash
from facegate.observability.audit.tables import AuditEvent
from facegate.principal import Principal

ADMIN = Principal(tenant_id="ops", scopes=frozenset({"admin"}), actor="key:admin1")


def append_events(database: Any, count: int = 5) -> None:
    for number in range(count):
        with session_scope(create_session_factory(database.engine)) as session:
            record_audit(
                session, ADMIN, KEY_CREATE, f"key:k{number}", {"n": number}, tenant_id="acme"
            )


def verify(database: Any) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["audit", "verify", "--database-url", database.url])
    return result.exit_code, result.output


def test_intact_chain_verifies(database: Any) -> None:
    append_events(database)
    code, output = verify(database)
    assert code == 0, output
    assert "ok: 5 events, head 5:" in output


def test_edited_row_is_named(database: Any) -> None:
    append_events(database)
    with database.engine.begin() as conn:
        conn.execute(update(AuditEvent).where(AuditEvent.seq == 3).values(target="key:forged"))
    code, output = verify(database)
    assert code == 1
    assert "row 3: edited" in output


def test_edited_row_with_rewritten_hash_is_named(database: Any) -> None:
    append_events(database)
    with session_scope(create_session_factory(database.engine)) as session:
        event = session.get(AuditEvent, 2)
        assert event is not None
        event.actor = "key:someone-else"
        event.hash = row_hash(event)  # a consistent row: only its successor's link breaks
    code, output = verify(database)
    assert code == 1
    assert "row 3: broken-link" in output
    assert "row 2 was edited and its hash rewritten" in output


def test_deleted_row_is_named(database: Any) -> None:
    append_events(database)
    with database.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq = 4"))
    code, output = verify(database)
    assert code == 1
    assert "row 4: deleted" in output


def test_deleted_tail_is_noticed(database: Any) -> None:
    append_events(database)
    with database.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq = 5"))
    code, output = verify(database)
    assert code == 1
    assert "row 5: deleted" in output


@pytest.mark.parametrize("position", ["middle", "end"])
def test_inserted_row_is_named(database: Any, position: str) -> None:
    append_events(database)
    with database.engine.begin() as conn:
        if position == "middle":
            # Make room after row 2 the way an intruder would (renumber), then insert a
            # row that links correctly to row 2 with a valid hash of its own.
            conn.execute(text("UPDATE audit_events SET seq = seq + 100 WHERE seq > 2"))
            conn.execute(text("UPDATE audit_events SET seq = seq - 99 WHERE seq > 100"))
            seq, prev_seq = 3, 2
        else:
            seq, prev_seq = 6, 5
        prev = conn.execute(
            text("SELECT hash FROM audit_events WHERE seq = :s"), {"s": prev_seq}
        ).scalar_one()
        # a read beside the open write transaction above (SQLite: a DEFERRED one)
        factory = create_session_factory(database.engine)
        with session_scope(factory, read_only=True) as session:
            event = session.get(AuditEvent, 1)
            assert event is not None
            template = {
                "created_at": event.created_at,
                "actor": "key:intruder",
                "tenant_id": "acme",
                "action": KEY_CREATE,
                "target": "key:backdoor",
                "details": {},
                "request_id": None,
            }
        forged = AuditEvent(seq=seq, prev_hash=prev, hash="", **template)
        forged.hash = row_hash(forged)
        values = {**template, "seq": seq, "prev_hash": prev, "hash": forged.hash}
        conn.execute(AuditEvent.__table__.insert().values(**values))
    code, output = verify(database)
    assert code == 1
    assert f"row {seq}: inserted" in output


def test_list_shows_events(database: Any) -> None:
    append_events(database, 2)
    result = CliRunner().invoke(
        main, ["audit", "list", "--json", "--tenant", "acme", "--database-url", database.url]
    )
    assert result.exit_code == 0, result.output
    assert [line.count('"action": "key.create"') for line in result.output.splitlines()] == [1, 1]
