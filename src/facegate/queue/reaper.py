"""The reaper of expired leases, safe to run from every worker at once.

Each worker runs it every third of a lease. On PostgreSQL one transaction-scoped advisory
lock lets a single reaper sweep at a time (the others skip that round instead of queueing
behind it); the row updates stay guarded by status and expiry (facegate.queue.leases), so
even two sweeps that overlap requeue each job once.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from facegate.queue.leases import Reaped, requeue_expired

REAPER_LOCK_KEY = 0x66677270  # "fgrp"


def reap_expired_leases(session: Session, tenants: frozenset[str] | None = None) -> list[Reaped]:
    """Requeue (or fail, when out of attempts) running jobs whose lease has expired (only
    ``tenants``' when given)."""
    if session.get_bind().dialect.name == "postgresql":
        got = session.execute(
            text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": REAPER_LOCK_KEY}
        ).scalar_one()
        if not got:
            return []  # another worker is sweeping right now
    return requeue_expired(session, tenants=tenants)
