"""tenant models: policy flag allow_custom_models, tag pins / A/B splits, jobs.models_used

Revision ID: 0006_tenant_models
Revises: 0005_job_progress_detail
Create Date: 2025-01-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_tenant_models"
down_revision: str | None = "0005_job_progress_detail"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs with server defaults: existing tenants keep custom models off and
    # no pins (the newest installed tag), exactly what they had before.
    op.add_column(
        "policies",
        sa.Column("allow_custom_models", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("policies", sa.Column("model_tag", sa.String(100), nullable=True))
    op.add_column(
        "policies", sa.Column("model_pins", sa.JSON(), nullable=False, server_default="{}")
    )
    op.add_column(
        "policies", sa.Column("model_splits", sa.JSON(), nullable=False, server_default="{}")
    )
    op.add_column("jobs", sa.Column("models_used", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("models_used")
    with op.batch_alter_table("policies") as batch:
        for column in ("model_splits", "model_pins", "model_tag", "allow_custom_models"):
            batch.drop_column(column)
