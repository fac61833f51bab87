"""fail2ban-style bans: too many failed authentications from one IP → a ban that doubles.

``max_failures`` failed authentications within ``window_seconds`` ban the IP for
``ban_seconds``; each further ban of the same IP (remembered ``memory_seconds``) lasts
twice as long as the one before, up to ``max_ban_seconds``. An admin unban lifts the ban
and keeps the history, so a repeat offender still escalates (``forget`` clears it too).

Two adapters of one small port: Redis (one Lua script per failure, atomic across API
processes) and memory (the embedded shape, and a fake clock for tests).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class BanPolicy:
    """The thresholds; defaults follow the usual fail2ban jail (5 in 10 min → 10 min)."""

    max_failures: int = 5
    window_seconds: int = 600
    ban_seconds: int = 600
    max_ban_seconds: int = 7 * 24 * 3600
    memory_seconds: int = 30 * 24 * 3600

    def duration(self, strikes: int) -> int:
        """How long the ``strikes``-th ban lasts (1 → ban_seconds, 2 → twice that...)."""
        return int(min(self.ban_seconds * 2 ** max(0, strikes - 1), self.max_ban_seconds))


@dataclass(frozen=True)
class Ban:
    """An active ban: which IP, its how-many-th, and when it ends (unix seconds)."""

    ip: str
    strikes: int
    expires_at: float

    def retry_after(self, now: float) -> int:
        return max(1, math.ceil(self.expires_at - now))


class BanStore(Protocol):
    """Failure counting and bans by IP."""

    def record_failure(self, ip: str) -> Ban | None:
        """Count one failed authentication; the new Ban when this one tipped it over."""
        ...

    def active_ban(self, ip: str) -> Ban | None: ...

    def list_bans(self) -> list[Ban]: ...

    def unban(self, ip: str, *, forget: bool = False) -> bool:
        """Lift a ban; True when there was one. ``forget`` also drops the strike history."""
        ...


class MemoryBanStore:
    """Bans in process memory (embedded shape); ``clock`` is injectable for tests."""

    def __init__(self, policy: BanPolicy, *, clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}
        self._bans: dict[str, Ban] = {}
        self._strikes: dict[str, tuple[int, float]] = {}  # ip -> (count, forgotten at)

    def record_failure(self, ip: str) -> Ban | None:
        now = self._clock()
        with self._lock:
            if self._active(ip, now) is not None:
                return None
            failures = self._failures.setdefault(ip, deque())
            failures.append(now)
            while failures and failures[0] <= now - self.policy.window_seconds:
                failures.popleft()
            if len(failures) < self.policy.max_failures:
                return None
            del self._failures[ip]
            count, until = self._strikes.get(ip, (0, 0.0))
            strikes = (count if until > now else 0) + 1
            self._strikes[ip] = (strikes, now + self.policy.memory_seconds)
            ban = Ban(ip, strikes, now + self.policy.duration(strikes))
            self._bans[ip] = ban
            return ban

    def _active(self, ip: str, now: float) -> Ban | None:
        ban = self._bans.get(ip)
        if ban is not None and ban.expires_at <= now:
            del self._bans[ip]
            return None
        return ban

    def active_ban(self, ip: str) -> Ban | None:
        with self._lock:
            return self._active(ip, self._clock())

    def list_bans(self) -> list[Ban]:
        now = self._clock()
        with self._lock:
            return sorted(
                (ban for ip in list(self._bans) if (ban := self._active(ip, now))),
                key=lambda ban: ban.ip,
            )

    def unban(self, ip: str, *, forget: bool = False) -> bool:
        with self._lock:
            self._failures.pop(ip, None)
            if forget:
                self._strikes.pop(ip, None)
            return self._bans.pop(ip, None) is not None
