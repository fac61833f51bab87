"""``facegate.jobs.room``: when a submission may skip step 1's reading of the queue cap and
the quota (the write transaction reads and decides in every case)."""

from __future__ import annotations

from facegate.jobs.room import ROOM_SEEN_SECONDS, Room, RoomSeen
from facegate.tenancy.tables import Policy


def policy(cap: int = 10, quota: int | None = 1000) -> Policy:
    return Policy(max_queued_jobs=cap, storage_quota_bytes=quota)


def test_far_only_within_half_of_both_limits_and_only_for_a_fresh_reading() -> None:
    now = [100.0]
    seen = RoomSeen(clock=lambda: now[0])
    assert not seen.far_from_limits("acme", policy(), 10)  # nothing seen yet
    seen.record("acme", Room(queued=4, used=400))
    assert seen.far_from_limits("acme", policy(), 100)  # 5 of 10 queued, 500 of 1000 bytes
    assert not seen.far_from_limits("acme", policy(), 101)  # past half the quota
    assert not seen.far_from_limits("acme", policy(cap=9), 100)  # past half the cap
    assert seen.far_from_limits("acme", policy(quota=None), 10**9)  # no quota
    assert not seen.far_from_limits("globex", policy(), 0)  # another tenant's reading
    now[0] += ROOM_SEEN_SECONDS + 0.1
    assert not seen.far_from_limits("acme", policy(), 0)  # too old


def test_a_forgotten_tenant_is_read_again() -> None:
    seen = RoomSeen()
    seen.record("acme", Room(queued=0, used=0))
    assert seen.far_from_limits("acme", policy(), 0)
    seen.forget("acme")
    assert not seen.far_from_limits("acme", policy(), 0)
