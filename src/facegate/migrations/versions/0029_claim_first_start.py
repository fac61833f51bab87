"""claim first start: a claim keeps the job's ``started_at`` when it has one, so it is when a
worker first started the job. A segmented video's job is claimed again for its assembly, and
a job whose worker died is claimed again: both kept the last claim's time, which made a
segmented job's usage record (``duration_seconds``, ``queue_wait_seconds``) and the job
duration histogram measure the assembly alone. Same arguments and result as 0025.

The function's text is rendered by facegate.queue.postgres.claim_function_sql() and frozen
here; tests/jobs/test_fair_order.py fails when they differ.

Revision ID: 0029_claim_first_start
Revises: 0028_live_stream_heartbeats
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0029_claim_first_start"
down_revision: str | None = "0028_live_stream_heartbeats"
branch_labels = None
depends_on = None

CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION facegate_claim_batch(
    p_owner text, p_expires timestamptz, p_now timestamptz, p_uses_device boolean,
    p_served text[], p_logical_only boolean, p_namespace integer, p_limit integer,
    p_max_seconds double precision, p_memory_budget bigint
) RETURNS TABLE (job_id uuid, job_tenant text, job_attempts integer, job_memory bigint)
AS $$
DECLARE
    cand record;
    candidates text[] := '{}';
    locked text[] := '{}';
    busy text;
    other text;
    waited text := current_setting('lock_timeout');
BEGIN
    -- A claim lost in a database crash leaves its job queued; the worker's finish then
    -- fails its lease guard and the job runs again: the same at-least-once as an expired
    -- lease. So the claim need not wait for its WAL flush (the finish does).
    PERFORM set_config('synchronous_commit', 'off', true);
    -- The tenants in fair order of their queue heads. Only the first p_limit lockable ones
    -- can contribute to a batch of p_limit (each one's head precedes the next ones').
    FOR cand IN
        SELECT c.tenant_id FROM (
            SELECT t.id AS tenant_id, h.id, h.priority, h.created_at,
                (SELECT count(*) FROM jobs r WHERE r.tenant_id = t.id
                  AND r.status = 'running' AND r.lease_owner IS NOT NULL) AS running,
                CASE WHEN p_uses_device THEN (SELECT count(*) FROM jobs r WHERE r.tenant_id = t.id
                  AND r.status = 'running' AND r.holds_device) ELSE 0 END AS devices,
                coalesce(p.max_concurrent_jobs, 1) AS max_concurrent_jobs,
                coalesce(p.device_limit, 1) AS device_limit
            FROM tenants t
            LEFT JOIN policies p ON p.tenant_id = t.id
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.created_at FROM jobs j
                WHERE j.tenant_id = t.id AND j.status = 'queued'
                  AND (p_max_seconds IS NULL OR j.estimated_seconds <= p_max_seconds)
                ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1) h
            WHERE t.status = 'active'
              AND (p_served IS NULL OR t.id = ANY (p_served))
              AND (NOT p_logical_only OR t.isolation = 'logical')
        ) c
        WHERE c.running < c.max_concurrent_jobs
          AND (NOT p_uses_device OR c.devices < c.device_limit)
        ORDER BY c.running, c.priority DESC, c.created_at, c.id
    LOOP
        candidates := candidates || cand.tenant_id;
        IF pg_try_advisory_xact_lock(p_namespace, hashtext(cand.tenant_id)) THEN
            locked := locked || cand.tenant_id;
            EXIT WHEN cardinality(locked) >= p_limit;
        ELSIF busy IS NULL THEN
            busy := cand.tenant_id;
        END IF;
    END LOOP;
    IF cardinality(locked) = 0 THEN
        IF busy IS NULL THEN
            RETURN;  -- nothing claimable
        END IF;
        -- Every candidate is being admitted by another worker right now: wait (briefly)
        -- for the first one's claim to commit, then take whichever others are free again.
        BEGIN
            PERFORM set_config('lock_timeout', '250ms', true);
            PERFORM pg_advisory_xact_lock(p_namespace, hashtext(busy));
            PERFORM set_config('lock_timeout', waited, true);
        EXCEPTION WHEN lock_not_available THEN
            RETURN;
        END;
        locked := ARRAY[busy];
        FOREACH other IN ARRAY candidates LOOP
            EXIT WHEN cardinality(locked) >= p_limit;
            CONTINUE WHEN other = busy;
            IF pg_try_advisory_xact_lock(p_namespace, hashtext(other)) THEN
                locked := locked || other;
            END IF;
        END LOOP;
    END IF;
    -- Under the locks: recount each tenant's running jobs (every transition into running
    -- of a tenant happens under its lock), take at most its free slots of its queue, and
    -- merge the tenants' queues in fair order.
    RETURN QUERY
    WITH load AS MATERIALIZED (
        SELECT l.tenant_id,
            (SELECT count(*) FROM jobs r WHERE r.tenant_id = l.tenant_id
              AND r.status = 'running' AND r.lease_owner IS NOT NULL) AS running,
            CASE WHEN p_uses_device THEN (SELECT count(*) FROM jobs r
              WHERE r.tenant_id = l.tenant_id AND r.status = 'running' AND r.holds_device)
              ELSE 0 END AS devices,
            coalesce(p.max_concurrent_jobs, 1) AS max_concurrent_jobs,
            coalesce(p.device_limit, 1) AS device_limit
        FROM unnest(locked) AS l(tenant_id)
        LEFT JOIN policies p ON p.tenant_id = l.tenant_id
    ), queued AS (
        SELECT q.id, q.priority, q.created_at, q.memory_bytes,
            load.running + q.position - 1 AS running
        FROM load CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.created_at, coalesce(j.memory_bytes, 0) AS memory_bytes,
                row_number() OVER (ORDER BY j.priority DESC, j.created_at, j.id) AS position
            FROM jobs j WHERE j.tenant_id = load.tenant_id AND j.status = 'queued'
              AND (p_max_seconds IS NULL OR j.estimated_seconds <= p_max_seconds)
            ORDER BY j.priority DESC, j.created_at, j.id
            LIMIT greatest(0, least(p_limit, load.max_concurrent_jobs - load.running,
                CASE WHEN p_uses_device THEN load.device_limit - load.devices ELSE p_limit END))
        ) q
    ), first AS (
        -- The first p_limit in fair order, with the memory they need between them; the
        -- batch ends before the first job that would exceed the worker's budget.
        SELECT queued.*, sum(queued.memory_bytes) OVER (
            ORDER BY queued.running, queued.priority DESC, queued.created_at, queued.id
            ROWS UNBOUNDED PRECEDING) AS needed
        FROM queued
        ORDER BY queued.running, queued.priority DESC, queued.created_at, queued.id
        LIMIT p_limit
    ), chosen AS MATERIALIZED (
        SELECT first.* FROM first
        WHERE p_memory_budget IS NULL OR first.needed <= p_memory_budget
    ), claimed AS (
        -- By primary key (= ANY of an array): a join here would scan the whole table.
        UPDATE jobs AS u SET status = 'running', attempts = u.attempts + 1,
            lease_owner = p_owner, lease_expires_at = p_expires, heartbeat_at = p_now,
            started_at = COALESCE(u.started_at, p_now), progress = 0, stage = 'claimed',
            holds_device = p_uses_device
        WHERE u.id = ANY (ARRAY(
            SELECT j.id FROM jobs j
            WHERE j.id = ANY (ARRAY(SELECT chosen.id FROM chosen)) AND j.status = 'queued'
            FOR UPDATE OF j SKIP LOCKED))
        RETURNING u.id, u.tenant_id, u.attempts
    )
    SELECT claimed.id, claimed.tenant_id::text, claimed.attempts, chosen.memory_bytes::bigint
    FROM claimed JOIN chosen ON chosen.id = claimed.id
    ORDER BY chosen.running, chosen.priority DESC, chosen.created_at, chosen.id;
END;
$$ LANGUAGE plpgsql VOLATILE
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CLAIM_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        previous = importlib.import_module("facegate.migrations.versions.0025_claim_memory")
        op.execute(str(previous.CLAIM_FUNCTION))
