"""``facegate db upgrade|current|check``: the schema as an operator step.

In the cluster the api's init container runs ``facegate db upgrade`` (under the migration
lock, so replicas starting together migrate once) and every process starts with
``FACEGATE_SCHEMA_ON_START=check``: a pod of an older or newer release refuses the schema
instead of changing it.
"""

from __future__ import annotations

import click

from facegate.cli.common import database_option, load_settings
from facegate.database import check_schema, current_revision, head_revision
from facegate.worker.process import prepare_schema_when_reachable


@click.group()
def db() -> None:
    """The database schema (honours FACEGATE_DATABASE_URL)."""


@db.command()
@database_option
@click.option(
    "--wait",
    type=click.FloatRange(0, 3600),
    default=120.0,
    show_default=True,
    help="Seconds to wait for an unreachable database (a pod that started first).",
)
def upgrade(database_url: str | None, wait: float) -> None:
    """Migrate to this release's head, under the PostgreSQL advisory lock."""
    settings = load_settings(database_url)
    prepare_schema_when_reachable(settings.database_url, "migrate", wait_seconds=wait)
    click.echo(f"database at {current_revision(settings.database_url)}")


@db.command()
@database_option
def current(database_url: str | None) -> None:
    """Print the database's revision and this release's head."""
    url = load_settings(database_url).database_url
    click.echo(f"database: {current_revision(url) or 'none'}")
    click.echo(f"release head: {head_revision()}")


@db.command()
@database_option
def check(database_url: str | None) -> None:
    """Exit 0 when the database is at this release's head, 1 (saying why) otherwise."""
    click.echo(f"database at {check_schema(load_settings(database_url).database_url)}")
