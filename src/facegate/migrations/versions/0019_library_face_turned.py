"""library_faces.turned: how far a saved face is turned from the camera (degrees), so the
library can say which faces the built-in swapper refuses

Revision ID: 0019_library_face_turned
Revises: 0018_claim_batch_by_key
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_library_face_turned"
down_revision: str | None = "0018_claim_batch_by_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, no default: faces saved before keep an unknown angle (their image is not
    # analysed again here).
    op.add_column("library_faces", sa.Column("turned", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("library_faces") as batch:
        batch.drop_column("turned")
