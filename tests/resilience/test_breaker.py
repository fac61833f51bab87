"""CircuitBreaker state machine (fake clock) and the SQLAlchemy guard on dead and live
databases."""

from __future__ import annotations

import os
import socket

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from facegate.api.errors import as_problem
from facegate.database import create_engine_from_url, guard_engine
from facegate.resilience import BreakerConfig, CircuitBreaker, CircuitOpen

POSTGRES_URL = os.environ.get("FACEGATE_TEST_POSTGRES_URL") or (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test" if os.environ.get("CI") == "true" else None
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def create_breaker(threshold: int = 3, reset: float = 10.0) -> tuple[CircuitBreaker, FakeClock]:
    clock = FakeClock()
    return CircuitBreaker("dep", BreakerConfig(threshold, reset), clock=clock), clock


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fail() -> None:
    raise ConnectionError("down")


def test_opens_after_consecutive_failures_only() -> None:
    breaker, _ = create_breaker(threshold=3)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            breaker.call(fail)
    assert breaker.call(lambda: "ok") == "ok"  # success resets the count
    for _ in range(2):
        with pytest.raises(ConnectionError):
            breaker.call(fail)
    assert breaker.state == "closed"
    with pytest.raises(ConnectionError):
        breaker.call(fail)
    assert breaker.state == "open"
    calls: list[int] = []
    with pytest.raises(CircuitOpen) as caught:
        breaker.call(lambda: calls.append(1))
    assert calls == []  # failed fast, the function never ran
    problem = as_problem(caught.value)
    assert problem.to_problem()["status"] == 503
    assert problem.to_problem()["type"].endswith("/service-unavailable")
    assert problem.to_problem()["dependency"] == "dep"
    assert problem.headers["Retry-After"] == "10"


def test_half_open_allows_one_trial_then_closes_or_reopens() -> None:
    breaker, clock = create_breaker(threshold=1, reset=10.0)
    with pytest.raises(ConnectionError):
        breaker.call(fail)
    clock.now += 4
    with pytest.raises(CircuitOpen) as caught:
        breaker.before_call()
    assert caught.value.retry_after == 6
    clock.now += 6
    assert breaker.state == "half-open"
    breaker.before_call()  # the trial
    with pytest.raises(CircuitOpen):
        breaker.before_call()  # a second caller while the trial runs
    breaker.record_failure()
    assert breaker.state == "open"  # a failed trial opens it for another cool-down
    clock.now += 10
    assert breaker.call(lambda: 1) == 1
    assert breaker.state == "closed"


def test_unreported_trial_does_not_wedge_the_breaker() -> None:
    breaker, clock = create_breaker(threshold=1, reset=5.0)
    breaker.record_failure()
    clock.now += 5
    breaker.before_call()  # a trial whose caller never reports
    with pytest.raises(CircuitOpen):
        breaker.before_call()
    clock.now += 5
    breaker.before_call()  # stale trial: another may go


def test_non_failure_exceptions_do_not_count() -> None:
    breaker, _ = create_breaker(threshold=1)

    def not_found() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        breaker.call(not_found, failure=(ConnectionError,))
    assert breaker.state == "closed"


def test_guard_fails_fast_on_a_dead_database() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/test"
    engine = create_engine_from_url(url, connect_args={"connect_timeout": 2})
    breaker, clock = create_breaker(threshold=3, reset=30.0)
    guard_engine(engine, breaker)
    try:
        for _ in range(3):
            with pytest.raises(OperationalError), engine.connect():
                pass
        assert breaker.state == "open"
        with pytest.raises(CircuitOpen) as caught, engine.connect():
            pass
        assert caught.value.dependency == "dep"
        clock.now += 30
        with pytest.raises(OperationalError), engine.connect():
            pass  # the half-open trial reached the (still dead) server
        assert breaker.state == "open"
    finally:
        engine.dispose()


def test_guard_closes_again_when_the_database_answers(tmp_path: object) -> None:
    url = POSTGRES_URL or f"sqlite:///{tmp_path}/guard.db"
    engine = create_engine_from_url(url)
    breaker, clock = create_breaker(threshold=2, reset=5.0)
    guard_engine(engine, breaker)
    try:
        breaker.record_failure()
        breaker.record_failure()
        with pytest.raises(CircuitOpen), engine.connect():
            pass
        clock.now += 5
        with engine.connect() as connection:
            assert connection.execute(text("select 1")).scalar_one() == 1
        assert breaker.state == "closed"
    finally:
        engine.dispose()
