"""policies.disclosure_label: the visible "AI-generated" label of a tenant's results (off)

Revision ID: 0012_disclosure_label
Revises: 0011_request_fingerprint
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_disclosure_label"
down_revision: str | None = "0011_request_fingerprint"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, no default: every existing tenant keeps no visible label (off by default).
    op.add_column("policies", sa.Column("disclosure_label", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("disclosure_label")
