"""The takedown clock at scrape time: ``facegate_takedown_open_cases`` and
``facegate_takedown_oldest_open_case_age_seconds`` (the alert fires at 36 h, before the
48 h the law allows), counted from the cases table (counts only, never a row)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func
from sqlalchemy.orm import sessionmaker

from facegate.database import session_scope, utcnow
from facegate.takedown.repository import TakedownRepository
from facegate.takedown.tables import TakedownCase


class TakedownGaugeCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self.sessions = sessionmaker(bind=engine)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with session_scope(self.sessions, read_only=True) as session:
            scoped = TakedownRepository.platform_statement().where(TakedownCase.status == "open")
            count, oldest = session.execute(
                scoped.with_only_columns(func.count(), func.min(TakedownCase.reported_at))
            ).one()
        cases = GaugeMetricFamily("facegate_takedown_open_cases", "Takedown cases open now.")
        cases.add_metric([], float(count))
        yield cases
        age = GaugeMetricFamily(
            "facegate_takedown_oldest_open_case_age_seconds",
            "Seconds since the oldest open takedown case was reported (0 when none is open).",
        )
        age.add_metric([], 0.0 if oldest is None else (utcnow() - oldest).total_seconds())
        yield age
