"""job_templates: a tenant's saved pipeline, options and faces by name

Revision ID: 0016_job_templates
Revises: 0015_batches
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_job_templates"
down_revision: str | None = "0015_batches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_templates",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.String(1000), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("faces", sa.JSON(), nullable=False),
        sa.Column("mapping", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_job_templates_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_templates")),
        sa.UniqueConstraint("tenant_id", "name", name="uq_job_templates_tenant_name"),
    )
    op.create_index("ix_job_templates_tenant_created", "job_templates", ["tenant_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_job_templates_tenant_created", table_name="job_templates")
    op.drop_table("job_templates")
