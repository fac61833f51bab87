"""webhooks: the tenant's endpoints, the outbox of job events (filled by a trigger on jobs)
and the deliveries with their log

Revision ID: 0013_webhooks
Revises: 0012_disclosure_label
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_webhooks"
down_revision: str | None = "0012_disclosure_label"
branch_labels = None
depends_on = None

TERMINAL = "('succeeded', 'failed', 'cancelled')"
# A job reaching a terminal status writes one event row in the transaction that finished
# it, whichever code path did (worker, cancel, reaper) — only when its tenant has an
# enabled endpoint, so tenants without webhooks pay nothing but the EXISTS probe.
WANTED = (
    "EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = NEW.tenant_id AND e.enabled)"
)
POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION facegate_job_webhook_event() RETURNS trigger AS $$
BEGIN
    IF {WANTED} THEN
        INSERT INTO webhook_events (tenant_id, job_id, event_type)
        VALUES (NEW.tenant_id, NEW.id, 'job.' || NEW.status);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
WHEN = f"NEW.status IN {TERMINAL} AND OLD.status NOT IN {TERMINAL}"


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("event_types", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(100), nullable=False),
        sa.Column("previous_secret", sa.String(100), nullable=True),
        sa.Column("previous_secret_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_webhook_endpoints_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_index("ix_webhook_endpoints_tenant_id", "webhook_endpoints", ["tenant_id"])
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_events")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=True),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(300), nullable=True),
        sa.Column("attempt_log", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_webhook_deliveries_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_due", "webhook_deliveries", ["status", "next_attempt_at"]
    )
    op.create_index(
        "ix_webhook_deliveries_tenant_created", "webhook_deliveries", ["tenant_id", "created_at"]
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION)
        op.execute(
            "CREATE TRIGGER jobs_webhook_event AFTER UPDATE OF status ON jobs FOR EACH ROW "
            f"WHEN ({WHEN}) EXECUTE FUNCTION facegate_job_webhook_event()"
        )
    else:
        op.execute(
            "CREATE TRIGGER jobs_webhook_event AFTER UPDATE OF status ON jobs "
            f"WHEN {WHEN} AND {WANTED} BEGIN "
            "INSERT INTO webhook_events (tenant_id, job_id, event_type) "
            "VALUES (NEW.tenant_id, NEW.id, 'job.' || NEW.status); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS jobs_webhook_event ON jobs")
        op.execute("DROP FUNCTION IF EXISTS facegate_job_webhook_event()")
    else:
        op.execute("DROP TRIGGER IF EXISTS jobs_webhook_event")
    op.drop_index("ix_webhook_deliveries_tenant_created", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_events")
    op.drop_index("ix_webhook_endpoints_tenant_id", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
