"""Queue gauges computed from the database when Prometheus scrapes.

A gauge kept in process memory would be wrong as soon as there are several processes (each
knows only the jobs it touched) or a restart (it forgets the queue). The jobs table is the
queue, so counting it at scrape time is right by construction. These are cross-tenant
aggregates for the operator (counts only, never a row); the jobs scope lint lists this
module beside the scheduler's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from facegate.database import utcnow
from facegate.jobs.tables import Job
from facegate.observability.labels import TenantLabels, tenant_label


class JobGaugeCollector(Collector):
    """``facegate_jobs_queued{tenant}``, ``facegate_jobs_running{tenant}`` and the age of
    the stalest heartbeat among running jobs (a worker that stopped heartbeating)."""

    def __init__(self, engine: Engine, labels: TenantLabels = tenant_label) -> None:
        self.engine = engine
        self.labels = labels

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts: dict[str, dict[str, float]] = {"queued": {}, "running": {}}
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(Job.status, Job.tenant_id, func.count())
                # Parts of a segmented job are counted in the job they belong to.
                .where(Job.status.in_(("queued", "running")), Job.parent_id.is_(None))
                .group_by(Job.status, Job.tenant_id)
            ).all()
            oldest = connection.execute(
                select(func.min(Job.heartbeat_at)).where(Job.status == "running")
            ).scalar_one_or_none()
        for status, tenant_id, count in rows:
            label = self.labels(tenant_id)
            bucket = counts[status]
            bucket[label] = bucket.get(label, 0.0) + float(count)
        for status in ("queued", "running"):
            family = GaugeMetricFamily(
                f"facegate_jobs_{status}", f"Jobs {status} now, by tenant.", labels=["tenant"]
            )
            for label, value in sorted(counts[status].items()):
                family.add_metric([label], value)
            yield family
        age = GaugeMetricFamily(
            "facegate_running_job_heartbeat_age_seconds",
            "Seconds since the stalest heartbeat of a running job (0 when none runs).",
        )
        age.add_metric([], _age_seconds(oldest))
        yield age


def _age_seconds(oldest: object) -> float:
    if oldest is None:
        return 0.0
    assert isinstance(oldest, datetime)
    stamp = oldest if oldest.tzinfo else oldest.replace(tzinfo=UTC)
    return max(0.0, (utcnow() - stamp).total_seconds())
