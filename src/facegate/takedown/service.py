"""Takedown cases: opened by a report (or an admin), matched against every job made from the
reported face, removed (results deleted, jobs answer 410 Gone naming the case, the tenant
told by webhook and audit), and blocked from coming back (the face's descriptor and the
images' perceptual hashes refused as sources). docs/takedown.md is the process."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from facegate.batches.repository import BatchRepository
from facegate.database import SessionFactory, session_scope, utcnow
from facegate.engine.errors import EngineError
from facegate.engine.identity import SAME_PERSON_DISTANCE
from facegate.engine.image import load_image
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import FloatArray
from facegate.errors import ContentTakenDown, Gone, InvalidInput, NotFound, ServiceError
from facegate.jobs.repository import JobRepository
from facegate.library.repository import LibraryRepository
from facegate.observability import audit
from facegate.observability.audit import record_audit
from facegate.observability.metrics import TAKEDOWN_REFUSED, TAKEDOWN_SECONDS
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys
from facegate.storage.base import ObjectNotFound, ObjectStore
from facegate.storage.repository import StoredObjectRepository
from facegate.storage.tenant import KINDS, TenantStore
from facegate.takedown.crypto import seal, unseal
from facegate.takedown.matching import SCAN_LIMITS, describe_image, nearest, scan
from facegate.takedown.phash import SAME_IMAGE_BITS, phash
from facegate.takedown.phash import distance as phash_distance
from facegate.takedown.repository import TakedownRepository
from facegate.takedown.tables import TakedownBlock, TakedownCase, TakedownMatch, TakedownRemoval
from facegate.tenancy.repository import TenancyRepository
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.tables import JOB_REMOVED, WebhookDelivery

#: The legal clock (TAKE IT DOWN Act): a reported intimate deepfake is removed within 48 h.
DEADLINE_SECONDS = 48 * 3600


def image_phash(data: bytes) -> str | None:
    """The perceptual hash of an encoded image (None: not an image this service decodes)."""
    try:
        return phash(load_image(data, SCAN_LIMITS).frame)
    except (EngineError, ValueError):
        return None


def open_case(
    session: Session,
    actor: Principal | str,
    *,
    tenant_id: str | None,
    job_id: uuid.UUID | None,
    report_id: str | None = None,
    image_phash: str | None = None,
) -> TakedownCase:
    """A case for the reported job (the open case of that job when there is one: a second
    report joins it), audited for the owning tenant."""
    repository = TakedownRepository(session)
    if tenant_id is not None and job_id is not None:
        existing = repository.open_case_of_job(tenant_id, job_id)
        if existing is not None:
            return existing
    case = TakedownCase(
        id=secrets.token_hex(16),
        tenant_id=tenant_id,
        job_id=job_id,
        report_id=report_id,
        scope="tenant",
        status="open",
        image_phash=image_phash,
        opened_by=actor if isinstance(actor, str) else actor.actor,
        reported_at=utcnow(),
    )
    repository.add(case)
    record_audit(
        session,
        actor,
        audit.TAKEDOWN_OPEN,
        f"takedown:{case.id}",
        {"job": str(job_id) if job_id else None, "report_id": report_id},
        tenant_id=tenant_id,
    )
    return case


def get_case(session: Session, principal: Principal, case_id: str) -> TakedownCase:
    """The case as ``principal`` may see it: any case for the platform admin, the tenant's
    own for its admin (another tenant's is a 404)."""
    scope = None if principal.is_admin else principal.tenant_id
    case = TakedownRepository(session).case(case_id, scope)
    if case is None:
        raise NotFound("no such takedown case")
    return case


def _job_sources(
    session: Session, store: ObjectStore, tenant_id: str, job_id: uuid.UUID
) -> list[bytes]:
    found = []
    for row in StoredObjectRepository(session).of_job(tenant_id, job_id):
        if row.kind == "inputs" and row.name.startswith("source-"):
            try:
                found.append(store.get(row.key))
            except ObjectNotFound:
                continue
    return found


def match_case(
    sessions: SessionFactory,
    writes: SessionFactory,
    store: TenantStore,
    engine: EngineRuntime,
    keys: InstallationKeys,
    principal: Principal,
    case_id: str,
    *,
    photo: bytes | None = None,
    platform: bool = False,
) -> dict[str, Any]:
    """Find every job whose source face is the reported person: the reported job's retained
    source and/or ``photo`` against the retained sources and saved faces of the owning
    tenant, or of every tenant (``platform``, the platform admin only).

    The scan (seconds to minutes) runs in a read-only transaction of ``sessions``; only the
    matches are written, in a short transaction of ``writes`` (SQLite's write lock is never
    held while faces are described)."""
    if platform and not principal.is_admin:
        raise InvalidInput("only the platform admin searches every tenant", field="platform")
    with session_scope(sessions, read_only=True) as session:
        case = get_case(session, principal, case_id)
        if case.status != "open":
            raise InvalidInput(f"the case is {case.status}", code="case-closed")
        probe: list[FloatArray] = []
        if case.tenant_id is not None and case.job_id is not None:
            for data in _job_sources(session, store.store, case.tenant_id, case.job_id):
                probe.extend(describe_image(engine, data))
        if photo is not None:
            probe.extend(describe_image(engine, photo))
        if not probe and case.probe is not None:
            probe = unseal(keys, case.probe)
        if not probe:
            raise InvalidInput(
                "no face to look for: the reported job's sources are no longer stored; send "
                "a photo of the person",
                code="no-face-to-match",
            )
        across = platform or case.tenant_id is None
        if across:
            if not principal.is_admin:
                raise NotFound("no such takedown case")
            tenants = [t.id for t in TenancyRepository(session).list_tenants() if not t.is_erased]
        else:
            tenants = [case.tenant_id] if case.tenant_id is not None else []
        result = scan(session, store, engine, probe, tenants)
    with session_scope(writes) as session:
        case = get_case(session, principal, case_id)
        if case.status != "open":
            raise InvalidInput(f"the case is {case.status}", code="case-closed")
        if across:
            case.scope = "platform"
        case.probe = seal(keys, probe)
        rows = [
            TakedownMatch(
                case_id=case.id,
                item_id=m.item_id,
                kind=m.kind,
                tenant_id=m.tenant_id,
                distance=round(m.distance, 4),
            )
            for m in result.matches
        ]
        TakedownRepository(session).replace_matches(case.id, rows)
        record_audit(
            session,
            principal,
            audit.TAKEDOWN_MATCH,
            f"takedown:{case.id}",
            {
                "scope": case.scope,
                "jobs": sum(m.kind == "job" for m in result.matches),
                "faces": sum(m.kind == "face" for m in result.matches),
                "jobs_compared": result.jobs_compared,
                "photo": photo is not None,
            },
            tenant_id=case.tenant_id,
        )
        return {
            **case_out(session, case),
            "scan": {
                "sources_compared": result.sources_compared,
                "jobs_compared": result.jobs_compared,
                "faces_compared": result.faces_compared,
                "seconds": round(result.seconds, 3),
            },
        }


def case_out(session: Session, case: TakedownCase) -> dict[str, Any]:
    """A case as its readers see it: its clock and its matches with their distances."""
    end = case.removed_at or utcnow()
    return {
        "id": case.id,
        "tenant_id": case.tenant_id,
        "job_id": str(case.job_id) if case.job_id else None,
        "report_id": case.report_id,
        "scope": case.scope,
        "status": case.status,
        "reported_at": case.reported_at.isoformat(),
        "removed_at": case.removed_at.isoformat() if case.removed_at else None,
        "elapsed_seconds": round((end - case.reported_at).total_seconds(), 3),
        "deadline_seconds": DEADLINE_SECONDS,
        "matches": [
            {"kind": m.kind, "id": str(m.item_id), "tenant_id": m.tenant_id, "distance": m.distance}
            for m in TakedownRepository(session).matches(case.id)
        ],
    }


def _delete_prefixes(store: ObjectStore, tenant_id: str, item_id: uuid.UUID) -> None:
    for kind in KINDS:
        for key in store.list(f"tenants/{tenant_id}/{kind}/{item_id}/"):
            try:
                store.delete(key)
            except ObjectNotFound:
                continue


def _notify(
    session: Session, tenant_id: str, case: TakedownCase, job_ids: list[uuid.UUID], now: datetime
) -> int:
    """``job.removed`` to every enabled endpoint of the tenant (a notice, whatever the
    endpoint subscribed to)."""
    repository = WebhookRepository(session)
    endpoints = [e for e in repository.endpoints(tenant_id) if e.enabled]
    for job_id in job_ids:
        body = json.dumps(
            {
                "type": JOB_REMOVED,
                "timestamp": now.isoformat(),
                "data": {"id": str(job_id), "case_id": case.id, "removed_at": now.isoformat()},
            },
            separators=(",", ":"),
            sort_keys=True,
        )
        for endpoint in endpoints:
            repository.add(
                WebhookDelivery(
                    tenant_id=tenant_id,
                    endpoint_id=endpoint.id,
                    url=endpoint.url,
                    event_type=JOB_REMOVED,
                    job_id=job_id,
                    body=body,
                    status="pending",
                    attempts=0,
                    next_attempt_at=now,
                    attempt_log=[],
                    created_at=now,
                )
            )
    return len(endpoints) * len(job_ids)


def remove_case(
    session: Session, store: TenantStore, principal: Principal, case_id: str
) -> dict[str, Any]:
    """Remove everything the case matched (module docstring), block the face and the images,
    close the case; then scan the storage for copies left."""
    started = time.perf_counter()
    case = get_case(session, principal, case_id)
    if case.status != "open":
        raise InvalidInput(f"the case is {case.status}", code="case-closed")
    repository = TakedownRepository(session)
    matches = repository.matches(case.id)
    if not principal.is_admin and any(m.tenant_id != principal.tenant_id for m in matches):
        raise NotFound("no such takedown case")
    hashes: set[str | None] = {case.image_phash}
    if case.tenant_id is not None and case.job_id is not None:
        for data in _job_sources(session, store.store, case.tenant_id, case.job_id):
            hashes.add(image_phash(data))
    now = utcnow()
    by_tenant: dict[str, dict[str, list[uuid.UUID]]] = defaultdict(lambda: defaultdict(list))
    for match in matches:
        by_tenant[match.tenant_id][match.kind].append(match.item_id)
    for tenant_id, kinds in sorted(by_tenant.items()):
        jobs = kinds.get("job", [])
        for job_id in jobs:
            store.delete_job(session, tenant_id, job_id)
            _delete_prefixes(store.store, tenant_id, job_id)
            session.add(
                TakedownRemoval(job_id=job_id, tenant_id=tenant_id, case_id=case.id, removed_at=now)
            )
        BatchRepository(session).forget_jobs(tenant_id, jobs)
        JobRepository(session).delete_jobs(tenant_id, jobs)
        library = LibraryRepository(session)
        for face_id in kinds.get("face", []):
            face = library.get(tenant_id, face_id)
            store.delete_job(session, tenant_id, face_id)
            _delete_prefixes(store.store, tenant_id, face_id)
            if face is not None:
                library.delete(face)
        notices = _notify(session, tenant_id, case, jobs, now)
        record_audit(
            session,
            principal,
            audit.TAKEDOWN_REMOVE,
            f"takedown:{case.id}",
            {
                "jobs": [str(j) for j in jobs],
                "faces": [str(f) for f in kinds.get("face", [])],
                "webhook_notices": notices,
            },
            tenant_id=tenant_id,
        )
    block_tenant = None if case.scope == "platform" else case.tenant_id
    repository.add(
        TakedownBlock(
            case_id=case.id, tenant_id=block_tenant, descriptor=case.probe, created_at=now
        )
    )
    for value in sorted(h for h in hashes if h):
        repository.add(
            TakedownBlock(
                case_id=case.id, tenant_id=block_tenant, image_phash=value, created_at=now
            )
        )
    case.status, case.removed_at, case.probe = "removed", now, None
    case.removed_by = principal.actor
    session.flush()
    TAKEDOWN_SECONDS.observe((now - case.reported_at).total_seconds())
    left = sum(
        len(store.store.list(f"tenants/{m.tenant_id}/{kind}/{m.item_id}/"))
        for m in matches
        for kind in KINDS
    )
    return {
        **case_out(session, case),
        "removed": {
            "jobs": sum(m.kind == "job" for m in matches),
            "faces": sum(m.kind == "face" for m in matches),
        },
        "copies_left": left,
        "seconds": round(time.perf_counter() - started, 3),
    }


def job_missing(bind: Any, tenant_id: str, job_id: uuid.UUID) -> ServiceError:
    """What a route answers for a job the tenant no longer has: 410 Gone naming the case
    that removed it, else 404."""
    removal = TakedownRepository.removal(bind, tenant_id, job_id)
    if removal is None:
        return NotFound("no such job")
    case_id, reason, removed_at = removal
    if reason == "erasure":
        return Gone(
            "the job was erased at the request of the person whose face it used",
            erasure_id=case_id,
            removed_at=removed_at.isoformat(),
        )
    return Gone(
        "the job was removed by a takedown case", case_id=case_id, removed_at=removed_at.isoformat()
    )


def check_sources(
    session: Session,
    engine: EngineRuntime,
    keys: Callable[[], InstallationKeys],
    tenant_id: str,
    sources: list[bytes],
) -> None:
    """Refuse (451, ``content-taken-down``) a source whose image is a copy of a blocked one
    (perceptual hash) or whose face is a taken-down person's (descriptor). Costs nothing
    while no block applies to the tenant; one face analysis per source when one does."""
    if not sources:  # nothing to compare: no query either
        return
    blocks = TakedownRepository(session).blocks(tenant_id)
    if not blocks:
        return
    hashes = [(b.image_phash, b.case_id) for b in blocks if b.image_phash]
    faces = [(unseal(keys(), b.descriptor), b.case_id) for b in blocks if b.descriptor]
    for index, data in enumerate(sources):
        value = image_phash(data)
        for blocked, case_id in hashes:
            if value is not None and phash_distance(value, blocked) <= SAME_IMAGE_BITS:
                _refuse(index, case_id)
        if not faces:
            continue
        found = describe_image(engine, data)
        for probe, case_id in faces:
            distance = nearest(probe, found)
            if distance is not None and distance < SAME_PERSON_DISTANCE:
                _refuse(index, case_id)


def _refuse(index: int, case_id: str) -> None:
    TAKEDOWN_REFUSED.inc()
    raise ContentTakenDown(
        f"source image {index + 1} was taken down and may not be used",
        source=index,
        case_id=case_id,
    )
