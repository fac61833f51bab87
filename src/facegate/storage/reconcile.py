"""Reconciling the object store with the ledger on an operator's demand
(``facegate storage reconcile``): the objects of the ledgered kinds that have no ledger row
and were last written before a grace period.

Such an object is what a process killed between writing it and committing its row leaves
(an API SIGKILLed mid-upload: a submission writes its inputs before its transaction).
The hourly purge removes them too, but only on its second sighting (up to two hours);
after an incident an operator wants them gone now. A submission in flight looks the same
until it commits, hence the grace: an object younger than it is kept.

Only ``tenants/<tenant>/<kind>/...`` keys of the kinds the ledger covers (inputs, outputs,
previews, faces) are candidates; everything else the store holds without a row (the
shared models under ``models/``, a tenant's private models under
``tenants/<tenant>/models/``) is never looked at.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from facegate.storage.base import ObjectInfo, ObjectNotFound, ObjectStore
from facegate.storage.repository import StoredObjectRepository
from facegate.storage.tenant import KINDS

#: A key the ledger is meant to cover: its tenant, then one of the ledgered kinds.
LEDGERED_KEY = re.compile(
    r"^tenants/(?P<tenant>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)/"
    rf"(?:{'|'.join(sorted(KINDS))})/"
)
_LOOKUP_CHUNK = 500


@dataclass(frozen=True)
class Reconciliation:
    """What a reconciliation found: the orphans past the grace (to delete), how many
    younger ones it kept, and how many ledgered-kind objects it looked at."""

    orphans: list[ObjectInfo]
    young_orphans: int
    checked: int

    @property
    def orphan_bytes(self) -> int:
        return sum(item.size for item in self.orphans)


def find_orphans(
    session: Session, store: ObjectStore, now: datetime, grace: timedelta
) -> Reconciliation:
    """The objects under ``tenants/`` of a ledgered kind with no ledger row, split by
    whether they were last written before ``now - grace``."""
    by_tenant: dict[str, list[ObjectInfo]] = defaultdict(list)
    for item in store.list_objects("tenants/"):
        match = LEDGERED_KEY.match(item.key)
        if match is not None:
            by_tenant[match.group("tenant")].append(item)
    ledger = StoredObjectRepository(session)
    cutoff = now - grace
    orphans: list[ObjectInfo] = []
    young = 0
    for tenant_id, items in sorted(by_tenant.items()):
        for start in range(0, len(items), _LOOKUP_CHUNK):
            chunk = items[start : start + _LOOKUP_CHUNK]
            known = ledger.known_keys(tenant_id, [item.key for item in chunk])
            for item in chunk:
                if item.key in known:
                    continue
                if item.modified <= cutoff:
                    orphans.append(item)
                else:
                    young += 1
    checked = sum(len(items) for items in by_tenant.values())
    return Reconciliation(sorted(orphans, key=lambda item: item.key), young, checked)


def delete_orphans(store: ObjectStore, orphans: Sequence[ObjectInfo]) -> int:
    """Delete ``orphans`` from the store; how many were still there."""
    deleted = 0
    for item in orphans:
        try:
            deleted += store.delete(item.key)
        except ObjectNotFound:
            pass
    return deleted
