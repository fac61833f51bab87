"""``facegate bans list|unban``: the IP ban list of the cluster shape (Redis), from the
command line. The embedded shape keeps its bans in the server process: use
``DELETE /v1/admin/bans/{ip}`` there."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime

import click

from facegate.cli.common import cli_actor, database_option, load_settings, transaction
from facegate.observability.audit import IP_UNBAN, record_audit
from facegate.ratelimit.bans import BanStore
from facegate.ratelimit.gateway import Gateway


def _bans(database_url: str | None) -> BanStore:
    settings = load_settings(database_url)
    if not settings.redis_url or settings.redis_url.startswith("memory://"):
        raise click.ClickException(
            "bans are shared through Redis (FACEGATE_REDIS_URL); without it they live in the "
            "server process: DELETE /v1/admin/bans/{ip} with an admin key"
        )
    return Gateway.from_settings(settings).bans


@click.group()
def bans() -> None:
    """IPs banned for repeated failed authentications (honours FACEGATE_REDIS_URL)."""


@bans.command("list")
@database_option
def list_bans(database_url: str | None) -> None:
    for ban in _bans(database_url).list_bans():
        until = datetime.fromtimestamp(ban.expires_at, UTC).isoformat(timespec="seconds")
        click.echo(f"{ban.ip:<40} strikes={ban.strikes} until={until}")


@bans.command("unban")
@click.argument("ip")
@click.option("--forget", is_flag=True, help="Also forget past bans (the next starts short).")
@database_option
def unban(ip: str, forget: bool, database_url: str | None) -> None:
    """Lift the ban of IP (audited as ip.unban with the actor cli:<os user>)."""
    try:
        address = str(ipaddress.ip_address(ip))
    except ValueError:
        raise click.BadParameter(f"{ip!r} is not an IP address", param_hint="IP") from None
    store = _bans(database_url)
    with transaction(database_url) as session:
        if not store.unban(address, forget=forget):
            raise click.ClickException(f"{address} is not banned")
        record_audit(session, cli_actor(), IP_UNBAN, f"ip:{address}", {"forget": forget})
    click.echo(f"ip/{address} unbanned")
