"""``facegate usage export``: usage records as CloudEvents JSON/NDJSON or CSV (honours
FACEGATE_DATABASE_URL), for a billing system (OpenMeter, Lago) or a spreadsheet."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime

import click

from facegate.cli.common import database_option, load_settings, transaction
from facegate.observability.timeparams import window
from facegate.usage.export import export_lines
from facegate.usage.repository import UsageRepository
from facegate.usage.tables import UsageRecord


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
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    show_default=True,
    help="File to write; - is standard output.",
)
@database_option
def export(
    start: datetime | None,
    end: datetime | None,
    tenant_id: str | None,
    fmt: str,
    output: str,
    database_url: str | None,
) -> None:
    """Write the usage records finished in [--from, --to); the count goes to stderr."""
    if start is not None and end is not None and end <= start:
        raise click.BadParameter("--to must be after --from", param_hint="--to")
    start, end = window(start, end)
    source = load_settings(database_url).usage_event_source
    counted = _Counter()
    try:
        with click.open_file(output, "w", encoding="utf-8", atomic=output != "-") as stream:
            with transaction(database_url) as session:
                records = UsageRepository(session).iter_records(tenant_id, start, end)
                for chunk in export_lines(counted(records), fmt, source):  # type: ignore[arg-type]
                    stream.write(chunk)
            stream.flush()
    except BrokenPipeError:
        if output != "-":
            raise
        # The reader stopped early (`... | head -3`): it has what it wanted. Standard output
        # goes to /dev/null so the interpreter's last flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return
    where = "standard output" if output == "-" else output
    scope = f"tenant {tenant_id}" if tenant_id else "all tenants"
    span = f"from {_when(start, 'the first')} to {_when(end, 'now')}"
    if counted.n:
        click.echo(f"{counted.n} usage records of {scope} {span} -> {where}", err=True)
    else:
        click.echo(
            f"no usage records of {scope} {span}: wrote an empty {fmt} document to {where}",
            err=True,
        )


def _when(moment: datetime | None, otherwise: str) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else otherwise


class _Counter:
    """Counts the records as the export streams them (never holds them in memory)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, records: Iterable[UsageRecord]) -> Iterator[UsageRecord]:
        for record in records:
            self.n += 1
            yield record
