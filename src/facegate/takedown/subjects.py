"""Erasing one person inside a tenant (GDPR Art. 17), with a signed receipt.

The person is given by a photo and/or saved faces of the library. Everything derived from
their face is found with the recogniser (``matching.scan``: the tenant's retained job
sources and saved faces) and erased: the saved faces (image, prepared source, embedding),
the jobs with their inputs and results, their batch items, the source cache's entries of
the tenant in this process. The jobs answer 410 Gone naming the receipt. The consent
attestations stay: the legal record, which holds the image's SHA-256 only.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections import Counter
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from facegate.batches.repository import BatchRepository
from facegate.database import SessionFactory, session_scope, utcnow
from facegate.engine.identity import LEARNED
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import FloatArray
from facegate.errors import InvalidInput
from facegate.jobs.repository import JobRepository
from facegate.library.repository import LibraryRepository
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys
from facegate.provenance.receipts import canonical, sign_statement
from facegate.storage.base import ObjectNotFound
from facegate.storage.repository import StoredObjectRepository
from facegate.storage.tenant import KINDS, TenantStore
from facegate.takedown.erasure import RECEIPT_FORMAT
from facegate.takedown.matching import ScanResult, describe_image, scan
from facegate.takedown.tables import TakedownRemoval


def _probe(
    session: Session,
    engine: EngineRuntime,
    tenant_id: str,
    photo: bytes | None,
    face_ids: list[uuid.UUID],
) -> list[FloatArray]:
    probe = describe_image(engine, photo) if photo is not None else []
    faces = LibraryRepository(session).get_many(tenant_id, face_ids)
    if len(faces) != len(set(face_ids)):
        raise InvalidInput("a face_id names no saved face of this tenant", field="face_id")
    for face in faces:
        if face.embedding_kind == LEARNED:
            probe.append(np.asarray(face.embedding, np.float32))
    if not probe:
        raise InvalidInput(
            "no face to erase: send a photo of the person or saved faces of them",
            code="no-face-to-match",
        )
    return probe


def _erase_objects(store: TenantStore, tenant_id: str, item_id: uuid.UUID) -> Counter[str]:
    counts: Counter[str] = Counter()
    for kind in sorted(KINDS):
        for key in store.store.list(f"tenants/{tenant_id}/{kind}/{item_id}/"):
            try:
                store.store.delete(key)
            except ObjectNotFound:
                continue
            counts[kind] += 1
    return counts


def erase_subject(
    sessions: SessionFactory,
    writes: SessionFactory,
    store: TenantStore,
    engine: EngineRuntime,
    keys: InstallationKeys,
    principal: Principal,
    tenant_id: str,
    *,
    photo: bytes | None = None,
    face_ids: list[uuid.UUID] | None = None,
) -> dict[str, Any]:
    """Erase the person (module docstring); the signed receipt. The scan runs in a
    read-only transaction, the erasure in one short write transaction after it."""
    face_ids = list(face_ids or [])
    with session_scope(sessions, read_only=True) as session:
        probe = _probe(session, engine, tenant_id, photo, face_ids)
        found = scan(session, store, engine, probe, [tenant_id])
    with session_scope(writes) as session:
        return _erase(session, store, keys, principal, tenant_id, found, face_ids)


def _erase(
    session: Session,
    store: TenantStore,
    keys: InstallationKeys,
    principal: Principal,
    tenant_id: str,
    found: ScanResult,
    face_ids: list[uuid.UUID],
) -> dict[str, Any]:
    jobs = sorted({m.item_id for m in found.matches if m.kind == "job"})
    faces = sorted({m.item_id for m in found.matches if m.kind == "face"} | set(face_ids))
    receipt_id = secrets.token_hex(16)
    now = utcnow()
    objects: Counter[str] = Counter()
    ledger = StoredObjectRepository(session)
    for item in [*jobs, *faces]:
        rows = ledger.of_job(tenant_id, item)
        ledger.delete_rows(tenant_id, [row.key for row in rows])
        objects.update(_erase_objects(store, tenant_id, item))
    for job_id in jobs:
        session.add(
            TakedownRemoval(
                job_id=job_id,
                tenant_id=tenant_id,
                case_id=receipt_id,
                reason="erasure",
                removed_at=now,
            )
        )
    BatchRepository(session).forget_jobs(tenant_id, jobs)
    deleted_jobs = JobRepository(session).delete_jobs(tenant_id, jobs)
    library = LibraryRepository(session)
    for face in library.get_many(tenant_id, faces):
        library.delete(face)
    session.flush()
    counts = {
        "jobs": deleted_jobs,
        "library_faces": len(faces),
        "objects": dict(sorted(objects.items())),
    }
    event = record_audit(
        session,
        principal,
        audit.SUBJECT_ERASE,
        f"subject:{receipt_id}",
        {**counts, "jobs_compared": found.jobs_compared},
        tenant_id=tenant_id,
    )
    left_objects = sum(
        len(store.store.list(f"tenants/{tenant_id}/{kind}/{item}/"))
        for item in [*jobs, *faces]
        for kind in KINDS
    )
    rows_left = {
        "jobs": len(JobRepository(session).get_many(tenant_id, jobs)),
        "library_faces": len(library.get_many(tenant_id, faces)),
        "stored_objects": sum(len(ledger.of_job(tenant_id, i)) for i in [*jobs, *faces]),
    }
    statement = {
        "format": RECEIPT_FORMAT,
        "kind": "subject",
        "id": receipt_id,
        "tenant_id": tenant_id,
        "erased_at": now.isoformat(),
        "actor": principal.actor,
        "installation_id": f"{keys.installation_id:04x}",
        "deleted": counts,
        "erased_jobs": [str(j) for j in jobs],
        "kept": {"consent_attestations": "the legal record of consent: the image's SHA-256 only"},
        "scan": {
            "objects_left": left_objects,
            "rows_left": rows_left,
            "empty": not left_objects and not any(rows_left.values()),
        },
        "audit": {"seq": event.seq, "hash": event.hash},
    }
    receipt = sign_statement(keys, statement)
    record_audit(
        session,
        principal,
        audit.ERASURE_RECEIPT,
        f"subject:{receipt_id}",
        {"sha256": hashlib.sha256(canonical(statement)).hexdigest()},
        tenant_id=tenant_id,
    )
    return receipt
