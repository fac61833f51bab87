"""The in-memory sliding-window counters: same answers as ``limits``, no threads, no leak."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import pytest
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from facegate.ratelimit.limiter import RateLimiter, create_storage
from facegate.ratelimit.memory import MemoryWindows


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_refuses_at_the_limit_and_counts_the_previous_window_by_its_overlap() -> None:
    windows = MemoryWindows()
    key = ("tenant", "a")
    hits = [windows.hit(key, 3, 60, 600.0 + i) for i in range(4)]
    assert [hit.allowed for hit in hits] == [True, True, True, False]
    assert [hit.remaining for hit in hits] == [2, 1, 0, 0]
    assert hits[-1].reset_in == pytest.approx(57.0)  # the current window ends at 660
    # 45 s into the next window a quarter of the previous one overlaps: 3 * 0.25 = 0.75.
    late = windows.hit(key, 3, 60, 705.0)
    assert late.allowed
    assert late.remaining == 2  # floor(0.75 + 1) = 1 used
    # Two windows later nothing is left of the first one.
    assert windows.hit(key, 3, 60, 841.0).remaining == 2


def test_same_decisions_as_limits_memory_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted run against ``limits``' own strategy on a patched clock."""
    clock = FakeClock(1_000_000.0)
    fake_time = SimpleNamespace(time=clock)
    monkeypatch.setattr("limits.storage.memory.time", fake_time)
    monkeypatch.setattr("limits.strategies.time", fake_time)
    storage = MemoryStorage()
    reference = SlidingWindowCounterRateLimiter(storage)
    ours = RateLimiter(MemoryWindows(), clock=clock)
    rng = random.Random(7)
    try:
        for _ in range(600):
            clock.now += rng.choice([0.0, 0.05, 0.4, 1.5, 7.0, 31.0])
            name, per_minute = rng.choice([("a", 5), ("b", 12)])
            item = RateLimitItemPerMinute(per_minute, namespace="facegate")
            allowed = reference.hit(item, "tenant", name)
            stats = reference.get_window_stats(item, "tenant", name)
            decision = ours.hit("tenant", name, per_minute)
            assert decision.allowed == allowed
            assert decision.remaining == stats.remaining
            expected_reset = max(0, -int(-(stats.reset_time - clock.now) // 1))
            assert abs(decision.reset_seconds - max(expected_reset, 0 if allowed else 1)) <= 1
    finally:
        storage.timer.cancel()


def test_stale_keys_are_forgotten_when_a_new_window_starts() -> None:
    windows = MemoryWindows()
    for ip in range(100):
        windows.hit(("ip", str(ip)), 10, 60, 60.0)
    windows.hit(("ip", "x"), 10, 60, 185.0)  # two windows later: the others are stale
    assert len(windows) == 1


def test_counts_from_many_threads_are_not_lost() -> None:
    windows = MemoryWindows()
    allowed: list[bool] = []

    def hammer() -> None:
        for _ in range(200):
            allowed.append(windows.hit(("tenant", "t"), 500, 60, 30.0).allowed)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 500


def test_memory_storage_starts_no_threads() -> None:
    before = threading.active_count()
    limiter = RateLimiter(create_storage(None, "unused"))
    for _ in range(50):
        limiter.hit("ip", "10.0.0.1", 1000)
    assert threading.active_count() == before
