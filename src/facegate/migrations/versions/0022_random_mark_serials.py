"""provenance_marks.serial drawn at random (no sequence); provenance_reports: one row per
report case (de-duplication and the per-reporter rate of POST /v1/reports)

Revision ID: 0022_random_mark_serials
Revises: 0019_library_face_turned
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_random_mark_serials"
down_revision: str | None = "0019_library_face_turned"
branch_labels = None
depends_on = None

_SEQUENCE = "provenance_marks_serial_seq"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # The serial was a SERIAL: a sequence counting jobs. The marker now draws it at
        # random (MarkRepository.issue); nothing may number it in order again. SQLite's
        # INTEGER PRIMARY KEY (no AUTOINCREMENT) keeps no counter of its own.
        op.execute("ALTER TABLE provenance_marks ALTER COLUMN serial DROP DEFAULT")
        op.execute(f"DROP SEQUENCE IF EXISTS {_SEQUENCE}")
    op.create_table(
        "provenance_reports",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("reporter", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(80), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("reporter", "subject", "bucket", name="uq_provenance_reports_case"),
    )
    op.create_index(
        "ix_provenance_reports_reporter_created", "provenance_reports", ["reporter", "created_at"]
    )
    op.create_index(
        "ix_provenance_reports_subject_bucket", "provenance_reports", ["subject", "bucket"]
    )


def downgrade() -> None:
    op.drop_index("ix_provenance_reports_subject_bucket", table_name="provenance_reports")
    op.drop_index("ix_provenance_reports_reporter_created", table_name="provenance_reports")
    op.drop_table("provenance_reports")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE SEQUENCE {_SEQUENCE} OWNED BY provenance_marks.serial")
        op.execute(
            f"SELECT setval('{_SEQUENCE}', (SELECT COALESCE(MAX(serial), 0) + 1 "
            "FROM provenance_marks), false)"
        )
        op.execute(
            f"ALTER TABLE provenance_marks ALTER COLUMN serial SET DEFAULT nextval('{_SEQUENCE}')"
        )
