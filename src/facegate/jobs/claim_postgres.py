"""Fair claim for the cluster shape: many worker processes on one PostgreSQL.

The same rule as :func:`facegate.jobs.claim.choose_job` (fewest running first, then
priority, then oldest; a tenant at its concurrency cap — or, on an accelerator worker, at
its device limit — is skipped), but without a global lock, so claims for different tenants
proceed in parallel:

1. one read ranks the tenants that have queued work (queue heads come from the partial
   index ``ix_jobs_queued_head``: one index probe per tenant, however long its queue);
2. for the best candidate, ``pg_try_advisory_xact_lock(ns, hashtext(tenant))`` — the
   tenant's claim lock. Busy means another worker is admitting a job of that tenant right
   now; rather than wait, try the next candidate;
3. under that lock one statement recounts the tenant's running jobs *in a snapshot taken
   after the lock was granted* (so every earlier claim of the tenant is visible: the lock is
   released only at its holder's commit) and claims its head with ``FOR UPDATE SKIP
   LOCKED`` only when the tenant is still below its caps.

Counting and claiming outside such a lock overshoots caps under concurrency (the failure
reported for PgQueuer and Hatchet); doing both in the statement that follows the lock
cannot, because every transition *into* ``running`` of a tenant happens under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, text

from facegate.db import utcnow
from facegate.jobs.claim import Claim

# First key of the two-int advisory locks that guard per-tenant admission (second key:
# hashtext(tenant_id)); distinct from facegate.jobs.claim.CLAIM_LOCK_KEY's single-key lock.
TENANT_LOCK_NAMESPACE = 0x66676A74  # "fgjt"
# Candidates looked at per claim when the better ones are being claimed by other workers.
MAX_CANDIDATES = 8


@dataclass(frozen=True)
class ServedTenants:
    """Which tenants a worker takes jobs from.

    ``tenants`` set: only those (a physically isolated tenant's own workers). Otherwise
    every active tenant, or only those with ``isolation = 'logical'`` when
    ``logical_only`` (the shared workers of a cluster leave physical tenants to theirs).
    """

    tenants: frozenset[str] | None = None
    logical_only: bool = False

    def describe(self) -> str:
        if self.tenants is not None:
            return ",".join(sorted(self.tenants))
        return "logical tenants" if self.logical_only else "all tenants"


_CANDIDATES = """
SELECT t.id, m.priority, h.created_at,
       (SELECT count(*) FROM jobs r WHERE r.tenant_id = t.id AND r.status = 'running')
           AS running,
       (SELECT count(*) FROM jobs r
         WHERE r.tenant_id = t.id AND r.status = 'running' AND r.holds_device) AS devices,
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
WHERE t.status = 'active' {served}
"""

_CLAIM = text("""
WITH running AS (
    SELECT count(*) AS jobs, count(*) FILTER (WHERE holds_device) AS devices
    FROM jobs WHERE tenant_id = :tenant AND status = 'running'
), caps AS (
    SELECT p.max_concurrent_jobs, p.device_limit
    FROM policies p JOIN tenants t ON t.id = p.tenant_id
    WHERE p.tenant_id = :tenant AND t.status = 'active'
), pick AS (
    SELECT j.id FROM jobs j, running, caps
    WHERE j.tenant_id = :tenant AND j.status = 'queued'
      AND j.priority = (SELECT max(priority) FROM jobs
                        WHERE tenant_id = :tenant AND status = 'queued')
      AND running.jobs < caps.max_concurrent_jobs
      AND (NOT :uses_device OR running.devices < caps.device_limit)
    ORDER BY j.created_at, j.id
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1, lease_owner = :owner,
    lease_expires_at = :expires, heartbeat_at = :now, started_at = :now, progress = 0,
    stage = 'claimed', holds_device = :uses_device
FROM pick WHERE jobs.id = pick.id
RETURNING jobs.id, jobs.attempts
""")

_TRY_LOCK = text("SELECT pg_try_advisory_xact_lock(:namespace, hashtext(:tenant))")


def rank_candidates(rows: list[Any], uses_device: bool) -> list[str]:
    """Tenants below their caps, best first: fewest running, highest priority, oldest."""
    eligible = [
        row
        for row in rows
        if row.running < row.max_concurrent_jobs
        and (not uses_device or row.devices < row.device_limit)
    ]
    eligible.sort(key=lambda row: (row.running, -row.priority, row.created_at, row.id))
    return [row.id for row in eligible[:MAX_CANDIDATES]]


class PostgresClaimer:
    """JobClaimer for PostgreSQL: per-tenant advisory locks, ``FOR UPDATE SKIP LOCKED``."""

    def __init__(self, engine: Engine, served: ServedTenants | None = None) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("PostgresClaimer needs a PostgreSQL engine")
        self.engine = engine
        self.served = served or ServedTenants()
        self._candidates = self._candidates_statement(self.served)

    @staticmethod
    def _candidates_statement(served: ServedTenants) -> Any:
        if served.tenants is not None:
            statement = text(_CANDIDATES.format(served="AND t.id IN :served"))
            return statement.bindparams(bindparam("served", expanding=True))
        if served.logical_only:
            return text(_CANDIDATES.format(served="AND t.isolation = 'logical'"))
        return text(_CANDIDATES.format(served=""))

    def claim(
        self, worker_id: str, *, lease_seconds: float, uses_device: bool = False
    ) -> Claim | None:
        params: dict[str, Any] = {}
        if self.served.tenants is not None:
            params["served"] = sorted(self.served.tenants)
        with self.engine.begin() as conn:
            rows = list(conn.execute(self._candidates, params))
            for tenant in rank_candidates(rows, uses_device):
                claim = self._claim_tenant(conn, tenant, worker_id, lease_seconds, uses_device)
                if claim is not None:
                    return claim
        return None

    def _claim_tenant(
        self,
        conn: Connection,
        tenant: str,
        worker_id: str,
        lease_seconds: float,
        uses_device: bool,
    ) -> Claim | None:
        locked = conn.execute(
            _TRY_LOCK, {"namespace": TENANT_LOCK_NAMESPACE, "tenant": tenant}
        ).scalar_one()
        if not locked:
            return None  # another worker is admitting this tenant's job right now
        now = utcnow()
        expires = now + timedelta(seconds=lease_seconds)
        row = conn.execute(
            _CLAIM,
            {
                "tenant": tenant,
                "owner": worker_id,
                "expires": expires,
                "now": now,
                "uses_device": uses_device,
            },
        ).one_or_none()
        if row is None:
            return None  # at its cap meanwhile, or its head is locked (cancel, reaper)
        return Claim(row.id, tenant, int(row.attempts), worker_id, expires)
