"""``facegate jobs list``: the operator's view of the queue (honours FACEGATE_DATABASE_URL)."""

from __future__ import annotations

import click

from facegate.cli.common import database_option, transaction
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import JOB_STATUSES


@click.group()
def jobs() -> None:
    """Inspect jobs of every tenant."""


@jobs.command("list")
@click.option("--tenant", "tenant_id", default=None, help="Only this tenant's jobs.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(JOB_STATUSES),
    help="Only jobs in this status; repeat for several.",
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@database_option
def list_jobs(
    tenant_id: str | None, statuses: tuple[str, ...], limit: int, database_url: str | None
) -> None:
    """Newest jobs first: id, tenant, status, progress, stage, attempts, created, error."""
    with transaction(database_url) as session:
        rows = JobRepository(session).list_for_operator(
            tenant_id=tenant_id, statuses=statuses, limit=limit
        )
        click.echo(
            f"{'id':36}  {'tenant':20}  {'status':9}  {'prog':>4}  {'stage':10}  att  "
            f"{'created':19}  error"
        )
        for job in rows:
            error = f"{job.error_type}: {job.error_detail}" if job.error_type else ""
            click.echo(
                f"{job.id!s:36}  {job.tenant_id:20}  {job.status:9}  "
                f"{round(job.progress * 100):>3}%  {(job.stage or '')[:10]:10}  "
                f"{job.attempts:>3}  {job.created_at:%Y-%m-%d %H:%M:%S}  {error}"
            )
