"""``facegate receipt verify FILE``: check an erasure receipt this installation signed."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from facegate.cli.common import database_option, load_settings, open_database
from facegate.database import session_scope
from facegate.provenance.receipts import ReceiptInvalid, verify_statement
from facegate.takedown.erasure import audit_anchor_holds
from facegate.takedown.runtime import keys_for


@click.group()
def receipt() -> None:
    """Erasure receipts (tenant erase, subject erasure)."""


@receipt.command("verify")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--offline", is_flag=True, help="Check the signature only, not the audit trail's anchor."
)
@database_option
def verify(file: Path, offline: bool, database_url: str | None) -> None:
    """Check the receipt's signature against this installation's CA, that its scan found
    nothing left, and (unless --offline) that the audit event it names is in the chain.
    Exit 0: valid."""
    settings = load_settings(database_url)
    try:
        document = json.loads(file.read_text())
        made = datetime.fromisoformat(document["statement"]["erased_at"])
        statement = verify_statement(keys_for(settings).ca_pem, document, at=made)
    except (ReceiptInvalid, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"invalid receipt: {exc}") from exc
    if not statement["scan"]["empty"]:
        raise click.ClickException("the receipt's scan found data left: not a complete erasure")
    if not offline:
        with open_database(settings) as sessions, session_scope(sessions, read_only=True) as s:
            if not audit_anchor_holds(s, statement):
                raise click.ClickException("the audit event the receipt names is not in the chain")
    click.echo(
        f"ok: {statement['kind']} erasure of {statement['tenant_id']} at "
        f"{statement['erased_at']}, signed by installation {statement['installation_id']}"
    )
