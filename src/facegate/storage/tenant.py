"""TenantStore: the only door to object storage for tenant data.

Keys are always ``tenants/<tenant>/<kind>/<job>/<name>``, built here from validated parts:
the tenant slug comes from the principal, the kind from a fixed set, the job id is a UUID
and the name comes from a fixed vocabulary (``source-0``, ``target``, ``result``...). A
client's file name never becomes part of a path.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, get_args

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.storage.base import (
    TENANT_PATTERN,
    InvalidKey,
    ObjectNotFound,
    ObjectStore,
    PresigningStore,
    StorageQuotaExceeded,
    check_key,
    data_size,
    file_chunks,
)
from facegate.storage.repository import StoredObjectRepository
from facegate.storage.tables import StoredObject

# ``faces``: a tenant's face library (facegate.library), keyed by the face's id in place of
# a job's; kept until deleted, never purged by retention. ``parts``: the rendered parts of a
# segmented video (``part-0003.mp4``), under the job's id until its result is assembled;
# retention purges any a failed or abandoned job left.
Kind = Literal["inputs", "outputs", "previews", "faces", "parts"]
RETAINED_KINDS: tuple[str, ...] = ("inputs", "outputs", "previews", "parts")
KINDS: frozenset[str] = frozenset(get_args(Kind))

NAME_PATTERN = re.compile(
    r"^(?:source-(?:[0-9]|1[0-5])|target|reference|result|preview|manifest|image|face"
    r"|part-[0-9]{4})"
    r"(?:\.(?:jpg|png|webp|mp4|webm|c2pa))?$"
)


@dataclass(frozen=True)
class ObjectRef:
    """Where one artifact lives and what it is."""

    key: str
    tenant_id: str
    kind: str
    job_id: uuid.UUID
    name: str
    content_type: str
    size_bytes: int


def build_key(tenant_id: str, kind: str, job_id: uuid.UUID | str, name: str) -> str:
    """The storage key of one artifact; every part is validated, none is taken as given."""
    if not TENANT_PATTERN.fullmatch(tenant_id):
        raise InvalidKey(f"invalid tenant id {tenant_id!r}")
    if kind not in KINDS:
        raise InvalidKey(f"invalid artifact kind {kind!r}")
    job = job_id if isinstance(job_id, uuid.UUID) else _parse_uuid(job_id)
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidKey(f"invalid artifact name {name!r}")
    return check_key(f"tenants/{tenant_id}/{kind}/{job}/{name}")


def _parse_uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidKey(f"invalid job id {value!r}") from None


def check_usage(used_bytes: int, incoming_bytes: int, quota_bytes: int | None) -> None:
    """Raise StorageQuotaExceeded when ``incoming_bytes`` more than ``used_bytes`` would pass
    the quota (None: no quota)."""
    if quota_bytes is not None and used_bytes + incoming_bytes > quota_bytes:
        raise StorageQuotaExceeded(
            quota_bytes=quota_bytes, used_bytes=used_bytes, requested_bytes=incoming_bytes
        )


class TenantStore:
    """Tenant-scoped reads and writes over an ObjectStore, with quota and retention.

    Methods that change the ledger take the caller's session and never commit: the caller
    owns the transaction (the job row and its inputs are committed together).
    """

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def usage_bytes(self, session: Session, tenant_id: str) -> int:
        return StoredObjectRepository(session).usage_bytes(tenant_id)

    def check_quota(
        self, session: Session, tenant_id: str, incoming_bytes: int, quota_bytes: int | None
    ) -> None:
        """Raise StorageQuotaExceeded when ``incoming_bytes`` more would pass the quota."""
        if quota_bytes is None:
            return
        check_usage(self.usage_bytes(session, tenant_id), incoming_bytes, quota_bytes)

    def put(
        self,
        session: Session,
        *,
        tenant_id: str,
        kind: Kind,
        job_id: uuid.UUID,
        name: str,
        data: bytes | Path,
        content_type: str,
        quota_bytes: int | None = None,
        new: bool = False,
    ) -> ObjectRef:
        """Write one artifact and record it; idempotent per key (a rewrite replaces it).

        ``data`` is the bytes, or a local file streamed in chunks (a video result is never
        held in memory whole).

        ``new=True``: the caller knows the key is unused (a job id it has just made), so
        the ledger is not searched for an entry to replace (were it there after all, the
        insert would fail at flush, not overwrite)."""
        key = build_key(tenant_id, kind, job_id, name)
        ledger = StoredObjectRepository(session)
        existing = None if new else ledger.by_key(tenant_id, key)
        replaced = existing.size_bytes if existing is not None else 0
        self.check_quota(session, tenant_id, data_size(data) - replaced, quota_bytes)
        if isinstance(data, bytes):
            size = self.store.put(key, data)
        else:
            size = self.store.put_stream(key, file_chunks(data))
        if existing is None:
            ledger.add(
                StoredObject(
                    key=key,
                    tenant_id=tenant_id,
                    kind=kind,
                    job_id=job_id,
                    name=name,
                    content_type=content_type,
                    size_bytes=size,
                    created_at=utcnow(),
                )
            )
        else:
            existing.size_bytes = size
            existing.content_type = content_type
            existing.created_at = utcnow()
        session.flush()
        return ObjectRef(key, tenant_id, kind, job_id, name, content_type, size)

    def write_new(
        self,
        *,
        tenant_id: str,
        kind: Kind,
        job_id: uuid.UUID,
        name: str,
        data: bytes,
        content_type: str,
    ) -> ObjectRef:
        """Write one artifact under a key nobody uses yet (a job id just made), without its
        ledger row: a submission writes its inputs before its write transaction opens and
        records them in it (:meth:`record`). Until then the object is an orphan, which the
        quota does not count and :meth:`sweep_orphans` and ``facegate storage reconcile``
        delete if the row never comes."""
        key = build_key(tenant_id, kind, job_id, name)
        size = self.store.put(key, data)
        return ObjectRef(key, tenant_id, kind, job_id, name, content_type, size)

    def record(self, session: Session, refs: Iterable[ObjectRef], *, flush: bool = True) -> None:
        """Add the ledger rows of objects :meth:`write_new` wrote (no quota check: the
        caller checked the quota in this transaction); ``flush=False`` leaves the insert
        to the caller's next flush."""
        ledger = StoredObjectRepository(session)
        for row in self.ledger_rows(refs):
            ledger.add(row)
        if flush:
            session.flush()

    @staticmethod
    def ledger_rows(refs: Iterable[ObjectRef]) -> list[StoredObject]:
        """The new ledger rows of objects :meth:`write_new` wrote, for the caller to insert
        (:meth:`record`, or ``database.insert_rows`` beside the job's row)."""
        now = utcnow()
        return [
            StoredObject(
                key=ref.key,
                tenant_id=ref.tenant_id,
                kind=ref.kind,
                job_id=ref.job_id,
                name=ref.name,
                content_type=ref.content_type,
                size_bytes=ref.size_bytes,
                created_at=now,
            )
            for ref in refs
        ]

    def get(self, tenant_id: str, kind: Kind, job_id: uuid.UUID, name: str) -> bytes:
        return self.store.get(build_key(tenant_id, kind, job_id, name))

    def iter_chunks(
        self, tenant_id: str, kind: Kind, job_id: uuid.UUID, name: str
    ) -> Iterator[bytes]:
        return self.store.iter_chunks(build_key(tenant_id, kind, job_id, name))

    def download_url(
        self,
        tenant_id: str,
        kind: Kind,
        job_id: uuid.UUID,
        name: str,
        expires_seconds: int | None = None,
        *,
        filename: str | None = None,
    ) -> str | None:
        """A short-lived direct URL for one artifact where the backend signs them (S3),
        else None (serve the bytes instead). Check the ledger (``find``) first: the URL
        is signed whether or not the object exists."""
        if not isinstance(self.store, PresigningStore):
            return None
        key = build_key(tenant_id, kind, job_id, name)
        return self.store.presigned_url(key, expires_seconds, filename=filename)

    def find(
        self, session: Session, tenant_id: str, kind: Kind, job_id: uuid.UUID, name: str
    ) -> ObjectRef | None:
        """The ledger entry of one artifact of this tenant, or None."""
        row = StoredObjectRepository(session).by_key(
            tenant_id, build_key(tenant_id, kind, job_id, name)
        )
        return None if row is None else _ref(row)

    def delete_keys(self, keys: list[str]) -> None:
        """Remove objects from the store (used to undo the writes of a refused submission)."""
        for key in keys:
            self.store.delete(key)

    def delete_job(self, session: Session, tenant_id: str, job_id: uuid.UUID) -> int:
        """Delete every artifact of one job of this tenant; returns how many."""
        ledger = StoredObjectRepository(session)
        rows = ledger.of_job(tenant_id, job_id)
        for row in rows:
            self.store.delete(row.key)
        if rows:
            ledger.delete_rows(tenant_id, [row.key for row in rows])
        session.flush()
        return len(rows)

    def delete_kind(self, session: Session, tenant_id: str, kind: Kind, job_id: uuid.UUID) -> int:
        """Delete the artifacts of one kind of one job of this tenant; returns how many."""
        ledger = StoredObjectRepository(session)
        rows = [row for row in ledger.of_job(tenant_id, job_id) if row.kind == kind]
        for row in rows:
            try:
                self.store.delete(row.key)
            except ObjectNotFound:
                pass
        if rows:
            ledger.delete_rows(tenant_id, [row.key for row in rows])
        session.flush()
        return len(rows)

    def purge_expired(
        self, session: Session, now: datetime, retention_days: Mapping[str, int]
    ) -> int:
        """Delete artifacts older than their tenant's retention; returns how many (the
        face library is not subject to retention).

        Tenants missing from ``retention_days`` keep their artifacts (no policy, no purge).
        """
        ledger = StoredObjectRepository(session)
        purged = 0
        for tenant_id, days in retention_days.items():
            rows = ledger.older_than(tenant_id, now - timedelta(days=days), RETAINED_KINDS)
            for row in rows:
                try:
                    self.store.delete(row.key)
                except ObjectNotFound:
                    pass
            if rows:
                ledger.delete_rows(tenant_id, [r.key for r in rows])
            purged += len(rows)
        session.flush()
        return purged

    def sweep_orphans(
        self, session: Session, tenant_ids: Iterable[str], suspects: Set[str]
    ) -> tuple[int, set[str]]:
        """Reconcile the store with the ledger: delete objects that have no ledger row.

        Such an object is what a process killed between writing it and committing its row
        leaves (an API SIGKILLed mid-submission): invisible to its tenant, counted in no
        quota, walked by no retention purge. A submission in flight looks the same for a
        moment, so a sweep deletes only the orphans the previous sweep already saw
        (``suspects``; sweeps run an hour apart) and returns (how many it deleted, the
        orphans to confirm next time)."""
        orphans: set[str] = set()
        for tenant_id in tenant_ids:
            for kind in sorted(KINDS):
                keys = self.store.list(f"tenants/{tenant_id}/{kind}/")
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    known = StoredObjectRepository(session).known_keys(tenant_id, chunk)
                    orphans.update(key for key in chunk if key not in known)
        doomed = orphans & suspects
        for key in sorted(doomed):
            try:
                self.store.delete(key)
            except ObjectNotFound:
                pass
        return len(doomed), orphans - doomed


def _ref(row: StoredObject) -> ObjectRef:
    return ObjectRef(
        row.key, row.tenant_id, row.kind, row.job_id, row.name, row.content_type, row.size_bytes
    )
