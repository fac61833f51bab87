"""jobs.progress_detail: the rate and time left of a running video job (frames, fps, ETA)

Revision ID: 0005_job_progress_detail
Revises: 0004_cluster
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_job_progress_detail"
down_revision: str | None = "0004_cluster"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both dialects (no table rebuild, triggers and indexes kept).
    op.add_column("jobs", sa.Column("progress_detail", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("progress_detail")
