"""takedown cases, their matches, removals and blocks; tenants.erased_at (the tombstone of
an erased tenant)

Revision ID: 0024_takedown
Revises: 0023_scheduling
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_takedown"
down_revision: str | None = "0023_scheduling"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "takedown_cases",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(63), nullable=True),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("report_id", sa.String(32), nullable=True),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("image_phash", sa.String(16), nullable=True),
        sa.Column("probe", sa.LargeBinary(), nullable=True),
        sa.Column("opened_by", sa.String(200), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_by", sa.String(200), nullable=True),
    )
    op.create_index(
        "ix_takedown_cases_tenant_reported", "takedown_cases", ["tenant_id", "reported_at"]
    )
    op.create_index("ix_takedown_cases_report_id", "takedown_cases", ["report_id"])
    op.create_table(
        "takedown_matches",
        sa.Column("case_id", sa.String(32), primary_key=True),
        sa.Column("item_id", sa.Uuid(), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("distance", sa.Float(), nullable=False),
    )
    op.create_index("ix_takedown_matches_tenant_id", "takedown_matches", ["tenant_id"])
    op.create_table(
        "takedown_removals",
        sa.Column("job_id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("case_id", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_takedown_removals_tenant_id", "takedown_removals", ["tenant_id"])
    op.create_table(
        "takedown_blocks",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("case_id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=True),
        sa.Column("descriptor", sa.LargeBinary(), nullable=True),
        sa.Column("image_phash", sa.String(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_takedown_blocks_case_id", "takedown_blocks", ["case_id"])
    op.create_index("ix_takedown_blocks_tenant_id", "takedown_blocks", ["tenant_id"])


def downgrade() -> None:
    for table in ("takedown_blocks", "takedown_removals", "takedown_matches", "takedown_cases"):
        op.drop_table(table)
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("erased_at")
