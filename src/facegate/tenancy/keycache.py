"""A small, bounded, short-lived cache of verified API keys.

Verifying a key is cheap (a SHA-256 and one indexed read), but reading the key and its
tenant means a database session, and for an async server a hop to a worker thread: that
was most of the cost of an authenticated read. A key verified against the database is
therefore remembered for :data:`AUTH_CACHE_SECONDS`, so that further requests with the
same key are answered without touching the database.

What still takes effect at once:

- revoking a key or changing a tenant (suspend, delete, apply) **in this process**
  invalidates the entries involved, both when the change is made and when its
  transaction commits (see :func:`invalidate_on_commit`);
- a key's ``expires_at`` is checked on every hit.

What takes up to :data:`AUTH_CACHE_SECONDS` (5 s): the same changes made by **another
process** (another API replica, ``facegate tenant apply --watch``, the CLI).

Entries are keyed by the key id *and* the SHA-256 of the presented secret, so a wrong
secret never matches an entry (and digests, not secrets, are compared). Failures are
never cached. ``last_used_at`` is still written at most once a minute: an entry whose
key is due for that write is a miss, and the full path writes it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.principal import Principal

AUTH_CACHE_SECONDS = 5.0
AUTH_CACHE_MAX_ENTRIES = 10_000
_PENDING = "facegate.keycache.pending"


@dataclass(frozen=True)
class CachedKey:
    """What a hit needs: the principal and the facts checked again on every hit."""

    principal: Principal
    expires_at: datetime | None
    last_used_at: datetime
    cached_at: float


class KeyCache:
    """LRU of verified keys, safe to use from the event loop and worker threads."""

    def __init__(
        self,
        ttl_seconds: float = AUTH_CACHE_SECONDS,
        max_entries: int = AUTH_CACHE_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[tuple[str, str], CachedKey] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, key_id: str, secret_hash: str, due: Callable[[datetime], bool]
    ) -> Principal | None:
        """The cached principal, or None when absent, stale, expired, or when ``due``
        says the key's ``last_used_at`` must be written."""
        now = self.clock()
        with self._lock:
            entry = self._entries.get((key_id, secret_hash))
            if entry is None:
                return None
            if now - entry.cached_at >= self.ttl_seconds:
                del self._entries[(key_id, secret_hash)]
                return None
            self._entries.move_to_end((key_id, secret_hash))
        wall = utcnow()
        if entry.expires_at is not None and entry.expires_at <= wall:
            return None
        if due(entry.last_used_at):
            return None
        return entry.principal

    def put(
        self,
        key_id: str,
        secret_hash: str,
        principal: Principal,
        *,
        expires_at: datetime | None,
        last_used_at: datetime,
    ) -> None:
        if self.ttl_seconds <= 0 or self.max_entries <= 0:
            return
        entry = CachedKey(principal, expires_at, last_used_at, self.clock())
        with self._lock:
            self._entries[(key_id, secret_hash)] = entry
            self._entries.move_to_end((key_id, secret_hash))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def invalidate_key(self, key_id: str) -> None:
        with self._lock:
            for cache_key in [k for k in self._entries if k[0] == key_id]:
                del self._entries[cache_key]

    def invalidate_tenant(self, tenant_id: str) -> None:
        with self._lock:
            stale = [k for k, v in self._entries.items() if v.principal.tenant_id == tenant_id]
            for cache_key in stale:
                del self._entries[cache_key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


# One per process: keys are global (their ids are unique), and the tenancy service, which
# knows nothing of apps, must be able to invalidate it.
key_cache = KeyCache()


def invalidate_on_commit(session: Session, *, key_id: str = "", tenant_id: str = "") -> None:
    """Drop the entries of a key or a tenant now and again when ``session`` commits (a
    request that re-reads the old row between the change and the commit would otherwise
    re-cache it)."""
    _invalidate(key_id, tenant_id)
    session.info.setdefault(_PENDING, []).append((key_id, tenant_id))


def _invalidate(key_id: str, tenant_id: str) -> None:
    if key_id:
        key_cache.invalidate_key(key_id)
    if tenant_id:
        key_cache.invalidate_tenant(tenant_id)


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    for key_id, tenant_id in session.info.pop(_PENDING, ()):
        _invalidate(key_id, tenant_id)


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Any) -> None:
    session.info.pop(_PENDING, None)
