"""The Gateway: rate limits, bans and what happens when their storage is down.

Built once per app from settings (:meth:`Gateway.from_settings`) and used by the ASGI
middleware (bans, per-IP limits of unauthenticated calls) and by ``get_principal``
(per-tenant limits, failed authentications). When Redis cannot be reached the configured
``fail_mode`` decides: ``open`` lets the request through (counted in
``facegate_rate_limit_backend_errors_total`` and logged), ``closed`` answers 503.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import redis
import structlog
from prometheus_client import Counter
from redis.exceptions import RedisError

from facegate.errors import RateLimited, Unavailable
from facegate.observability.metrics import request_rate_limited
from facegate.ratelimit.bans import Ban, BanPolicy, BanStore, MemoryBanStore
from facegate.ratelimit.clientip import DEFAULT_IPV6_PREFIX, Network, parse_networks
from facegate.ratelimit.limiter import (
    REDIS_TIMEOUT_SECONDS,
    BackendUnavailable,
    Decision,
    RateLimiter,
    create_storage,
)
from facegate.ratelimit.redisbans import RedisBanStore
from facegate.resilience import BreakerConfig, CircuitBreaker, CircuitOpen
from facegate.settings import Settings

FailMode = Literal["open", "closed"]
T = TypeVar("T")
_LOG_EVERY_SECONDS = 10.0
RATE_CACHE_SECONDS = 5.0

BACKEND_ERRORS = Counter(
    "facegate_rate_limit_backend_errors_total",
    "Rate-limit or ban checks that could not reach their storage, by the fail mode applied.",
    ["mode"],
)
log = structlog.get_logger(__name__)


class LimitReached(RateLimited):
    """A rate limit is used up; ``decision`` says which, and when it has room again."""

    def __init__(self, detail: str, decision: Decision, *, limit: str, value: int) -> None:
        super().__init__(detail, retry_after=decision.reset_seconds, limit=limit, limit_value=value)
        self.decision = decision


def redis_unavailable(detail: str) -> Unavailable:
    return Unavailable(detail, dependency="redis", retry_after=5)


@dataclass
class Gateway:
    """Rate limiter + ban store + the policy for their outages."""

    limiter: RateLimiter
    bans: BanStore
    trusted_proxies: tuple[Network, ...] = ()
    ipv6_prefix: int = DEFAULT_IPV6_PREFIX  # IPv6 clients are keyed by this network
    ip_per_minute: int = 60
    fail_mode: FailMode = "open"
    breaker: CircuitBreaker | None = None
    clock: Callable[[], float] = time.time
    _last_log: float = field(default=0.0, repr=False)
    _rates: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Gateway:
        prefix = settings.rate_limit_key_prefix
        policy = BanPolicy(
            max_failures=settings.ban_max_failures,
            window_seconds=settings.ban_window_seconds,
            ban_seconds=settings.ban_seconds,
            max_ban_seconds=settings.ban_max_seconds,
        )
        url = settings.redis_url
        breaker: CircuitBreaker | None = None
        bans: BanStore
        if url is None or url.startswith("memory://"):
            bans = MemoryBanStore(policy)
        else:
            # One breaker per app (in production: per process) so apps in one test
            # process do not share an outage.
            breaker = CircuitBreaker("redis", BreakerConfig.from_settings(settings))
            client = redis.Redis.from_url(
                url,
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
            )
            bans = RedisBanStore(client, policy, prefix)
        return cls(
            limiter=RateLimiter(create_storage(url, prefix), breaker),
            bans=bans,
            trusted_proxies=parse_networks(settings.trusted_proxies),
            ipv6_prefix=settings.client_ipv6_prefix,
            ip_per_minute=settings.rate_limit_ip_per_minute,
            fail_mode=settings.rate_limit_fail_mode,
            breaker=breaker,
        )

    @property
    def remote(self) -> bool:
        """Whether checks do network I/O (Redis): callers on an event loop should then run
        them in a worker thread."""
        return self.breaker is not None

    # -- outage handling ----------------------------------------------------------------

    def _guarded(self, what: str, call: Callable[[], T], fallback: T) -> T:
        """Run a storage call; on an outage apply the fail mode (fallback, or 503)."""
        try:
            return call()
        except (BackendUnavailable, CircuitOpen) as exc:
            return self._outage(what, exc, fallback)

    def _ban_call(self, what: str, call: Callable[[], T], fallback: T) -> T:
        def through_breaker() -> T:
            if self.breaker is None:
                return call()
            return self.breaker.call(call, failure=(RedisError, OSError))

        try:
            return self._guarded(what, through_breaker, fallback)
        except (RedisError, OSError) as exc:
            return self._outage(what, exc, fallback)

    def _outage(self, what: str, exc: Exception, fallback: T) -> T:
        BACKEND_ERRORS.labels(self.fail_mode).inc()
        now = self.clock()
        if now - self._last_log >= _LOG_EVERY_SECONDS:  # one line per outage, not per call
            self._last_log = now
            log.warning(
                "rate-limit storage unavailable",
                check=what,
                fail_mode=self.fail_mode,
                error=type(exc).__name__,
            )
        if self.fail_mode == "open":
            return fallback
        if isinstance(exc, CircuitOpen):
            raise exc
        raise redis_unavailable("rate limiting is unavailable; retry later") from exc

    def operator_call(self, call: Callable[[], T]) -> T:
        """A ban-store call on an operator's behalf (list, unban): never failed open (an
        empty list would lie about who is banned); 503 naming Redis when it is down."""
        try:
            if self.breaker is None:
                return call()
            return self.breaker.call(call, failure=(RedisError, OSError))
        except (RedisError, OSError, CircuitOpen) as exc:
            raise redis_unavailable("the ban list (Redis) is unavailable; retry later") from exc

    # -- checks ------------------------------------------------------------------------

    def active_ban(self, ip: str) -> Ban | None:
        return self._ban_call("ban", lambda: self.bans.active_ban(ip), None)

    def record_auth_failure(self, ip: str) -> Ban | None:
        ban = self._ban_call("auth-failure", lambda: self.bans.record_failure(ip), None)
        if ban is not None:
            log.warning("ip banned", ip=ip, strikes=ban.strikes, until=ban.expires_at)
        return ban

    def limit_ip(self, ip: str) -> Decision | None:
        return self._limit("ip", ip, self.ip_per_minute, None)

    def tenant_rate(self, tenant_id: str, read_policy: Callable[[], int]) -> int:
        """The tenant's requests per minute, read from its policy at most every few
        seconds (a policy change applies within ``RATE_CACHE_SECONDS``)."""
        now = self.clock()
        cached = self._rates.get(tenant_id)
        if cached is not None and now - cached[1] < RATE_CACHE_SECONDS:
            return cached[0]
        per_minute = read_policy()
        self._rates[tenant_id] = (per_minute, now)
        return per_minute

    def limit_tenant(self, tenant_id: str, per_minute: int) -> Decision | None:
        return self._limit("tenant", tenant_id, per_minute, tenant_id)

    def _limit(
        self, name: str, identifier: str, per_minute: int, tenant_id: str | None
    ) -> Decision | None:
        """The decision (None when the storage is down and the mode is open); raises
        RateLimited when the limit is full."""
        decision = self._guarded(name, lambda: self.limiter.hit(name, identifier, per_minute), None)
        if decision is not None and not decision.allowed:
            request_rate_limited(tenant_id, name)
            raise LimitReached(
                f"the {name} rate limit of {per_minute} requests per minute is used up",
                decision,
                limit=name,
                value=per_minute,
            )
        return decision
