"""Sliding-window counters in process memory, without background threads.

The ``limits`` library's ``MemoryStorage`` expires keys from a ``threading.Timer`` that it
re-creates on almost every counted hit once the previous one has fired (10 ms later): on a
busy server that is a new OS thread per request, most of the cost of a rate-limit check.
:class:`MemoryWindows` keeps the same sliding-window-counter arithmetic as ``limits``'
``SlidingWindowCounterRateLimiter`` (so memory and Redis answer alike) but holds only two
counts per key and forgets stale keys itself when a new window starts.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowHit:
    """The outcome of one counted hit: allowed, requests left, seconds until there is room."""

    allowed: bool
    remaining: int
    reset_in: float


class _Window:
    """The counts of one key: the current fixed window (by index) and the one before."""

    __slots__ = ("current", "index", "previous")

    def __init__(self, index: int) -> None:
        self.index = index
        self.current = 0
        self.previous = 0

    def roll(self, index: int) -> None:
        if index == self.index:
            return
        self.previous = self.current if index == self.index + 1 else 0
        self.current = 0
        self.index = index


class MemoryWindows:
    """Per-key sliding-window counters (thread-safe: hits come from the event loop and
    from worker threads alike)."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, ...], _Window] = {}
        self._lock = threading.Lock()
        self._swept_index = -1

    def __len__(self) -> int:
        return len(self._windows)

    def hit(self, key: tuple[str, ...], limit: int, expiry: int, now: float) -> WindowHit:
        """Count one request against ``key`` (``limit`` per ``expiry`` seconds) unless the
        weighted count is already at the limit."""
        index = int(now // expiry)
        # Seconds of the previous window that still overlap the sliding one.
        previous_ttl = expiry - (now % expiry)
        with self._lock:
            if index != self._swept_index:
                self._sweep(index)
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = _Window(index)
            window.roll(index)
            weighted = window.previous * previous_ttl / expiry + window.current
            allowed = math.floor(weighted) + 1 <= limit
            if allowed:
                window.current += 1
                weighted += 1
            previous, current = window.previous, window.current
        remaining = max(0, limit - math.floor(weighted))
        reset_in = _reset_in(previous, previous_ttl, current, now, expiry)
        return WindowHit(allowed, remaining, reset_in)

    def _sweep(self, index: int) -> None:
        """Drop keys with no count in the previous or current window (once per window:
        per-IP keys would otherwise accumulate for the life of the process)."""
        stale = [key for key, window in self._windows.items() if window.index < index - 1]
        for key in stale:
            del self._windows[key]
        self._swept_index = index


def _reset_in(previous: int, previous_ttl: float, current: int, now: float, expiry: int) -> float:
    """When the weighted count next drops by one, as ``limits`` computes it: the previous
    window's weight loses one request every ``expiry / previous`` seconds, the current
    window's count only when it becomes the previous one."""
    if not (previous or current):
        return 0.0
    previous_reset = previous_ttl % (expiry / previous) if previous else math.inf
    current_reset = expiry - (now % expiry) if current else math.inf
    return min(previous_reset, current_reset)
