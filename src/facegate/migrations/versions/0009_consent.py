"""consent per source face: policies.require_consent, jobs.consent (the job's references),
and the append-only consent_attestations table (triggers refuse UPDATE and DELETE)

Revision ID: 0009_consent
Revises: 0008_moderation_on
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_consent"
down_revision: str | None = "0008_moderation_on"
branch_labels = None
depends_on = None

TABLE = "consent_attestations"
MESSAGE = "consent_attestations is append-only"

POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION facegate_consent_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{MESSAGE}';
END;
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    op.add_column(
        "policies",
        sa.Column("require_consent", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("jobs", sa.Column("consent", sa.JSON(), nullable=True))
    op.create_table(
        TABLE,
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(63), nullable=False),
        sa.Column("source_sha256", sa.String(64), nullable=False),
        sa.Column("attested_by", sa.String(200), nullable=False),
        sa.Column("statement_version", sa.String(64), nullable=False),
        sa.Column("attested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(200), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_consent_attestations")),
    )
    op.create_index("ix_consent_attestations_tenant_source", TABLE, ["tenant_id", "source_sha256"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION)
        op.execute(
            f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION facegate_consent_append_only()"
        )
    else:
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {TABLE}_no_{verb.lower()} BEFORE {verb} ON {TABLE} "
                f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}")
        op.execute("DROP FUNCTION IF EXISTS facegate_consent_append_only()")
    op.drop_index("ix_consent_attestations_tenant_source", table_name=TABLE)
    op.drop_table(TABLE)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("consent")
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("require_consent")
