"""face library: library_faces (a tenant's saved source faces; their images are stored
objects of kind "faces", which the retention purge leaves alone)

Revision ID: 0014_face_library
Revises: 0013_webhooks
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_face_library"
down_revision: str | None = "0013_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "library_faces",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("image_sha256", sa.String(64), nullable=False),
        sa.Column("image_content_type", sa.String(64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("face_index", sa.Integer(), nullable=False),
        sa.Column("face_order", sa.String(16), nullable=False),
        sa.Column("face_box", sa.JSON(), nullable=False),
        sa.Column("embedding", sa.JSON(), nullable=False),
        sa.Column("embedding_kind", sa.String(32), nullable=False),
        sa.Column("consent", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_library_faces_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_library_faces")),
    )
    op.create_index("ix_library_faces_tenant_created", "library_faces", ["tenant_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_library_faces_tenant_created", table_name="library_faces")
    op.drop_table("library_faces")
