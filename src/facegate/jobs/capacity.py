"""The largest memory budget among the workers that could run a tenant's job: the API
refuses a job whose estimated peak (facegate.jobs.cost) is over it, since no worker would
ever claim it (422 ``memory-budget-exceeded``, naming the limit).

Workers register their budget in the ``workers`` table (facegate.queue.heartbeat). Live
ones count: running, heard from within :data:`LIVE_WITHIN_SECONDS`, serving the tenant
(every tenant, or a list that names it). Where none is registered (the embedded shape's
in-process workers, or a cluster whose workers have not started yet) the budget this
process's settings give a worker stands in.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, bindparam, select
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.jobs.tables import WorkerRecord

#: A worker silent for longer does not count (its heartbeat is every 5 s by default; the
#: workers mark one lost after three missed beats).
LIVE_WITHIN_SECONDS = 60.0


def live_workers() -> ColumnElement[bool]:
    """The live workers (running, heard from since the bound parameter ``cutoff``,
    :func:`live_cutoff`): a statement's WHERE or JOIN condition."""
    return and_(WorkerRecord.status == "running", WorkerRecord.heartbeat_at >= bindparam("cutoff"))


# Read on every submission: built once (building a statement costs more than this read).
_LIVE_BUDGETS = select(WorkerRecord.tenants, WorkerRecord.memory_budget_bytes).where(live_workers())


def live_cutoff() -> datetime:
    """The ``cutoff`` of :func:`live_workers`: a worker silent since is not live."""
    return utcnow() - timedelta(seconds=LIVE_WITHIN_SECONDS)


def memory_limit(session: Session, tenant_id: str, fallback: int | None) -> int | None:
    """The largest budget of a live worker serving ``tenant_id``; None when one of them has
    no budget; ``fallback`` when no live worker is registered."""
    rows = session.execute(_LIVE_BUDGETS, {"cutoff": live_cutoff()}).all()
    return limit_of(rows, tenant_id, fallback)


def limit_of(
    workers: Iterable[tuple[list[str] | None, int | None]], tenant_id: str, fallback: int | None
) -> int | None:
    """:func:`memory_limit` of the live workers' ``(tenants, memory_budget_bytes)``, read by
    the caller (a submission reads them in the statement that reads its tenant's policy
    stamp)."""
    budgets = [budget for tenants, budget in workers if tenants is None or tenant_id in tenants]
    if not budgets:
        return fallback
    known = [int(budget) for budget in budgets if budget is not None]
    return max(known) if len(known) == len(budgets) else None
