"""jobs.request_sha256: the fingerprint of a submission's content, so a reused
Idempotency-Key with a different request is refused (422) instead of silently answering
the first job

Revision ID: 0011_request_fingerprint
Revises: 0010_provenance_marks
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_request_fingerprint"
down_revision: str | None = "0010_provenance_marks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both dialects (no table rebuild, triggers and indexes kept).
    # Jobs from before have none: their key is honoured without the comparison.
    op.add_column("jobs", sa.Column("request_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("request_sha256")
