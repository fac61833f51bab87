"""Factories of the takedown tests: a tenant with something of every kind (rows written
directly, objects through the TenantStore, as the services write them), and a fingerprint
of everything one tenant has (every row with its id, every object's bytes, its Redis keys),
to show another tenant is untouched byte for byte."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from facegate.batches.tables import Batch, BatchItem
from facegate.consent.tables import ConsentAttestation
from facegate.jobs.tables import Job
from facegate.library.tables import LibraryFace
from facegate.observability.audit import record_audit
from facegate.provenance.repository import MarkRepository
from facegate.storage.base import ObjectStore
from facegate.storage.tenant import TenantStore
from facegate.takedown.erasure import RedisKeys, tenant_tables
from facegate.templates.tables import JobTemplate
from facegate.usage.tables import UsageRecord
from facegate.webhooks.tables import WebhookDelivery, WebhookEndpoint

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def add_job(
    session: Session,
    store: TenantStore,
    tenant_id: str,
    *,
    source: bytes,
    target: bytes = b"target bytes",
    result: bytes = b"result bytes",
    kind: str = "image",
    job_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """A succeeded job with its source, target and result stored and ledgered, its mark and
    its usage record."""
    job_id = job_id or uuid.uuid4()
    ext = "mp4" if kind == "video" else "jpg"
    for stored_kind, name, data in (
        ("inputs", "source-0", source),
        ("inputs", "target", target),
        ("outputs", f"result.{ext}", result),
    ):
        store.put(
            session,
            tenant_id=tenant_id,
            kind=stored_kind,  # type: ignore[arg-type]
            job_id=job_id,
            name=name,
            data=data,
            content_type="video/mp4"
            if ext == "mp4" and name.startswith("result")
            else "image/jpeg",
            new=True,
        )
    session.add(
        Job(
            id=job_id,
            tenant_id=tenant_id,
            status="succeeded",
            kind=kind,
            spec={"processors": ["face_swapper"]},
            inputs=["source-0", "target"],
            outputs=[f"result.{ext}"],
            priority=0,
            max_attempts=3,
            created_at=NOW,
            finished_at=NOW,
        )
    )
    session.add(
        UsageRecord(
            job_id=job_id,
            tenant_id=tenant_id,
            kind=kind,
            status="succeeded",
            device="cpu",
            finished_at=NOW,
        )
    )
    MarkRepository(session).issue(tenant_id, job_id)
    session.flush()
    return job_id


def populate(session: Session, store: TenantStore, tenant_id: str) -> dict[str, Any]:
    """Jobs (an image and a video), a batch of two, a saved face, a template, a webhook
    with a delivery, a consent attestation and audit events."""
    jobs = [
        add_job(session, store, tenant_id, source=f"{tenant_id} source {i}".encode())
        for i in range(2)
    ]
    video = add_job(session, store, tenant_id, source=b"video source", kind="video")
    batch = Batch(tenant_id=tenant_id, total=2, created_by="test", created_at=NOW)
    session.add(batch)
    session.flush()
    for position, job_id in enumerate(jobs):
        session.add(
            BatchItem(batch_id=batch.id, position=position, tenant_id=tenant_id, job_id=job_id)
        )
    face = LibraryFace(
        tenant_id=tenant_id,
        name="Lead",
        labels=["s01"],
        image_sha256="0" * 64,
        image_content_type="image/jpeg",
        width=10,
        height=10,
        face_index=0,
        face_order="large-small",
        face_box=[0, 0, 5, 5],
        embedding=[0.0] * 128,
        embedding_kind="geometric",
        created_by="test",
    )
    session.add(face)
    session.flush()
    for name in ("image", "face"):
        store.put(
            session,
            tenant_id=tenant_id,
            kind="faces",
            job_id=face.id,
            name=name,
            data=f"{tenant_id} face {name}".encode(),
            content_type="image/png",
            new=True,
        )
    session.add(
        JobTemplate(
            tenant_id=tenant_id,
            name="lead-swap",
            options={"processors": ["face_swapper"]},
            faces=["Lead"],
            created_by="test",
        )
    )
    endpoint = WebhookEndpoint(
        tenant_id=tenant_id,
        url="https://hooks.example/facegate",
        event_types=["job.succeeded"],
        secret="whsec_c2VjcmV0c2VjcmV0c2VjcmV0",
        created_by="test",
    )
    session.add(endpoint)
    session.flush()
    session.add(
        WebhookDelivery(
            tenant_id=tenant_id,
            endpoint_id=endpoint.id,
            url=endpoint.url,
            event_type="job.succeeded",
            job_id=jobs[0],
            body="{}",
            next_attempt_at=NOW,
        )
    )
    session.add(
        ConsentAttestation(
            tenant_id=tenant_id,
            source_sha256="1" * 64,
            attested_by="Jane Roe",
            statement_version="2026-11",
            attested_at=NOW,
            recorded_by="test",
        )
    )
    record_audit(session, "test", "test.event", f"tenant:{tenant_id}", tenant_id=tenant_id)
    session.flush()
    return {"jobs": [*jobs, video], "batch": batch.id, "face": face.id}


def _row_text(row: Any) -> str:
    return json.dumps(
        {k: (v.hex() if isinstance(v, bytes) else str(v)) for k, v in row._mapping.items()},
        sort_keys=True,
    )


def fingerprint(
    session: Session, store: ObjectStore, tenant_id: str, redis: RedisKeys | None = None
) -> dict[str, str]:
    """SHA-256 of each table's rows of the tenant, of each of its objects, of its Redis
    key names."""
    found: dict[str, str] = {}
    for table in tenant_tables():
        stmt = select(table).where(table.c.tenant_id == tenant_id)
        rows = sorted(_row_text(row) for row in session.execute(stmt))
        found[f"rows:{table.name}"] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    tenants = tenant_tables()[0].metadata.tables["tenants"]
    row = session.execute(select(tenants).where(tenants.c.id == tenant_id)).one()
    found["rows:tenants"] = hashlib.sha256(_row_text(row).encode()).hexdigest()
    for key in store.list(f"tenants/{tenant_id}/"):
        found[f"object:{key}"] = hashlib.sha256(store.get(key)).hexdigest()
    if redis is not None:
        found["redis"] = ",".join(k.decode() for k in redis.find(tenant_id))
    return found
