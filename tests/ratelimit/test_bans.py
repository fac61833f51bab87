"""Bans on both adapters: 5 failures in 10 minutes → 10 minutes, doubling on repeat."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from ratelimitfactories import require_redis, unique_prefix

from facegate.ratelimit.bans import BanPolicy, BanStore, MemoryBanStore
from facegate.ratelimit.redisbans import RedisBanStore

POLICY = BanPolicy()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def stores(request: pytest.FixtureRequest) -> Iterator[tuple[BanStore, FakeClock]]:
    clock = FakeClock()
    if request.param == "memory":
        yield MemoryBanStore(POLICY, clock=clock), clock
        return
    client = redis.Redis.from_url(require_redis())
    prefix = unique_prefix()
    yield RedisBanStore(client, POLICY, prefix, clock=clock), clock
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    client.close()


def test_policy_durations_double_up_to_the_cap() -> None:
    policy = BanPolicy(ban_seconds=600, max_ban_seconds=3000)
    assert [policy.duration(n) for n in (1, 2, 3, 4)] == [600, 1200, 2400, 3000]


def test_fifth_failure_in_the_window_bans(stores: tuple[BanStore, FakeClock]) -> None:
    store, clock = stores
    for _ in range(4):
        assert store.record_failure("198.51.100.7") is None
        clock.now += 60
    ban = store.record_failure("198.51.100.7")
    assert ban is not None
    assert (ban.strikes, ban.expires_at) == (1, clock.now + 600)
    assert store.active_ban("198.51.100.7") == ban
    assert store.active_ban("198.51.100.8") is None
    assert store.list_bans() == [ban]


def test_failures_outside_the_window_do_not_add_up(stores: tuple[BanStore, FakeClock]) -> None:
    store, clock = stores
    for _ in range(10):
        assert store.record_failure("198.51.100.7") is None
        clock.now += 151  # never 5 within 600 s
    assert store.active_ban("198.51.100.7") is None


def test_repeat_bans_double_and_unban_keeps_history(stores: tuple[BanStore, FakeClock]) -> None:
    store, clock = stores
    for _ in range(5):
        first = store.record_failure("2001:db8::1")
    assert first is not None
    assert store.record_failure("2001:db8::1") is None  # banned already: no new strike
    assert store.unban("2001:db8::1")
    assert not store.unban("2001:db8::1")
    assert store.active_ban("2001:db8::1") is None
    for _ in range(5):
        second = store.record_failure("2001:db8::1")
    assert second is not None
    assert second.strikes == 2
    assert second.expires_at == clock.now + 1200
    assert store.unban("2001:db8::1", forget=True)
    for _ in range(5):
        third = store.record_failure("2001:db8::1")
    assert third is not None
    assert third.strikes == 1  # forgotten: short again
    assert store.list_bans() == [third]
