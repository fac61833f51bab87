"""usage records and the audit trail

Revision ID: 0003_observability
Revises: 0002_jobs_storage
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_observability"
down_revision: str | None = "0002_jobs_storage"
branch_labels = None
depends_on = None

GENESIS_HASH = "0" * 64


def _ts(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "usage_records",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("device", sa.String(16), nullable=False),
        sa.Column("compute_seconds", sa.Float(), nullable=False),
        sa.Column("duration_seconds", sa.Float(), nullable=False),
        sa.Column("queue_wait_seconds", sa.Float(), nullable=False),
        sa.Column("frames", sa.Integer(), nullable=False),
        sa.Column("input_pixels", sa.BigInteger(), nullable=False),
        sa.Column("output_pixels", sa.BigInteger(), nullable=False),
        sa.Column("input_bytes", sa.BigInteger(), nullable=False),
        sa.Column("output_bytes", sa.BigInteger(), nullable=False),
        sa.Column("processors", sa.JSON(), nullable=False),
        sa.Column("model_variant", sa.String(200), nullable=True),
        _ts("started_at"),
        _ts("finished_at", nullable=False),
        _ts("recorded_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_records")),
        sa.UniqueConstraint("job_id", name="uq_usage_records_job_id"),
    )
    op.create_index(
        "ix_usage_records_tenant_finished", "usage_records", ["tenant_id", "finished_at"]
    )
    op.create_index("ix_usage_records_finished_at", "usage_records", ["finished_at"])

    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        _ts("created_at", nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_events")),
    )
    op.create_index("ix_audit_events_tenant_seq", "audit_events", ["tenant_id", "seq"])
    op.create_index("ix_audit_events_created_at", "audit_events", ["created_at"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_head")),
    )
    # The lock row exists from the start, so the first two appends also serialise on it.
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS_HASH}])


def downgrade() -> None:
    op.drop_table("audit_head")
    op.drop_index("ix_audit_events_created_at", table_name="audit_events")
    op.drop_index("ix_audit_events_tenant_seq", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index("ix_usage_records_finished_at", table_name="usage_records")
    op.drop_index("ix_usage_records_tenant_finished", table_name="usage_records")
    op.drop_table("usage_records")
