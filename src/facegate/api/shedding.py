"""Load shedding: refuse work with 503 + ``Retry-After`` instead of letting it pile up.

Two global caps (the specification's gateway protection, next to the circuit breakers of
``facegate.resilience``): requests in flight in this process, and jobs queued across all
tenants (checked when a job is submitted, before its upload is read). Each tenant's own
queue cap is a policy matter and stays in ``jobs.service`` (429).

The in-flight slots are shared fairly: one client (an IP, an IPv6 /64) may hold at most
``per_client`` of them; requests without verified credentials together at most
``unauthenticated``, and public uploads without them (``POST /v1/verify``, ``/v1/reports``)
their own ``public_uploads`` beside that. So no source of slow or abusive connections, from
any number of addresses, can take the slots tenants with valid keys need (429
``rate-limited`` naming the share, for that client only, while everyone else is served).

A header is not a credential: each request holds a :class:`Slot` that enters as
``anonymous`` (no credentials) or ``pending`` (credentials not checked yet). The body guard
authenticates a body's credentials from the headers before reading a byte and moves the slot
(``verified``; ``public`` or ``anonymous`` when the route takes none); a bad credential is a
401 at once, so it never holds a slot longer than its check.

Counting the queue takes a database query and a worker-thread hop, more than the rest of
a submission's checks together, so :class:`QueuedEstimate` reuses a recent count while the
queue is far from the cap and counts exactly again near it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import structlog
from anyio import to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from facegate.api.errors import ProblemError
from facegate.api.gateway import EXEMPT_PATHS, has_credentials, send_problem
from facegate.database import session_scope
from facegate.errors import RateLimited
from facegate.jobs.repository import JobRepository
from facegate.ratelimit.clientip import DEFAULT_IPV6_PREFIX, Network, client_ip, client_key

SUBMIT_PATH = "/v1/jobs"
# How long a count of the queue may be reused while far from the cap.
QUEUED_COUNT_TTL_SECONDS = 1.0
#: Where a request's :class:`Slot` is kept in the ASGI scope's ``state``.
SLOT_STATE = "in_flight_slot"
SlotKind = Literal["anonymous", "public", "pending", "verified"]
log = structlog.get_logger(__name__)


class Overloaded(ProblemError):
    """A global capacity cap is reached; ``limit`` names it."""

    status = 503
    type_slug = "overloaded"
    title = "Overloaded"


def _is_long_lived(path: str) -> bool:
    # Event streams stay open for a job's lifetime; they would hold slots for minutes.
    return path.endswith("/events")


class QueuedEstimate:
    """The queued-jobs count, re-read at most every ``ttl`` seconds while it stays more
    than a tenth of ``cap`` below the cap. Each admitted submission adds one to the
    estimate (a refused upload only makes it err high), so near the cap every decision
    is taken on an exact count; what this process cannot see (other processes'
    submissions) is at most ``ttl`` seconds old."""

    def __init__(
        self, cap: int, *, ttl: float = QUEUED_COUNT_TTL_SECONDS, clock: Callable[[], float]
    ) -> None:
        self.cap = cap
        self.ttl = ttl
        self.clock = clock
        self.margin = max(1, cap // 10)
        self._count = 0
        self._read_at = -float("inf")

    def fresh(self) -> int | None:
        """The estimate when it may stand in for a count, else None (count again)."""
        if self.clock() - self._read_at > self.ttl or self._count + self.margin >= self.cap:
            return None
        return self._count

    def counted(self, queued: int) -> None:
        self._count, self._read_at = queued, self.clock()

    def admitted(self) -> None:
        self._count += 1


class InFlight:
    """Requests in flight per key (a client IP, a tenant). Used on the event loop thread
    only: no lock between a check and the add."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}

    def held(self, key: str) -> int:
        return self._held.get(key, 0)

    def add(self, key: str) -> None:
        self._held[key] = self.held(key) + 1

    def remove(self, key: str) -> None:
        left = self._held[key] - 1
        if left:
            self._held[key] = left
        else:
            del self._held[key]  # no entry left behind per address ever seen


class Shares:
    """Requests in flight by kind of caller, and the caps of the kinds that have one
    (``anonymous``, ``public``; 0: no cap)."""

    def __init__(self, caps: dict[SlotKind, int], retry_after: int) -> None:
        self.caps = caps
        self.retry_after = retry_after
        self.held: dict[SlotKind, int] = {"anonymous": 0, "public": 0, "pending": 0, "verified": 0}

    def refusal(self, kind: SlotKind) -> RateLimited | None:
        """A 429 when ``kind``'s share is full."""
        cap = self.caps.get(kind, 0)
        if not cap or self.held[kind] < cap:
            return None
        limit, who = _SHARE_NAMES[kind]
        return RateLimited(
            f"{who} have {cap} requests in flight already; retry later",
            retry_after=self.retry_after,
            limit=limit,
            limit_value=cap,
        )


_SHARE_NAMES: dict[SlotKind, tuple[str, str]] = {
    "anonymous": ("max_in_flight_unauthenticated", "requests without valid credentials"),
    "public": ("max_in_flight_public_uploads", "public uploads without valid credentials"),
}


class Slot:
    """One admitted request's place in :class:`Shares` (kept in the scope's state under
    ``SLOT_STATE``), moved by whoever learns who is asking."""

    def __init__(self, shares: Shares, kind: SlotKind) -> None:
        self.shares = shares
        self.kind: SlotKind = kind
        shares.held[kind] += 1

    def become(self, kind: SlotKind) -> None:
        """Count this request as ``kind`` from now on; raises RateLimited (and stays what
        it was) when that share is full."""
        if kind == self.kind:
            return
        refusal = self.shares.refusal(kind)
        if refusal is not None:
            raise refusal
        self.shares.held[self.kind] -= 1
        self.shares.held[kind] += 1
        self.kind = kind

    def release(self) -> None:
        self.shares.held[self.kind] -= 1


def slot_of(scope: Scope) -> Slot | None:
    """The request's slot (None when no shedding middleware counted it)."""
    slot: Slot | None = scope.get("state", {}).get(SLOT_STATE)
    return slot


class LoadSheddingMiddleware:
    """Caps requests in flight (``max_in_flight``) and queued jobs (``max_queued``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_in_flight: int,
        max_queued: int,
        retry_after: int,
        per_client: int = 0,
        unauthenticated: int = 0,
        public_uploads: int = 0,
        trusted_proxies: tuple[Network, ...] = (),
        ipv6_prefix: int = DEFAULT_IPV6_PREFIX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.max_in_flight = max_in_flight
        self.per_client = per_client
        self.unauthenticated = unauthenticated
        self.trusted_proxies = trusted_proxies
        self.ipv6_prefix = ipv6_prefix
        self.by_client = InFlight()
        self.shares = Shares({"anonymous": unauthenticated, "public": public_uploads}, retry_after)
        self.max_queued = max_queued
        self.retry_after = retry_after
        self.in_flight = 0
        self.queued = QueuedEstimate(max_queued, clock=clock)

    def _refusal(self, detail: str, limit: str, value: int) -> Overloaded:
        return Overloaded(
            detail,
            headers={"Retry-After": str(self.retry_after)},
            limit=limit,
            limit_value=value,
            retry_after=self.retry_after,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in EXEMPT_PATHS or _is_long_lived(path):
            await self.app(scope, receive, send)
            return
        if self.max_in_flight and self.in_flight >= self.max_in_flight:
            log.warning("shedding request", limit="max_in_flight_requests", path=path)
            refusal = self._refusal(
                "the server is at its limit of requests in flight; retry later",
                "max_in_flight_requests",
                self.max_in_flight,
            )
            await send_problem(scope, send, refusal)
            return
        ip = client_key(client_ip(scope, self.trusted_proxies), self.ipv6_prefix)
        kind: SlotKind = "pending" if has_credentials(scope) else "anonymous"
        share = self._share_refusal(ip, kind)
        if share is not None:
            log.warning("shedding request", limit=share.extra["limit"], path=path, ip=ip)
            await send_problem(scope, send, share)
            return
        # Counted on the event loop thread: no lock needed between the check and the add.
        self.in_flight += 1
        self.by_client.add(ip)
        slot = Slot(self.shares, kind)
        scope.setdefault("state", {})[SLOT_STATE] = slot
        try:
            if self.max_queued and scope.get("method") == "POST" and path == SUBMIT_PATH:
                queued = self.queued.fresh()
                if queued is None:
                    queued = await to_thread.run_sync(_count_queued, scope["app"])
                    self.queued.counted(queued)
                if queued >= self.max_queued:
                    log.warning("shedding job submission", queued=queued)
                    refusal = self._refusal(
                        f"{queued} jobs are queued on this service; retry later",
                        "max_queued_jobs_total",
                        self.max_queued,
                    )
                    await send_problem(scope, send, refusal)
                    return
                self.queued.admitted()
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            slot.release()
            self.by_client.remove(ip)

    def _share_refusal(self, ip: str, kind: SlotKind) -> RateLimited | None:
        """A 429 when this client (or all requests without credentials) holds its share."""
        if self.per_client and self.by_client.held(ip) >= self.per_client:
            return RateLimited(
                f"this client has {self.per_client} requests in flight already; retry later",
                retry_after=self.retry_after,
                limit="max_in_flight_per_client",
                limit_value=self.per_client,
            )
        return self.shares.refusal(kind)

    @property
    def anonymous(self) -> int:
        """Requests in flight counted as without valid credentials (public uploads too)."""
        return self.shares.held["anonymous"] + self.shares.held["public"]


def _count_queued(app: Any) -> int:
    with session_scope(app.state.facegate.session_factory) as session:
        return JobRepository(session).count_queued_all_tenants()
