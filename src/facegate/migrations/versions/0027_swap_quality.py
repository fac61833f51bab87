"""swap quality: jobs.quality (the quality report of each swapped face, engine.report) and
policies.weak_swap (what a swap the recogniser does not read as the source does: keep,
untouched or fail)

Revision ID: 0027_swap_quality
Revises: 0026_live_streams
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_swap_quality"
down_revision: str | None = "0026_live_streams"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("quality", sa.JSON(), nullable=True))
    op.add_column(
        "policies",
        sa.Column("weak_swap", sa.String(16), nullable=False, server_default="keep"),
    )


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("weak_swap")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("quality")
