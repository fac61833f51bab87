"""``facegate storage reconcile``: delete the objects a killed process left without a ledger
row, now rather than at the hourly purge's second sighting (facegate.storage.reconcile).
Honours FACEGATE_DATABASE_URL and FACEGATE_STORAGE_URL."""

from __future__ import annotations

from datetime import timedelta

import click

from facegate.cli.common import cli_actor, database_option, load_settings, open_database
from facegate.database import session_scope, utcnow
from facegate.observability.audit import STORAGE_RECONCILE, record_audit
from facegate.resilience import BreakerConfig
from facegate.storage.factory import store_from_url
from facegate.storage.reconcile import delete_orphans, find_orphans

#: Keys named in the audit event at most (the count and bytes are always whole).
AUDITED_KEYS = 100


@click.group()
def storage() -> None:
    """The object storage of every tenant, against the ledger of stored objects."""


@storage.command("reconcile")
@click.option(
    "--apply", "apply_", is_flag=True, help="Delete the orphans (default: only list them)."
)
@click.option(
    "--grace",
    type=click.IntRange(0, None),
    default=None,
    help="Seconds an object without a ledger row is left alone, a submission in flight "
    "(FACEGATE_STORAGE_ORPHAN_GRACE_SECONDS, default 600; 0: every orphan).",
)
@database_option
def reconcile(apply_: bool, grace: int | None, database_url: str | None) -> None:
    """List (or with --apply delete, audited as storage.reconcile) the objects of the
    ledgered kinds (inputs, outputs, previews, faces) that have no ledger row and were
    written more than the grace ago. Models in the storage are never touched."""
    settings = load_settings(database_url)
    seconds = settings.storage_orphan_grace_seconds if grace is None else grace
    store = store_from_url(settings.storage_url, BreakerConfig.from_settings(settings))
    with open_database(settings) as sessions:
        with session_scope(sessions, read_only=True) as session:
            found = find_orphans(session, store, utcnow(), timedelta(seconds=seconds))
        for item in found.orphans:
            click.echo(f"{item.key}  {item.size} bytes  {item.modified:%Y-%m-%d %H:%M:%S}")
        summary = (
            f"{len(found.orphans)} orphans, {found.orphan_bytes} bytes, older than "
            f"{seconds} s (of {found.checked} objects; {found.young_orphans} younger kept)"
        )
        if not apply_:
            click.echo(f"{summary}; dry run: nothing deleted (--apply deletes them)")
            return
        deleted = delete_orphans(store, found.orphans)
        with session_scope(sessions) as session:
            record_audit(
                session,
                cli_actor(),
                STORAGE_RECONCILE,
                "storage:orphans",
                {
                    "deleted": deleted,
                    "bytes": found.orphan_bytes,
                    "grace_seconds": seconds,
                    "keys": [item.key for item in found.orphans[:AUDITED_KEYS]],
                },
            )
    click.echo(f"{summary}; deleted {deleted}")
