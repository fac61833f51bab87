"""``facegate usage export``: usage records as CloudEvents JSON/NDJSON or CSV (honours
FACEGATE_DATABASE_URL), for a billing system (OpenMeter, Lago) or a spreadsheet."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from facegate.cli.common import database_option, load_settings, transaction
from facegate.observability.timeparams import window
from facegate.usage.export import export_lines
from facegate.usage.repository import UsageRepository


@click.group()
def usage() -> None:
    """Usage metering (one record per finished job)."""


@usage.command("export")
@click.option("--from", "start", type=click.DateTime(), default=None, help="Start (UTC).")
@click.option("--to", "end", type=click.DateTime(), default=None, help="End, exclusive (UTC).")
@click.option("--tenant", "tenant_id", default=None, help="Only this tenant (default: all).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "ndjson", "csv"]),
    default="ndjson",
    show_default=True,
    help="CloudEvents as a JSON array or one per line, or CSV.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="File.")
@database_option
def export(
    start: datetime | None,
    end: datetime | None,
    tenant_id: str | None,
    fmt: str,
    output: str | None,
    database_url: str | None,
) -> None:
    """Write the usage records finished in [--from, --to)."""
    start, end = window(start, end)
    source = load_settings(database_url).usage_event_source
    stream = open(output, "w", encoding="utf-8") if output else sys.stdout
    try:
        with transaction(database_url) as session:
            records = UsageRepository(session).iter_records(tenant_id, start, end)
            for chunk in export_lines(records, fmt, source):  # type: ignore[arg-type]
                stream.write(chunk)
    finally:
        if output:
            stream.close()
