"""provenance_marks: the serial (watermark) and opaque reference (C2PA) of each marked job

Revision ID: 0010_provenance_marks
Revises: 0009_consent
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_provenance_marks"
down_revision: str | None = "0009_consent"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provenance_marks",
        sa.Column("serial", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("reference", sa.String(32), nullable=False, unique=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_provenance_marks_tenant_id", "provenance_marks", ["tenant_id"])


def downgrade() -> None:
    op.drop_index("ix_provenance_marks_tenant_id", table_name="provenance_marks")
    op.drop_table("provenance_marks")
