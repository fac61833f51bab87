"""policies.max_concurrent_streams and max_stream_seconds: live streams (facegate.streams)

Revision ID: 0026_live_streams
Revises: 0025_claim_memory
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_live_streams"
down_revision: str | None = "0025_claim_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every existing tenant gets live off (0 streams): an operator turns it on per plan.
    op.add_column(
        "policies",
        sa.Column("max_concurrent_streams", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column(
        "policies",
        sa.Column("max_stream_seconds", sa.Integer(), nullable=False, server_default="900"),
    )


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("max_stream_seconds")
        batch.drop_column("max_concurrent_streams")
