"""cluster shape: worker heartbeats, device holding, queue-head index, NOTIFY on queued jobs

Revision ID: 0004_cluster
Revises: 0003_observability
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_cluster"
down_revision: str | None = "0003_observability"
branch_labels = None
depends_on = None

# PostgreSQL wakes idle workers (LISTEN facegate_jobs) whenever a job becomes claimable:
# inserted as queued, or put back in the queue (reaper, graceful shutdown). A trigger sends
# it inside the very transaction that queues the job, so a worker is never woken for a job
# whose transaction then rolls back, and no code path can forget it.
NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION facegate_notify_queued() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('facegate_jobs', NEW.tenant_id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
NOTIFY_INSERT_TRIGGER = """
CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
FOR EACH ROW WHEN (NEW.status = 'queued') EXECUTE FUNCTION facegate_notify_queued()
"""
NOTIFY_REQUEUE_TRIGGER = """
CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.status = 'queued' AND OLD.status <> 'queued')
EXECUTE FUNCTION facegate_notify_queued()
"""

# The cluster claim in one round trip (facegate.jobs.claim_postgres explains the rule).
# PL/pgSQL takes a fresh snapshot for each statement of a VOLATILE function, so the claim
# statement, run after the tenant's advisory lock is granted, sees every earlier claim of
# that tenant: the lock is released only when its holder commits (an asynchronous commit
# still releases its locks only once the commit is visible to other transactions).
CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION facegate_claim(
    p_owner text, p_expires timestamptz, p_now timestamptz, p_uses_device boolean,
    p_served text[], p_logical_only boolean, p_namespace integer
) RETURNS TABLE (job_id uuid, job_tenant text, job_attempts integer) AS $$
DECLARE
    cand record;
BEGIN
    -- A claim lost in a database crash leaves its job queued; the worker's finish then
    -- fails its lease guard and the job runs again: the same at-least-once as an expired
    -- lease. So the claim need not wait for its WAL flush (the finish does).
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR cand IN
        SELECT c.id FROM (
            SELECT t.id, m.priority, h.created_at,
                (SELECT count(*) FROM jobs r
                  WHERE r.tenant_id = t.id AND r.status = 'running') AS running,
                (SELECT count(*) FROM jobs r WHERE r.tenant_id = t.id
                  AND r.status = 'running' AND r.holds_device) AS devices,
                p.max_concurrent_jobs, p.device_limit
            FROM tenants t
            JOIN policies p ON p.tenant_id = t.id
            CROSS JOIN LATERAL (
                SELECT max(j.priority) AS priority FROM jobs j
                WHERE j.tenant_id = t.id AND j.status = 'queued') m
            CROSS JOIN LATERAL (
                SELECT j.created_at FROM jobs j
                WHERE j.tenant_id = t.id AND j.status = 'queued' AND j.priority = m.priority
                ORDER BY j.created_at, j.id LIMIT 1) h
            WHERE t.status = 'active'
              AND (p_served IS NULL OR t.id = ANY (p_served))
              AND (NOT p_logical_only OR t.isolation = 'logical')
        ) c
        WHERE c.running < c.max_concurrent_jobs
          AND (NOT p_uses_device OR c.devices < c.device_limit)
        ORDER BY c.running, c.priority DESC, c.created_at, c.id
        LIMIT 8
    LOOP
        -- Busy: another worker is admitting this tenant's job; try the next tenant.
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(p_namespace, hashtext(cand.id));
        RETURN QUERY
        WITH running AS (
            SELECT count(*) AS n, count(*) FILTER (WHERE r.holds_device) AS devices
            FROM jobs r WHERE r.tenant_id = cand.id AND r.status = 'running'
        ), caps AS (
            SELECT p.max_concurrent_jobs, p.device_limit FROM policies p
            WHERE p.tenant_id = cand.id
        ), pick AS (
            SELECT j.id FROM jobs j, running, caps
            WHERE j.tenant_id = cand.id AND j.status = 'queued'
              AND j.priority = (SELECT max(q.priority) FROM jobs q
                                WHERE q.tenant_id = cand.id AND q.status = 'queued')
              AND running.n < caps.max_concurrent_jobs
              AND (NOT p_uses_device OR running.devices < caps.device_limit)
            ORDER BY j.created_at, j.id
            LIMIT 1
            FOR UPDATE OF j SKIP LOCKED
        )
        UPDATE jobs AS u SET status = 'running', attempts = u.attempts + 1,
            lease_owner = p_owner, lease_expires_at = p_expires, heartbeat_at = p_now,
            started_at = p_now, progress = 0, stage = 'claimed', holds_device = p_uses_device
        FROM pick WHERE u.id = pick.id
        RETURNING u.id, u.tenant_id::text, u.attempts;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$ LANGUAGE plpgsql VOLATILE
"""


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("holds_device", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_index(
        "ix_jobs_queued_head",
        "jobs",
        ["tenant_id", "priority", "created_at", "id"],
        sqlite_where=sa.text("status = 'queued'"),
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("tenants", sa.JSON(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("running_jobs", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(NOTIFY_FUNCTION)
        op.execute(NOTIFY_INSERT_TRIGGER)
        op.execute(NOTIFY_REQUEUE_TRIGGER)
        op.execute(CLAIM_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS jobs_notify_requeue ON jobs")
        op.execute("DROP TRIGGER IF EXISTS jobs_notify_insert ON jobs")
        op.execute("DROP FUNCTION IF EXISTS facegate_notify_queued()")
        op.execute(
            "DROP FUNCTION IF EXISTS facegate_claim("
            "text, timestamptz, timestamptz, boolean, text[], boolean, integer)"
        )
    op.drop_table("workers")
    op.drop_index("ix_jobs_queued_head", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("holds_device")
