"""What this process last saw of each tenant's queue cap and storage quota.

A submission reads both twice (``facegate.jobs.service``): in step 1, only so that a refused
request is spared its decode and writes, and in step 3, under the write lock, where the
answer is decided. Where a submission of the same tenant saw it far from both limits moments
ago, step 1's reading is skipped: the request would pass it. Step 3 still reads and decides,
so a cap or quota is never passed; a refusal that comes anyway (a burst, a lowered limit)
only costs that request's own decode.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine

from facegate.tenancy.tables import Policy

#: How long a reading stands for the next submissions of its tenant.
ROOM_SEEN_SECONDS = 2.0


@dataclass(frozen=True)
class Room:
    """One reading: the tenant's queued jobs and stored bytes (None: no quota read)."""

    queued: int
    used: int | None


class RoomSeen:
    """The last reading per tenant, with when it was taken."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[float, Room]] = {}

    def record(self, tenant_id: str, room: Room) -> None:
        self._seen[tenant_id] = (self._clock(), room)

    def forget(self, tenant_id: str) -> None:
        self._seen.pop(tenant_id, None)

    def far_from_limits(self, tenant_id: str, policy: Policy, incoming_bytes: int) -> bool:
        """True when a reading of the last :data:`ROOM_SEEN_SECONDS` left the tenant, with
        this request, at most half its queue cap and half its storage quota."""
        seen = self._seen.get(tenant_id)
        if seen is None or self._clock() - seen[0] > ROOM_SEEN_SECONDS:
            return False
        room = seen[1]
        if (room.queued + 1) * 2 > policy.max_queued_jobs:
            return False
        quota = policy.storage_quota_bytes
        return quota is None or ((room.used or 0) + incoming_bytes) * 2 <= quota


_by_engine: weakref.WeakKeyDictionary[Engine, RoomSeen] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def room_seen(engine: Engine) -> RoomSeen:
    """The readings of the app whose database is ``engine`` (one per app, so two apps of
    one process, as in tests, never share them)."""
    with _lock:
        seen = _by_engine.get(engine)
        if seen is None:
            seen = _by_engine[engine] = RoomSeen()
        return seen
