"""The fair order, defined once: which queued jobs a free worker takes next.

Among queued jobs whose tenant is below its caps (``max_concurrent_jobs``; on an
accelerator worker also ``device_limit`` for the jobs holding a device), take the job of the
tenant with the fewest running jobs, then the highest priority, then the oldest, then the
lowest id. :data:`FAIR_ORDER` is that rule as data. The Python claims (SQLite, in memory)
sort with :func:`sort_key`; the PostgreSQL claim function is rendered from the same terms
(:func:`order_sql`, facegate.queue.postgres), and ``tests/jobs/test_fair_order.py`` fails
when the function installed by the migrations no longer matches the rendering, or when
the two claim the same scenario differently.

A batch of ``limit`` claims is the same as ``limit`` single claims in a row: a tenant's
k-th job in its own queue order (:data:`QUEUE_ORDER`) would be claimed with ``running + k
- 1`` jobs already running, so ranking every candidate job by its tenant's running count
at that point, then by the rest of the order, merges the tenants' queues exactly as
repeated single claims would — and a tenant contributes at most its free slots.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class SortTerm:
    """One term of the order: a field of :class:`Candidate`, ascending unless said."""

    field: str
    descending: bool = False


#: The fair order of candidate jobs (the whole rule: change it here, add a migration that
#: installs the re-rendered PostgreSQL function).
FAIR_ORDER: tuple[SortTerm, ...] = (
    SortTerm("running"),
    SortTerm("priority", descending=True),
    SortTerm("created_at"),
    SortTerm("id"),
)
#: A tenant's own queue order: the fair order without the tenant's running count.
QUEUE_ORDER: tuple[SortTerm, ...] = FAIR_ORDER[1:]


def order_sql(terms: Sequence[SortTerm], alias: str) -> str:
    """``ORDER BY`` text of ``terms`` on the columns of ``alias`` named like the fields."""
    return ", ".join(f"{alias}.{t.field}" + (" DESC" if t.descending else "") for t in terms)


@dataclass(frozen=True)
class QueuedJob:
    """A queued job as the claim sees it (its estimated cost: facegate.jobs.cost)."""

    id: uuid.UUID
    tenant_id: str
    priority: int
    created_at: datetime
    estimated_seconds: float | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Fit:
    """What a worker can take now, beyond the tenants' caps.

    ``max_seconds``: only jobs estimated to take at most this long (a short-job lane; a job
    with no estimate counts as long). ``memory_bytes``: the claimed jobs' estimated peaks,
    added up in fair order, stay within this budget; the first job that does not fit ends
    the batch, so a large job is never overtaken for ever by smaller ones (it waits until
    a worker has room). None: no bound.
    """

    max_seconds: float | None = None
    memory_bytes: int | None = None

    def admits(self, job: QueuedJob) -> bool:
        """Whether ``job`` may be claimed by such a worker at all (its lane)."""
        if self.max_seconds is None:
            return True
        return job.estimated_seconds is not None and job.estimated_seconds <= self.max_seconds


#: A worker that takes any job.
ANY_FIT = Fit()


@dataclass(frozen=True)
class Candidate:
    """A queued job, with its tenant's running count if it were claimed next."""

    id: uuid.UUID
    tenant_id: str
    priority: int
    created_at: datetime
    running: int


@functools.total_ordering
class _Descending:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __lt__(self, other: _Descending) -> bool:
        return bool(self.value > other.value)

    def __hash__(self) -> int:
        return hash(self.value)


def sort_key(candidate: Candidate, terms: Sequence[SortTerm] = FAIR_ORDER) -> tuple[Any, ...]:
    """The key that sorts candidates in ``terms`` order (the fair order by default)."""
    return tuple(
        _Descending(getattr(candidate, t.field)) if t.descending else getattr(candidate, t.field)
        for t in terms
    )


@dataclass(frozen=True)
class TenantLimits:
    """The caps the claim enforces for one tenant."""

    max_concurrent_jobs: int
    device_limit: int

    def room(self, load: TenantLoad, uses_device: bool) -> int:
        """How many more jobs of the tenant may run now (on this kind of worker)."""
        free = self.max_concurrent_jobs - load.running
        if uses_device:
            free = min(free, self.device_limit - load.devices)
        return max(0, free)


#: Caps of a tenant that has no policy row (should not happen; be conservative). The
#: PostgreSQL claim falls back to the same figures.
FALLBACK_LIMITS = TenantLimits(max_concurrent_jobs=1, device_limit=1)


@dataclass(frozen=True)
class TenantLoad:
    """A tenant's running jobs, and how many of them hold a device."""

    running: int = 0
    devices: int = 0


def plan_claims(
    queued: Iterable[QueuedJob],
    loads: Mapping[str, TenantLoad],
    limits: Mapping[str, TenantLimits | None],
    *,
    limit: int = 1,
    uses_device: bool = False,
    fit: Fit = ANY_FIT,
) -> list[Candidate]:
    """The next ``limit`` jobs to claim, in fair order (pure).

    ``limits`` maps a tenant to its caps, or to None when it may not run jobs now
    (suspended); a tenant missing from it gets :data:`FALLBACK_LIMITS`. ``fit``: the
    worker's lane and memory budget.
    """
    by_tenant: dict[str, list[QueuedJob]] = {}
    memory = {job.id: job.memory_bytes or 0 for job in queued}
    for job in queued:
        if fit.admits(job):
            by_tenant.setdefault(job.tenant_id, []).append(job)
    candidates: list[Candidate] = []
    for tenant_id, jobs in by_tenant.items():
        tenant_limits = limits.get(tenant_id, FALLBACK_LIMITS)
        if tenant_limits is None:
            continue
        load = loads.get(tenant_id, TenantLoad())
        room = min(limit, tenant_limits.room(load, uses_device))
        ordered = sorted(jobs, key=lambda j: sort_key(_as_candidate(j, 0), QUEUE_ORDER))
        candidates.extend(
            _as_candidate(job, load.running + position)
            for position, job in enumerate(ordered[:room])
        )
    candidates.sort(key=sort_key)
    chosen = candidates[:limit]
    if fit.memory_bytes is None:
        return chosen
    taken, needed = [], 0
    for candidate in chosen:
        needed += memory[candidate.id]
        if needed > fit.memory_bytes:
            break
        taken.append(candidate)
    return taken


def _as_candidate(job: QueuedJob, running: int) -> Candidate:
    return Candidate(job.id, job.tenant_id, job.priority, job.created_at, running)
