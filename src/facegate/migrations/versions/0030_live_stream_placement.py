"""live stream placement: ``live_streams.stop_requested_at``, so a ``DELETE
/v1/streams/{id}`` answered by an API process that does not run the stream reaches the one
that does (it reads the row every second and ends the stream, ``deleted``);
``live_streams.stats``, the stream's figures (fps, latency, frames) as of its last
heartbeat, so any process shows them; and ``stream_nodes``, each API process's address
and room for more streams, so a process that has none hands a start to one that has
(facegate.streams.placement)

Revision ID: 0030_live_stream_placement
Revises: 0029_claim_first_start
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030_live_stream_placement"
down_revision: str | None = "0029_claim_first_start"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("live_streams") as batch:
        batch.add_column(sa.Column("stop_requested_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("stats", sa.JSON(), nullable=True))
    op.create_table(
        "stream_nodes",
        sa.Column("url", sa.String(500), nullable=False),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("room", sa.Integer(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("url"),
    )


def downgrade() -> None:
    op.drop_table("stream_nodes")
    with op.batch_alter_table("live_streams") as batch:
        batch.drop_column("stats")
        batch.drop_column("stop_requested_at")
