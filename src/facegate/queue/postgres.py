"""Fair claim for the cluster shape: many worker processes on one PostgreSQL.

The rule of facegate.queue.fairness (fewest running first, then priority, then oldest; a
tenant at its concurrency cap — or, on an accelerator worker, at its device limit — is
skipped), for up to ``limit`` jobs in one round trip, without a global lock, so claims for
different tenants proceed in parallel:

1. rank the tenants that have queued work (queue heads come from the partial index
   ``ix_jobs_queued_head``: one index probe per tenant, however long its queue);
2. in that order, ``pg_try_advisory_xact_lock(ns, hashtext(tenant))`` — the tenant's claim
   lock — until ``limit`` tenants are held. Busy means another worker is admitting that
   tenant's jobs right now: try the next one; when every candidate is busy, wait briefly
   for the first, then take the others that came free;
3. under those locks one statement recounts each tenant's running jobs *in a snapshot
   taken after the locks were granted* (so every earlier claim of the tenants is visible:
   a lock is released only at its holder's commit), takes at most each tenant's free slots
   from its queue, merges the queues in fair order and claims the first ``limit`` with
   ``FOR UPDATE SKIP LOCKED``.

Counting and claiming outside such a lock overshoots caps under concurrency (the failure
reported for PgQueuer and Hatchet); doing both in the statement that follows the lock
cannot, because every transition *into* ``running`` of a tenant happens under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from facegate.database import utcnow
from facegate.queue.claim import Claim, ClaimOne
from facegate.queue.fairness import ANY_FIT, FAIR_ORDER, QUEUE_ORDER, Fit, order_sql

# First key of the two-int advisory locks that guard per-tenant admission (second key:
# hashtext(tenant_id)); distinct from facegate.queue.claim.CLAIM_LOCK_KEY's single-key lock.
TENANT_LOCK_NAMESPACE = 0x66676A74  # "fgjt"


@dataclass(frozen=True)
class ServedTenants:
    """Which tenants a worker takes jobs from.

    ``tenants`` set: only those (a physically isolated tenant's own workers). Otherwise
    every active tenant, or only those with ``isolation = 'logical'`` when
    ``logical_only`` (the shared workers of a cluster leave physical tenants to theirs).
    """

    tenants: frozenset[str] | None = None
    logical_only: bool = False

    @classmethod
    def parse(cls, value: str | None, *, logical_only: bool = False) -> ServedTenants:
        """From a comma-separated list (``--tenants``, ``FACEGATE_WORKER_TENANTS``, the
        specification's ``TENANT_ID``); empty or None: every tenant (``logical_only``
        then applies)."""
        names = frozenset(p.strip() for p in (value or "").split(",") if p.strip())
        if names:
            return cls(names)
        return cls(None, logical_only=logical_only)

    def describe(self) -> str:
        if self.tenants is not None:
            return ",".join(sorted(self.tenants))
        return "logical tenants" if self.logical_only else "all tenants"


# The PL/pgSQL claim, rendered from facegate.queue.fairness so the order has one definition;
# migration 0025_claim_memory installs this text (frozen there; tests/jobs/test_fair_order.py
# fails when the two differ). PL/pgSQL takes a fresh snapshot for each statement of a
# VOLATILE function, so the claim statement, run after the tenants' advisory locks are
# granted, sees every earlier claim of those tenants: a lock is released only when its
# holder commits (an asynchronous commit still releases its locks only once the commit is
# visible to other transactions).
_CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION facegate_claim_batch(
    p_owner text, p_expires timestamptz, p_now timestamptz, p_uses_device boolean,
    p_served text[], p_logical_only boolean, p_namespace integer, p_limit integer,
    p_max_seconds double precision, p_memory_budget bigint
) RETURNS TABLE (job_id uuid, job_tenant text, job_attempts integer, job_memory bigint)
AS $$
DECLARE
    cand record;
    candidates text[] := '{{}}';
    locked text[] := '{{}}';
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
                ORDER BY {queue_order_j} LIMIT 1) h
            WHERE t.status = 'active'
              AND (p_served IS NULL OR t.id = ANY (p_served))
              AND (NOT p_logical_only OR t.isolation = 'logical')
        ) c
        WHERE c.running < c.max_concurrent_jobs
          AND (NOT p_uses_device OR c.devices < c.device_limit)
        ORDER BY {fair_order_c}
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
                row_number() OVER (ORDER BY {queue_order_j}) AS position
            FROM jobs j WHERE j.tenant_id = load.tenant_id AND j.status = 'queued'
              AND (p_max_seconds IS NULL OR j.estimated_seconds <= p_max_seconds)
            ORDER BY {queue_order_j}
            LIMIT greatest(0, least(p_limit, load.max_concurrent_jobs - load.running,
                CASE WHEN p_uses_device THEN load.device_limit - load.devices ELSE p_limit END))
        ) q
    ), first AS (
        -- The first p_limit in fair order, with the memory they need between them; the
        -- batch ends before the first job that would exceed the worker's budget.
        SELECT queued.*, sum(queued.memory_bytes) OVER (
            ORDER BY {fair_order_queued}
            ROWS UNBOUNDED PRECEDING) AS needed
        FROM queued
        ORDER BY {fair_order_queued}
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
    ORDER BY {fair_order_chosen};
END;
$$ LANGUAGE plpgsql VOLATILE
"""


def claim_function_sql() -> str:
    """``CREATE FUNCTION facegate_claim_batch``, its orders rendered from FAIR_ORDER."""
    return _CLAIM_FUNCTION.format(
        queue_order_j=order_sql(QUEUE_ORDER, "j"),
        fair_order_c=order_sql(FAIR_ORDER, "c"),
        fair_order_queued=order_sql(FAIR_ORDER, "queued"),
        fair_order_chosen=order_sql(FAIR_ORDER, "chosen"),
    )


# The whole claim is one round trip: ``facegate_claim_batch`` ranks the candidates, takes
# the tenants' locks and claims under them.
_CLAIM = (
    "SELECT job_id, job_tenant, job_attempts, job_memory FROM facegate_claim_batch("
    "%(owner)s, %(expires)s, %(now)s, %(uses_device)s, %(served)s, %(logical_only)s, "
    "%(namespace)s, %(limit)s, %(max_seconds)s, %(memory_budget)s)"
)


class PostgresClaimer(ClaimOne):
    """JobClaimer for PostgreSQL: per-tenant advisory locks, ``FOR UPDATE SKIP LOCKED``.

    The claim is the hot loop of every worker, so it runs on the pooled psycopg connection
    itself, in autocommit (the one statement is the whole transaction), as a server-side
    prepared statement: SQLAlchemy's per-statement work (compiling, isolation-level switch
    and reset, result wrapping) cost more CPU than the claim's own client side — about half
    of a worker's CPU per no-op job (``benchmarks/queue_bench.py``). Errors still surface as
    SQLAlchemy's (``OperationalError`` when the server is away), and a connection the server
    dropped is discarded from the pool.
    """

    def __init__(self, engine: Engine, served: ServedTenants | None = None) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("PostgresClaimer needs a PostgreSQL engine")
        self.engine = engine
        self.served = served or ServedTenants()
        self._served = sorted(self.served.tenants) if self.served.tenants is not None else None

    def claim_many(
        self,
        worker_id: str,
        *,
        limit: int,
        lease_seconds: float,
        uses_device: bool = False,
        fit: Fit = ANY_FIT,
    ) -> list[Claim]:
        now = utcnow()
        expires = now + timedelta(seconds=lease_seconds)
        params = {
            "owner": worker_id,
            "expires": expires,
            "now": now,
            "uses_device": uses_device,
            "served": self._served,
            "logical_only": self.served.logical_only,
            "namespace": TENANT_LOCK_NAMESPACE,
            "limit": limit,
            "max_seconds": fit.max_seconds,
            "memory_budget": fit.memory_bytes,
        }
        return [
            Claim(job_id, tenant_id, int(attempts), worker_id, expires, int(memory))
            for job_id, tenant_id, attempts, memory in self._fetch(params)
        ]

    def _fetch(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        pooled = self.engine.raw_connection()
        connection: psycopg.Connection[Any] = pooled.driver_connection  # type: ignore[assignment]
        try:
            connection.autocommit = True
            try:
                with connection.cursor() as cursor:
                    cursor.execute(_CLAIM, params, prepare=True)
                    return cursor.fetchall()
            finally:
                if not connection.broken:
                    connection.autocommit = False  # as the pool's other users expect
        except psycopg.Error as exc:
            if connection.broken or isinstance(exc, psycopg.OperationalError):
                pooled.invalidate(exc)  # the server dropped it (a restart, a failover)
            raise DBAPIError.instance(_CLAIM, params, exc, psycopg.Error) from exc
        finally:
            pooled.close()  # back to the pool (or away, if invalidated)
