"""batches: one submission of one source x many targets; each item is a job

Revision ID: 0015_batches
Revises: 0014_face_library
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_batches"
down_revision: str | None = "0014_face_library"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.Column("request_sha256", sa.String(64), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_batches_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_batches_tenant_idempotency"),
    )
    op.create_index("ix_batches_tenant_id", "batches", ["tenant_id"])
    op.create_table(
        "batch_items",
        sa.Column("batch_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["batches.id"],
            name=op.f("fk_batch_items_batch_id_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("batch_id", "position", name=op.f("pk_batch_items")),
        sa.UniqueConstraint("job_id", name=op.f("uq_batch_items_job_id")),
    )


def downgrade() -> None:
    op.drop_table("batch_items")
    op.drop_index("ix_batches_tenant_id", table_name="batches")
    op.drop_table("batches")
