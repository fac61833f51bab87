"""jobs and the stored-object ledger

Revision ID: 0002_jobs_storage
Revises: 0001_tenancy
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_jobs_storage"
down_revision: str | None = "0001_tenancy"
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("output_content_type", sa.String(64), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        _ts("lease_expires_at"),
        _ts("heartbeat_at"),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("stage", sa.String(64), nullable=True),
        sa.Column("error_type", sa.String(64), nullable=True),
        sa.Column("error_detail", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        _ts("created_at", nullable=False),
        _ts("started_at"),
        _ts("finished_at"),
        sa.Column("result_width", sa.Integer(), nullable=True),
        sa.Column("result_height", sa.Integer(), nullable=True),
        sa.Column("result_bytes", sa.BigInteger(), nullable=True),
        sa.Column("result_pixels", sa.BigInteger(), nullable=True),
        sa.Column("result_frames", sa.Integer(), nullable=True),
        sa.Column("compute_seconds", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_jobs_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idempotency"),
    )
    op.create_index("ix_jobs_status_priority_created", "jobs", ["status", "priority", "created_at"])
    op.create_index("ix_jobs_tenant_created", "jobs", ["tenant_id", "created_at"])
    op.create_index("ix_jobs_tenant_status", "jobs", ["tenant_id", "status"])

    op.create_table(
        "stored_objects",
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("content_type", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        _ts("created_at", nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_stored_objects")),
    )
    op.create_index(
        "ix_stored_objects_tenant_created", "stored_objects", ["tenant_id", "created_at"]
    )
    op.create_index(op.f("ix_stored_objects_job_id"), "stored_objects", ["job_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_stored_objects_job_id"), table_name="stored_objects")
    op.drop_index("ix_stored_objects_tenant_created", table_name="stored_objects")
    op.drop_table("stored_objects")
    op.drop_index("ix_jobs_tenant_status", table_name="jobs")
    op.drop_index("ix_jobs_tenant_created", table_name="jobs")
    op.drop_index("ix_jobs_status_priority_created", table_name="jobs")
    op.drop_table("jobs")
