"""moderation on for every tenant: policies.moderation defaults to true, and is set on the
existing rows (until now the flag was stored but never read, so no tenant was moderated
whatever it said; from this revision an admin turns it off for a tenant explicitly)

Revision ID: 0008_moderation_on
Revises: 0007_claim_head
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_moderation_on"
down_revision: str | None = "0007_claim_head"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("UPDATE policies SET moderation = :on").bindparams(on=True))
    with op.batch_alter_table("policies") as batch:
        batch.alter_column("moderation", server_default=sa.true())


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.alter_column("moderation", server_default=None)
