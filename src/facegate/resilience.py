"""Circuit breakers for the service's dependencies (PostgreSQL, Redis, S3).

The gateway "熔断" of the specification: after ``failure_threshold`` consecutive failures
the breaker *opens* and every call fails fast with :class:`CircuitOpen` (a 503
problem+json naming the dependency) instead of waiting on a dead endpoint and piling up
threads. After ``reset_timeout`` seconds it goes *half-open* and lets exactly one trial
call through: success closes it, failure opens it again for another cool-down.

State changes are logged (and counted in ``facegate_circuit_breaker_transitions_total``);
the current state is the gauge ``facegate_circuit_breaker_state`` (0 closed, 1 half-open,
2 open).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import structlog
from prometheus_client import Counter, Gauge

from facegate.errors import Unavailable

if TYPE_CHECKING:
    from facegate.settings import Settings

State = Literal["closed", "open", "half-open"]
T = TypeVar("T")

_STATE_VALUE: dict[State, int] = {"closed": 0, "half-open": 1, "open": 2}
BREAKER_STATE = Gauge(
    "facegate_circuit_breaker_state",
    "Circuit breaker state per dependency: 0 closed, 1 half-open, 2 open.",
    ["dependency"],
    multiprocess_mode="max",
)
BREAKER_TRANSITIONS = Counter(
    "facegate_circuit_breaker_transitions_total",
    "Circuit breaker state changes per dependency and new state.",
    ["dependency", "state"],
)

log = structlog.get_logger(__name__)


class CircuitOpen(Unavailable):
    """A call refused without trying because the dependency's breaker is open."""

    def __init__(self, dependency: str, retry_after: int) -> None:
        super().__init__(
            f"{dependency} is unavailable; retry later",
            dependency=dependency,
            retry_after=retry_after,
        )
        self.dependency = dependency


@dataclass(frozen=True)
class BreakerConfig:
    """``failure_threshold`` consecutive failures open the breaker for ``reset_timeout`` s."""

    failure_threshold: int = 5
    reset_timeout: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> BreakerConfig:
        return cls(settings.breaker_failure_threshold, settings.breaker_reset_seconds)


class CircuitBreaker:
    """A thread-safe closed → open → half-open breaker for one dependency.

    Use :meth:`call` around a function, or the three steps :meth:`before_call`,
    :meth:`record_success` and :meth:`record_failure` where the call is spread over hooks
    (the SQLAlchemy guard). ``clock`` is injectable so tests need not sleep.
    """

    def __init__(
        self,
        name: str,
        config: BreakerConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.config = config or BreakerConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._state: State = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._trial_started: float | None = None
        BREAKER_STATE.labels(name).set(0)

    @property
    def state(self) -> State:
        with self._lock:
            self._advance()
            return self._state

    def _advance(self) -> None:
        # open -> half-open happens lazily, when someone looks after the cool-down.
        if self._state == "open" and self._clock() - self._opened_at >= self.config.reset_timeout:
            self._transition("half-open")
            self._trial_started = None

    def _transition(self, state: State) -> None:
        previous, self._state = self._state, state
        BREAKER_STATE.labels(self.name).set(_STATE_VALUE[state])
        BREAKER_TRANSITIONS.labels(self.name, state).inc()
        logger = log.warning if state == "open" else log.info
        logger(
            "circuit breaker state change",
            dependency=self.name,
            previous=previous,
            state=state,
            consecutive_failures=self._failures,
        )

    def _retry_after(self) -> int:
        remaining = self.config.reset_timeout - (self._clock() - self._opened_at)
        return max(1, int(remaining + 0.999))

    def before_call(self) -> None:
        """Raise CircuitOpen unless a call may go through now (in half-open: one trial)."""
        with self._lock:
            self._advance()
            if self._state == "closed":
                return
            if self._state == "half-open":
                now = self._clock()
                # A trial whose outcome was never reported (its caller vanished) does not
                # block the breaker forever: another one may start after a cool-down.
                stale = (
                    self._trial_started is not None
                    and now - self._trial_started >= self.config.reset_timeout
                )
                if self._trial_started is None or stale:
                    self._trial_started = now
                    return
                raise CircuitOpen(self.name, max(1, int(self.config.reset_timeout)))
            raise CircuitOpen(self.name, self._retry_after())

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            if self._state != "closed":
                self._trial_started = None
                self._transition("closed")

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._state == "half-open" or (
                self._state == "closed" and self._failures >= self.config.failure_threshold
            ):
                self._opened_at = self._clock()
                self._trial_started = None
                self._transition("open")

    def call(
        self,
        function: Callable[[], T],
        *,
        failure: tuple[type[BaseException], ...] = (Exception,),
    ) -> T:
        """Run ``function`` through the breaker; exceptions of ``failure`` types count."""
        self.before_call()
        try:
            result = function()
        except failure:
            self.record_failure()
            raise
        except BaseException:
            # Not a dependency failure (a bug, a 404...): the dependency answered.
            self.record_success()
            raise
        self.record_success()
        return result
