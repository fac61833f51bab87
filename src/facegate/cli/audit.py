"""``facegate audit verify`` (walk the hash chain, name every broken row) and ``facegate
audit list`` (honour FACEGATE_DATABASE_URL)."""

from __future__ import annotations

import json

import click

from facegate.cli.common import database_option, transaction
from facegate.observability.audit.chain import verify_chain
from facegate.observability.audit.repository import AuditRepository, event_fields


@click.group()
def audit() -> None:
    """The tamper-evident audit trail."""


@audit.command("verify")
@click.option(
    "--expect-head",
    default=None,
    metavar="SEQ:HASH",
    help="A head printed by an earlier verify (kept elsewhere): the chain must still hold it.",
)
@database_option
def verify(expect_head: str | None, database_url: str | None) -> None:
    """Recompute every hash; exit 1 naming each edited, inserted or deleted row."""
    with transaction(database_url) as session:
        repository = AuditRepository(session)
        head = repository.head()
        rows = list(repository.scan())
    result = verify_chain(rows, head)
    problems = [str(problem) for problem in result.problems]
    if expect_head:
        seq_text, _, hash_text = expect_head.partition(":")
        anchored = next((row for row in rows if str(row.seq) == seq_text), None)
        if anchored is None or anchored.hash != hash_text:
            problems.append(
                f"row {seq_text}: anchored: the recorded head is no longer in the chain "
                "(the chain was rewritten from there on)"
            )
    for problem in problems:
        click.echo(f"FAIL {problem}", err=True)
    if problems:
        raise SystemExit(1)
    click.echo(f"ok: {result.rows} events, head {result.head_seq}:{result.head_hash}")


@audit.command("list")
@click.option("--tenant", "tenant_id", default=None, help="Only events about this tenant.")
@click.option("--action", default=None, help="Only this action (e.g. key.create).")
@click.option("--after", type=int, default=None, help="Events after this seq.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@database_option
def list_events(
    tenant_id: str | None,
    action: str | None,
    after: int | None,
    limit: int,
    as_json: bool,
    database_url: str | None,
) -> None:
    """Events oldest first: seq, time, actor, tenant, action, target, details."""
    with transaction(database_url) as session:
        events = AuditRepository(session).list(
            tenant_id, action=action, after_seq=after, limit=limit
        )
        for event in events:
            if as_json:
                click.echo(json.dumps(event_fields(event), sort_keys=True))
                continue
            click.echo(
                f"{event.seq:>6}  {event.created_at:%Y-%m-%d %H:%M:%S}  {event.actor:24}  "
                f"{event.tenant_id or '-':16}  {event.action:24}  {event.target}  "
                f"{json.dumps(event.details, sort_keys=True)}"
            )
