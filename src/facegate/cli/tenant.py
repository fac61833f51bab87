"""``facegate tenant apply|list|show|suspend|resume|export|erase``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from facegate.cli.common import (
    cli_actor,
    database_option,
    load_settings,
    open_database,
    transaction,
)
from facegate.database import SessionFactory, session_scope
from facegate.errors import ServiceError
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.takedown.erasure import erase_tenant
from facegate.takedown.export import export_tenant
from facegate.takedown.runtime import keys_for, object_store_for, redis_keys_for
from facegate.tenancy.apply import ApplyError, apply_file, watch_changes
from facegate.tenancy.audited import set_status
from facegate.tenancy.schemas import TenantOut
from facegate.tenancy.service import TenancyService


@click.group()
def tenant() -> None:
    """Manage tenants (honours FACEGATE_DATABASE_URL)."""


@tenant.command("apply")
@click.option(
    "-f",
    "--file",
    "path",
    type=click.Path(path_type=Path),
    required=True,
    help="YAML/JSON file of tenant documents.",
)
@click.option("--watch", is_flag=True, help="Keep running; re-apply when the file changes.")
@click.option(
    "--interval",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between checks with --watch.",
)
@database_option
def apply(path: Path, watch: bool, interval: float, database_url: str | None) -> None:
    """Create or update tenants declaratively (like kubectl apply); each change is audited
    with the actor cli:<os user>."""
    with open_database(load_settings(database_url)) as factory:
        if not watch:
            _apply_once(factory, path, fail=True)
            return
        click.echo(f"watching {path} every {interval}s (Ctrl-C to stop)")
        try:
            for _ in watch_changes(path, interval=interval):
                _apply_once(factory, path, fail=False)
        except KeyboardInterrupt:
            pass


def _apply_once(factory: SessionFactory, path: Path, *, fail: bool) -> None:
    try:
        results = apply_file(factory, path, cli_actor())
    except ApplyError as exc:
        if fail:
            raise click.ClickException(str(exc)) from exc
        # Watching: a bad edit must not stop the loop; the last good state stays applied.
        click.echo(f"error: {exc} (keeping the previous configuration)", err=True)
        return
    for result in results:
        click.echo(f"tenant/{result.tenant_id} {result.outcome}")


@tenant.command("list")
@database_option
def list_tenants(database_url: str | None) -> None:
    with transaction(database_url) as session:
        for item in TenancyService(session).list_tenants():
            policy = item.policy
            if policy is None:  # a tombstone
                click.echo(f"{item.id:<24} {item.status:<10} erased_at={item.erased_at}")
                continue
            click.echo(
                f"{item.id:<24} {item.status:<10} {item.isolation:<9} "
                f"concurrent={policy.max_concurrent_jobs} devices={policy.device_limit} "
                f"resolution={policy.max_output_resolution}"
            )


@tenant.command("show")
@click.argument("tenant_id")
@database_option
def show(tenant_id: str, database_url: str | None) -> None:
    """Print a tenant and its policy as JSON."""
    with transaction(database_url) as session:
        found = TenancyService(session).get_tenant(tenant_id)
        click.echo(json.dumps(TenantOut.model_validate(found).model_dump(mode="json"), indent=2))


@tenant.command("suspend")
@click.argument("tenant_id")
@database_option
def suspend(tenant_id: str, database_url: str | None) -> None:
    """Suspend a tenant: its keys and tokens answer 401 until resumed (audited)."""
    with transaction(database_url) as session:
        set_status(session, cli_actor(), tenant_id, "suspended")
    click.echo(f"tenant/{tenant_id} suspended")


@tenant.command("resume")
@click.argument("tenant_id")
@database_option
def resume(tenant_id: str, database_url: str | None) -> None:
    """Resume a suspended tenant (audited)."""
    with transaction(database_url) as session:
        set_status(session, cli_actor(), tenant_id, "active")
    click.echo(f"tenant/{tenant_id} active")


@tenant.command("export")
@click.argument("tenant_id")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="The ZIP to write."
)
@database_option
def export(tenant_id: str, output: Path, database_url: str | None) -> None:
    """Write the tenant's jobs, results, library, templates, usage, audit trail and policy
    to one ZIP (format: docs/takedown.md); audited as tenant.export."""
    settings = load_settings(database_url)
    store, keys = object_store_for(settings), keys_for(settings)
    with open_database(settings) as sessions:
        try:
            with session_scope(sessions, read_only=True) as session, output.open("wb") as out:
                manifest = export_tenant(session, store, keys, tenant_id, out)
        except ServiceError as exc:
            output.unlink(missing_ok=True)
            raise click.ClickException(exc.detail) from exc
        with session_scope(sessions) as session:
            record_audit(
                session,
                cli_actor(),
                audit.TENANT_EXPORT,
                f"tenant:{tenant_id}",
                {"files": len(manifest["files"])},
                tenant_id=tenant_id,
            )
    click.echo(f"tenant/{tenant_id} exported to {output} ({len(manifest['files'])} files)")


@tenant.command("erase")
@click.argument("tenant_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "-o",
    "--receipt",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the signed erasure receipt here (default: print it).",
)
@database_option
def erase(tenant_id: str, yes: bool, receipt: Path | None, database_url: str | None) -> None:
    """Erase the tenant: every object under its storage prefix, every row carrying its id,
    its Redis keys, API keys and webhook secrets. Keeps a tombstone, its audit trail and its
    usage records (docs/takedown.md). Prints a signed receipt (`facegate receipt verify`)."""
    if not yes:
        click.confirm(
            f"Erase tenant {tenant_id!r} and all its data? This cannot be undone", abort=True
        )
    settings = load_settings(database_url)
    store, keys = object_store_for(settings), keys_for(settings)
    with open_database(settings) as sessions:
        try:
            document = erase_tenant(
                sessions, store, keys, tenant_id, cli_actor(), redis=redis_keys_for(settings)
            )
        except ServiceError as exc:
            raise click.ClickException(exc.detail) from exc
    text = json.dumps(document, indent=2, sort_keys=True)
    if receipt is None:
        click.echo(text)
    else:
        receipt.write_text(text + "\n")
    scan = document["statement"]["scan"]
    click.echo(
        f"tenant/{tenant_id} erased: {scan['objects_left']} objects and "
        f"{sum(scan['rows_left'].values())} rows left",
        err=receipt is None,
    )
