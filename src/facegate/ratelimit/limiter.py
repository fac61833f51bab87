"""Sliding-window rate limits: on Redis through the ``limits`` library, in process memory
through :class:`~facegate.ratelimit.memory.MemoryWindows` (same arithmetic, no timer
threads).

The sliding-window counter weighs the previous minute's count by how much of it still
overlaps the window: smooth like a true moving window, at the cost of two counters per
key instead of one entry per request (a moving window at 6,000 requests per minute would
keep 6,000 list entries per tenant in Redis).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from limits import RateLimitItemPerMinute
from limits.errors import StorageError as LimitsStorageError
from limits.storage import RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter
from redis.exceptions import RedisError

from facegate.ratelimit.memory import MemoryWindows
from facegate.resilience import CircuitBreaker

WINDOW_SECONDS = 60
# A dead Redis must cost a request a fraction of a second, not the OS's connect timeout.
REDIS_TIMEOUT_SECONDS = 0.5


class BackendUnavailable(Exception):
    """The counters' storage (Redis) could not be reached."""


@dataclass(frozen=True)
class Decision:
    """The outcome of one rate-limit check, and what the headers say about it."""

    name: str  # which limit: "tenant" or "ip"
    allowed: bool
    limit: int  # requests per window
    remaining: int
    reset_seconds: int  # until the window has room again

    def headers(self) -> dict[str, str]:
        """``RateLimit-Policy`` and ``RateLimit`` as structured fields (IETF httpapi
        ratelimit-headers draft): quota ``q`` per window ``w``; remaining ``r``, reset ``t``."""
        return {
            "RateLimit-Policy": f'"{self.name}";q={self.limit};w={WINDOW_SECONDS}',
            "RateLimit": f'"{self.name}";r={self.remaining};t={self.reset_seconds}',
        }


def create_storage(redis_url: str | None, key_prefix: str) -> Storage | MemoryWindows:
    """Redis storage for ``redis_url`` (keys under ``key_prefix``), else process memory."""
    if redis_url is None or redis_url.startswith("memory://"):
        return MemoryWindows()
    return RedisStorage(
        redis_url,
        key_prefix=key_prefix,
        wrap_exceptions=True,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
    )


class RateLimiter:
    """Per-minute limits keyed by (limit name, identifier), through the ``redis`` breaker
    when the storage is remote. ``storage`` is a ``limits`` storage or, in process memory,
    :class:`MemoryWindows` (which uses ``clock``; ``limits`` reads the system time)."""

    def __init__(
        self,
        storage: Storage | MemoryWindows,
        breaker: CircuitBreaker | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.storage = storage
        self.strategy = (
            None if isinstance(storage, MemoryWindows) else SlidingWindowCounterRateLimiter(storage)
        )
        self.breaker = breaker
        self._clock = clock

    def hit(self, name: str, identifier: str, per_minute: int) -> Decision:
        """Count one request against ``name``/``identifier``; raises BackendUnavailable
        (or CircuitOpen) when the storage cannot be reached."""
        if isinstance(self.storage, MemoryWindows):
            # The per-minute value is part of the key, as in ``limits``' keys: a changed
            # policy starts a fresh count on both backends alike.
            hit = self.storage.hit(
                (name, identifier, str(per_minute)), per_minute, WINDOW_SECONDS, self._clock()
            )
            reset = math.ceil(hit.reset_in) if hit.allowed else max(1, math.ceil(hit.reset_in))
            return Decision(name, hit.allowed, per_minute, hit.remaining, reset)
        assert self.strategy is not None
        item = RateLimitItemPerMinute(per_minute, namespace="facegate")
        if self.breaker is not None:
            self.breaker.before_call()
        try:
            allowed = self.strategy.hit(item, name, identifier)
            stats = self.strategy.get_window_stats(item, name, identifier)
        except (LimitsStorageError, RedisError, OSError) as exc:
            if self.breaker is not None:
                self.breaker.record_failure()
            raise BackendUnavailable(str(exc)) from exc
        if self.breaker is not None:
            self.breaker.record_success()
        reset = max(0, math.ceil(stats.reset_time - self._clock()))
        if not allowed:
            reset = max(1, reset)
        return Decision(name, allowed, per_minute, stats.remaining, reset)
