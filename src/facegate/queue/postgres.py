"""Fair claim for the cluster shape: many worker processes on one PostgreSQL.

The same rule as :func:`facegate.queue.claim.choose_job` (fewest running first, then
priority, then oldest; a tenant at its concurrency cap — or, on an accelerator worker, at
its device limit — is skipped), but without a global lock, so claims for different tenants
proceed in parallel:

1. rank the tenants that have queued work (queue heads come from the partial index
   ``ix_jobs_queued_head``: one index probe per tenant, however long its queue);
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

import psycopg
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from facegate.database import utcnow
from facegate.queue.claim import Claim

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


# The whole claim is one round trip: the PL/pgSQL function ``facegate_claim`` (migration
# 0004_cluster) ranks the candidates, takes the tenant's lock and claims under it.
_CLAIM = (
    "SELECT job_id, job_tenant, job_attempts FROM facegate_claim("
    "%(owner)s, %(expires)s, %(now)s, %(uses_device)s, %(served)s, %(logical_only)s, "
    "%(namespace)s)"
)


class PostgresClaimer:
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

    def claim(
        self, worker_id: str, *, lease_seconds: float, uses_device: bool = False
    ) -> Claim | None:
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
        }
        row = self._fetch_one(params)
        if row is None:
            return None
        job_id, tenant_id, attempts = row
        return Claim(job_id, tenant_id, int(attempts), worker_id, expires)

    def _fetch_one(self, params: dict[str, Any]) -> tuple[Any, ...] | None:
        pooled = self.engine.raw_connection()
        connection: psycopg.Connection[Any] = pooled.driver_connection  # type: ignore[assignment]
        try:
            connection.autocommit = True
            try:
                with connection.cursor() as cursor:
                    cursor.execute(_CLAIM, params, prepare=True)
                    row: tuple[Any, ...] | None = cursor.fetchone()
                    return row
            finally:
                if not connection.broken:
                    connection.autocommit = False  # as the pool's other users expect
        except psycopg.Error as exc:
            if connection.broken or isinstance(exc, psycopg.OperationalError):
                pooled.invalidate(exc)  # the server dropped it (a restart, a failover)
            raise DBAPIError.instance(_CLAIM, params, exc, psycopg.Error) from exc
        finally:
            pooled.close()  # back to the pool (or away, if invalidated)
