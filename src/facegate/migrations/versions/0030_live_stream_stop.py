"""live stream stop: ``live_streams.stop_requested_at``, so a ``DELETE /v1/streams/{id}``
answered by an API process that does not run the stream reaches the one that does (it
reads the row with its credential checks and ends the stream, ``deleted``)

Revision ID: 0030_live_stream_stop
Revises: 0029_claim_first_start
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030_live_stream_stop"
down_revision: str | None = "0029_claim_first_start"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("live_streams") as batch:
        batch.add_column(sa.Column("stop_requested_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("live_streams") as batch:
        batch.drop_column("stop_requested_at")
