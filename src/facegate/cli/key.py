"""``facegate key create|list|revoke``."""

from __future__ import annotations

from datetime import timedelta

import click

from facegate.cli.common import cli_actor, database_option, transaction
from facegate.database import utcnow
from facegate.principal import ALL_SCOPES
from facegate.tenancy.audited import create_key, revoke_key
from facegate.tenancy.schemas import KeyCreate
from facegate.tenancy.service import TenancyService


def _split_scopes(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """``--scope a --scope b`` and ``--scopes a,b`` alike; an unknown scope names the known."""
    scopes = tuple(item.strip() for value in values for item in value.split(",") if item.strip())
    unknown = [scope for scope in scopes if scope not in ALL_SCOPES]
    if unknown or not scopes:
        raise click.BadParameter(
            f"unknown scope {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"choose from {', '.join(ALL_SCOPES)}"
        )
    return scopes


@click.group()
def key() -> None:
    """Manage API keys (honours FACEGATE_DATABASE_URL)."""


@key.command("create")
@click.argument("tenant_id")
@click.option(
    "--scope",
    "--scopes",
    "scopes",
    multiple=True,
    callback=_split_scopes,
    default=("jobs:write", "jobs:read"),
    show_default=True,
    help="Repeat, or give a comma list (--scopes jobs:write,jobs:read); "
    f"each one of {', '.join(ALL_SCOPES)}.",
)
@click.option("--name", default="", help="A label for humans.")
@click.option("--expires-in-days", type=click.IntRange(min=1), default=None)
@database_option
def create(
    tenant_id: str,
    scopes: tuple[str, ...],
    name: str,
    expires_in_days: int | None,
    database_url: str | None,
) -> None:
    """Create a key and print it. It is shown only this once (stored hashed; audited)."""
    expires_at = utcnow() + timedelta(days=expires_in_days) if expires_in_days else None
    request = KeyCreate.model_validate(
        {"name": name, "scopes": list(scopes), "expires_at": expires_at}
    )
    with transaction(database_url) as session:
        created = create_key(session, cli_actor(), tenant_id, request)
    click.echo(
        f"key/{created.key.id} created for tenant/{tenant_id} "
        f"scopes={','.join(created.key.scopes)}",
        err=True,
    )
    click.echo("store it now, it is not shown again:", err=True)
    click.echo(created.token)


@key.command("list")
@click.argument("tenant_id")
@database_option
def list_keys(tenant_id: str, database_url: str | None) -> None:
    with transaction(database_url) as session:
        for item in TenancyService(session).list_keys(tenant_id, platform_keys=True):
            state = "revoked" if item.revoked_at else "active"
            if item.expires_at is not None and item.expires_at <= utcnow():
                state = "expired"
            last_used = item.last_used_at.isoformat() if item.last_used_at else "never"
            click.echo(
                f"{item.id}  {state:<8} {','.join(item.scopes):<32} "
                f"last_used={last_used}  {item.name}"
            )


@key.command("revoke")
@click.argument("tenant_id")
@click.argument("key_id")
@database_option
def revoke(tenant_id: str, key_id: str, database_url: str | None) -> None:
    """Revoke a key: it answers 401 from now on (audited)."""
    with transaction(database_url) as session:
        revoke_key(session, cli_actor(), tenant_id, key_id)
    click.echo(f"key/{key_id} revoked")
