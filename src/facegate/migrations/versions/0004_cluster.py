"""cluster shape: worker heartbeats, device holding, queue-head index, NOTIFY on queued jobs

Revision ID: 0004_cluster
Revises: 0003_observability
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_cluster"
down_revision: str | None = "0003_observability"
branch_labels = None
depends_on = None

# PostgreSQL wakes idle workers (LISTEN facegate_jobs) whenever a job becomes claimable:
# inserted as queued, or put back in the queue (reaper, graceful shutdown). A trigger sends
# it inside the very transaction that queues the job, so a worker is never woken for a job
# whose transaction then rolls back, and no code path can forget it.
NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION facegate_notify_queued() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('facegate_jobs', NEW.tenant_id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
NOTIFY_INSERT_TRIGGER = """
CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
FOR EACH ROW WHEN (NEW.status = 'queued') EXECUTE FUNCTION facegate_notify_queued()
"""
NOTIFY_REQUEUE_TRIGGER = """
CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.status = 'queued' AND OLD.status <> 'queued')
EXECUTE FUNCTION facegate_notify_queued()
"""


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("holds_device", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_index(
        "ix_jobs_queued_head",
        "jobs",
        ["tenant_id", "priority", "created_at", "id"],
        sqlite_where=sa.text("status = 'queued'"),
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("tenants", sa.JSON(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("running_jobs", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(NOTIFY_FUNCTION)
        op.execute(NOTIFY_INSERT_TRIGGER)
        op.execute(NOTIFY_REQUEUE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS jobs_notify_requeue ON jobs")
        op.execute("DROP TRIGGER IF EXISTS jobs_notify_insert ON jobs")
        op.execute("DROP FUNCTION IF EXISTS facegate_notify_queued()")
    op.drop_table("workers")
    op.drop_index("ix_jobs_queued_head", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("holds_device")
