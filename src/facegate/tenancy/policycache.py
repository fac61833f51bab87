"""The tenants' policies as a submission last read them, checked on every submission.

A submission needs its tenant's policy (the limits its inputs are held to, the processors
it may use, the queue cap and quota). Reading the tenant and its policy through the ORM
costs ~0.6 ms of CPU; the policy changes rarely. So this process keeps, per app (per
engine), each tenant's policy as last read, with its **stamp**: the tenant's status and the
change times of its row and of its policy's (``updated_at``, set on every change of
either). Each submission reads the stamp (one indexed row, no ORM:
``TenancyRepository.policy_stamp``) and uses the kept policy only when the stamp is the one
it was read with; otherwise it reads the policy again. So a change, made by this process or
any other, takes effect on the very next submission, as without the cache:

- a changed policy (or tenant) has a new ``updated_at``: read again;
- a suspended tenant's submission is refused (401 ``tenant suspended``, as authentication
  answers), even while the credentials cache (``facegate.tenancy.keycache``) still holds
  its key for a few seconds after another process suspended it; its keys are dropped from
  that cache too;
- an erased or missing tenant goes the uncached way, which refuses it (409, 404).

A kept policy is a detached copy, shared by the requests: read it, never change it.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections import OrderedDict
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from facegate.errors import Unauthenticated
from facegate.tenancy.keycache import key_cache
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.service import TenancyService
from facegate.tenancy.tables import Policy

#: The stamp's statement (columns ``status``, ``tenant_updated_at``, ``policy_updated_at``;
#: bound parameter ``tenant_id``), built once.
STAMP = TenancyRepository.policy_stamp()
POLICY_CACHE_MAX_ENTRIES = 10_000

Stamp = tuple[datetime, datetime]  # (the tenant's updated_at, its policy's)


def detached_copy(policy: Policy) -> Policy:
    """A transient Policy with ``policy``'s column values (no session, no tenant)."""
    values = {
        column.key: copy.deepcopy(getattr(policy, column.key))
        for column in Policy.__table__.columns
    }
    return Policy(**values)


class PolicyCache:
    """Each tenant's policy with the stamp it was read with; safe across threads."""

    def __init__(self, max_entries: int = POLICY_CACHE_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Stamp, Policy]] = OrderedDict()
        self._lock = threading.Lock()

    def policy(self, session: Session, tenant_id: str, stamp: Any) -> Policy:
        """The policy of ``tenant_id`` for a submission, given its ``stamp`` row (the
        columns of :data:`STAMP`, read in ``session``'s transaction; None: no such
        tenant): the kept one when the stamp matches, else read in ``session``."""
        if stamp is None or stamp.status in ("erasing", "erased"):
            # The uncached way refuses it (404, 409); should it be back meanwhile, its
            # policy is read as on a change.
            return self._read(session, tenant_id)
        if stamp.status != "active":
            self._refuse(tenant_id)
        wanted = (stamp.tenant_updated_at, stamp.policy_updated_at)
        with self._lock:
            entry = self._entries.get(tenant_id)
            if entry is not None and entry[0] == wanted:
                self._entries.move_to_end(tenant_id)
                return entry[1]
        return self._read(session, tenant_id)

    def _read(self, session: Session, tenant_id: str) -> Policy:
        tenant = TenancyService(session).live_tenant(tenant_id)
        if not tenant.is_active:
            self._refuse(tenant_id)
        policy = tenant.policy
        kept = detached_copy(policy)
        # The stamp of what was read (not of the stamp row: on PostgreSQL a change may
        # have committed between the two statements; a newer policy under an older stamp
        # is only read once more).
        stamp = (tenant.updated_at, policy.updated_at)
        with self._lock:
            self._entries[tenant_id] = (stamp, kept)
            self._entries.move_to_end(tenant_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return kept

    def _refuse(self, tenant_id: str) -> None:
        self.forget(tenant_id)
        key_cache.invalidate_tenant(tenant_id)
        raise Unauthenticated("tenant suspended")

    def forget(self, tenant_id: str) -> None:
        with self._lock:
            self._entries.pop(tenant_id, None)

    def __len__(self) -> int:
        return len(self._entries)


_by_engine: weakref.WeakKeyDictionary[Engine, PolicyCache] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def policy_cache(engine: Engine) -> PolicyCache:
    """The cache of the app whose database is ``engine`` (one per app, so two apps of one
    process, as in tests, never share one)."""
    with _lock:
        cache = _by_engine.get(engine)
        if cache is None:
            cache = _by_engine[engine] = PolicyCache()
        return cache
