"""live_streams: each live stream with its heartbeat, so a stream whose process died is
ended (usage as of its last heartbeat, stream.end) by another process (facegate.streams)

Revision ID: 0028_live_stream_heartbeats
Revises: 0027_swap_quality
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_live_stream_heartbeats"
down_revision: str | None = "0027_swap_quality"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_streams",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.String(40), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_live_streams_open", "live_streams", ["ended_at", "heartbeat_at"])
    op.create_index("ix_live_streams_tenant", "live_streams", ["tenant_id", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_live_streams_tenant", table_name="live_streams")
    op.drop_index("ix_live_streams_open", table_name="live_streams")
    op.drop_table("live_streams")
