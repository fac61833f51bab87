"""The database side of a live stream: what it may run (the tenant's policy, the options
and the source, checked as a job's are), its opening (the watermark's mark, consent
records, the ``stream.start`` audit event), the checks made while it runs (credentials,
tenant), its heartbeat (``live_streams``, with each usage checkpoint), its closing (the
usage record, ``stream.end``), and the sweep that ends the streams of a process that died.
Nothing here touches media."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from facegate.consent.service import SOURCE_PREFIX, ConsentService
from facegate.database import utcnow
from facegate.engine.errors import MediaTooLarge
from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.errors import BadRequest, Forbidden, QuotaExceeded
from facegate.models.installed import installation_model_store
from facegate.models.requests import model_request_for
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.provenance.keys import load_keys
from facegate.provenance.marker import JobMark, ResultMarker
from facegate.settings import Settings
from facegate.storage.tenant import TenantStore
from facegate.streams.schemas import StreamOut
from facegate.streams.tables import LiveStreamRow
from facegate.takedown.service import check_sources
from facegate.templates.submission import resolve_inputs
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.tables import Policy
from facegate.usage.repository import UsageRepository
from facegate.usage.service import Consumption, record_stream_usage
from facegate.webhooks.dispatcher import queue_deliveries
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.tables import STREAM_ENDED

STREAM_START = "stream.start"
DEVICE = "cpu"  # streams run in the API process, on its CPU
STREAM_END = "stream.end"
DELETED = "deleted"  # the end_reason of a stream ended by DELETE /v1/streams/{id}
LOST = "server-lost"  # the end_reason of a stream whose process stopped beating
#: a stream is lost once this many checkpoints' heartbeats are missing
LOST_AFTER_CHECKPOINTS = 3
#: First key of the advisory lock that serialises a tenant's stream admissions (PostgreSQL).
STREAM_LOCK_NAMESPACE = 0x66677374  # "fgst"


@dataclass(frozen=True)
class StreamPlan:
    """A stream's checked inputs: a detached copy of the policy of the moment, the
    pipeline spec, the source image's bytes, and what its consent record needs."""

    policy: Policy
    spec: PipelineSpec
    source: bytes
    source_face_id: uuid.UUID | None
    consent: str | None
    model_request: ModelRequest


def this_node() -> str:
    """This process, as ``live_streams`` and ``stream_nodes`` name it for operators."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_live_enabled(policy: Policy) -> None:
    """403 naming ``max_concurrent_streams`` when the tenant's plan has no live streams."""
    if policy.max_concurrent_streams <= 0:
        raise Forbidden(
            "live streams are not enabled for this tenant (max_concurrent_streams is 0)",
            limit="max_concurrent_streams",
            limit_value=0,
        )


def decode_source(text: str, max_bytes: int) -> bytes:
    """The uploaded source image's bytes (400 when not base64; 413 past the policy's
    ``max_input_bytes``)."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("source_image is not valid base64", code="invalid-source") from None
    if len(data) > max_bytes:
        raise MediaTooLarge(
            f"the source image is over the {max_bytes}-byte limit",
            limit_name="max_input_bytes",
            limit=max_bytes,
            actual=len(data),
        )
    return data


def plan_stream(
    session: Session,
    store: TenantStore,
    settings: Settings,
    engine: EngineRuntime,
    principal: Principal,
    stream_id: uuid.UUID,
    *,
    options: str | None,
    face_id: uuid.UUID | None,
    source_image: str | None,
    consent: str | None,
) -> StreamPlan:
    """Everything a job submission checks, for a stream (read-only): live on for the
    tenant and a stream left under its cap on the installation (429), the options within
    its policy (403) and installed (409), the saved face (404) or the uploaded image (413),
    consent where the policy asks (422), takedowns (451)."""
    asked = resolve_inputs(
        session,
        store,
        installation_model_store(settings),
        principal,
        options=options,
        template=None,
        face_ids=[face_id] if face_id is not None else [],
        uploaded=source_image is not None,
    )
    policy = asked.policy
    check_live_enabled(policy)
    # Refused before anything is negotiated; checked again, under a lock, where it opens.
    hold_open_streams(session, principal.tenant_id, policy.max_concurrent_streams, lock=False)
    spec = asked.options.spec
    if asked.library is not None:
        source = asked.library.images[0]
        ConsentService.check_saved(
            consent, asked.library.missing_consent, policy.require_consent, spec.processors
        )
    else:
        assert source_image is not None
        source = decode_source(source_image, policy.max_input_bytes)
        ConsentService.check(consent, 1, policy.require_consent, spec.processors)
    check_sources(
        session,
        engine,
        lambda: load_keys(settings.provenance_path),
        principal.tenant_id,
        [source],
    )
    return StreamPlan(
        policy=Policy(**policy.as_dict()),
        spec=spec,
        source=source,
        source_face_id=face_id,
        consent=consent if asked.library is None else None,
        model_request=model_request_for(principal.tenant_id, str(stream_id), policy),
    )


def open_stream(
    session: Session,
    marker: ResultMarker,
    principal: Principal,
    stream_id: uuid.UUID,
    plan: StreamPlan,
) -> JobMark:
    """In the transaction that starts the stream: its mark (every frame carries it), its
    usage record (0 s, checkpointed as it runs), the uploaded source's consent
    attestation, and ``stream.start``."""
    hold_open_streams(session, principal.tenant_id, plan.policy.max_concurrent_streams)
    mark = marker.issue_for(session, principal.tenant_id, stream_id)
    now = utcnow()
    session.add(
        LiveStreamRow(
            id=stream_id,
            tenant_id=principal.tenant_id,
            node=this_node(),
            started_at=now,
            heartbeat_at=now,
            seconds=0.0,
        )
    )
    record_stream_usage(
        session,
        stream_id,
        principal.tenant_id,
        list(plan.spec.processors),
        Consumption(compute_seconds=0.0, device=DEVICE),
        now,
        now,
        0.0,
    )
    sha256 = hashlib.sha256(plan.source).hexdigest()
    attested = ConsentService(session).record(
        principal.tenant_id, principal.actor, plan.consent, [(f"{SOURCE_PREFIX}0", sha256)]
    )
    record_audit(
        session,
        principal,
        STREAM_START,
        f"stream:{stream_id}",
        {
            "processors": list(plan.spec.processors),
            "source": f"face:{plan.source_face_id}" if plan.source_face_id else "upload",
            "source_sha256": sha256,
            "consent": [ref.attestation_id for ref in attested],
        },
    )
    return mark


def hold_open_streams(
    session: Session, tenant_id: str, max_concurrent: int, *, lock: bool = True
) -> None:
    """429 naming ``max_concurrent_streams`` when the tenant's open streams on every process
    of the installation (``live_streams`` rows not ended; a dead process's until the sweep
    ends them) reach its cap. On PostgreSQL the tenant's stream admissions are serialised by
    a transaction-scoped advisory lock, so two API replicas never both admit the last one;
    SQLite's one API process admits one at a time already. ``lock`` False: a read-only
    early look (the stream is refused before anything is negotiated)."""
    if lock and session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:tenant))"),
            {"namespace": STREAM_LOCK_NAMESPACE, "tenant": tenant_id},
        )
    running = session.scalar(
        select(func.count())
        .select_from(LiveStreamRow)
        .where(LiveStreamRow.tenant_id == tenant_id, LiveStreamRow.ended_at.is_(None))
    )
    if (running or 0) >= max_concurrent:
        raise QuotaExceeded(
            f"this tenant already runs {running} live stream(s) on this installation, its "
            f"maximum (max_concurrent_streams {max_concurrent}); end one first",
            limit="max_concurrent_streams",
            value=max_concurrent,
            retry_after=5,
        )


def credentials_problem(session: Session, principal: Principal) -> str | None:
    """Why the stream's caller may no longer stream (``credentials-revoked``,
    ``tenant-suspended``), or None: the checks authentication makes, again."""
    repository = TenancyRepository(session)
    tenant = repository.get_tenant(principal.tenant_id)
    if tenant is None or not tenant.is_active:
        return "tenant-suspended"
    kind, _, key_id = principal.actor.partition(":")
    if kind == "key":
        found = repository.get_key_for_authentication(key_id)
        if found is None:
            return "credentials-revoked"
        key = found[0]
        expired = key.expires_at is not None and key.expires_at <= utcnow()
        if key.revoked_at is not None or expired:
            return "credentials-revoked"
    return None


@dataclass(frozen=True)
class StreamUsage:
    """A stream's consumption as of ``finished_at`` (a checkpoint, or its end)."""

    stream_id: uuid.UUID
    tenant_id: str
    processors: list[str]
    consumption: Consumption
    started_at: datetime
    finished_at: datetime
    seconds: float
    #: the figures the API shows, as of ``finished_at`` (``LiveStreamRow.stats``)
    stats: dict[str, Any] | None = None

    def write(self, session: Session) -> None:
        record_stream_usage(
            session,
            self.stream_id,
            self.tenant_id,
            self.processors,
            self.consumption,
            self.started_at,
            self.finished_at,
            self.seconds,
        )


def checkpoint(session: Session, usage: StreamUsage) -> None:
    """A running stream's usage as of now and its heartbeat, in one transaction."""
    usage.write(session)
    session.execute(
        update(LiveStreamRow)
        .where(LiveStreamRow.id == usage.stream_id, LiveStreamRow.ended_at.is_(None))
        .values(heartbeat_at=usage.finished_at, seconds=usage.seconds, stats=usage.stats)
    )


def _mark_ended(
    session: Session,
    stream_id: uuid.UUID,
    at: datetime,
    reason: str,
    seconds: float,
    stats: dict[str, Any] | None = None,
) -> bool:
    """The stream's row ended, once: False when it had ended already (a sweep took it).
    ``stats``: its last figures (None: those of its last heartbeat stay)."""
    values: dict[str, Any] = {
        "ended_at": at,
        "heartbeat_at": at,
        "end_reason": reason,
        "seconds": seconds,
    }
    if stats is not None:
        values["stats"] = stats
    done = session.execute(
        update(LiveStreamRow)
        .where(LiveStreamRow.id == stream_id, LiveStreamRow.ended_at.is_(None))
        .values(**values)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def close_stream(session: Session, usage: StreamUsage, reason: str) -> None:
    """In one transaction: the last usage figures, the row ended and ``stream.end`` (by
    ``system``: the stream may end without its caller, e.g. when its key was revoked).
    A stream a sweep took for lost (its heartbeats late) that ends after all gets its
    usage as served, and no second ``stream.end``."""
    usage.write(session)
    ended = _mark_ended(
        session, usage.stream_id, usage.finished_at, reason, usage.seconds, usage.stats
    )
    if not ended:
        return
    announce_end(session, usage.tenant_id, usage.stream_id, usage.consumption.frames)
    record_audit(
        session,
        "system",
        STREAM_END,
        f"stream:{usage.stream_id}",
        {
            "seconds": round(usage.seconds, 3),
            "frames": usage.consumption.frames,
            "reason": reason,
        },
        tenant_id=usage.tenant_id,
    )


def announce_end(session: Session, tenant_id: str, stream_id: uuid.UUID, frames: int) -> None:
    """``stream.ended`` to the tenant's webhooks subscribed to it, in the transaction that
    ended the stream: ``data`` is the stream as ``GET /v1/streams/{id}`` shows it then."""
    row = session.get(LiveStreamRow, stream_id, populate_existing=True)
    assert row is not None
    assert row.ended_at is not None
    data = StreamOut.of_row(row, frames).model_dump(mode="json")
    message = {"type": STREAM_ENDED, "timestamp": row.ended_at.isoformat(), "data": data}
    body = json.dumps(message, separators=(",", ":"), sort_keys=True)
    queue_deliveries(WebhookRepository(session), tenant_id, STREAM_ENDED, body, stream_id, utcnow())


def options_text(options: dict[str, object] | None) -> str | None:
    return None if options is None else json.dumps(options)


@dataclass(frozen=True)
class LostStream:
    stream_id: uuid.UUID
    tenant_id: str
    seconds: float
    node: str


def sweep_lost_streams(session: Session, checkpoint_seconds: float) -> list[LostStream]:
    """End every stream whose heartbeat is ``LOST_AFTER_CHECKPOINTS`` checkpoints late (its
    process died): ``ended_at`` its last heartbeat, reason ``server-lost``, its usage
    record as of that heartbeat (written with it), and ``stream.end``. Safe from every
    process at once: each stream is ended, and audited, once."""
    late = utcnow() - timedelta(seconds=LOST_AFTER_CHECKPOINTS * checkpoint_seconds)
    rows = session.scalars(
        select(LiveStreamRow).where(
            LiveStreamRow.ended_at.is_(None), LiveStreamRow.heartbeat_at < late
        )
    ).all()
    lost = []
    for row in rows:
        if not _mark_ended(session, row.id, row.heartbeat_at, LOST, row.seconds):
            continue  # another process's sweep took it
        found = UsageRepository(session).get_record(row.tenant_id, row.id)
        announce_end(session, row.tenant_id, row.id, found.frames if found is not None else 0)
        record_audit(
            session,
            "system",
            STREAM_END,
            f"stream:{row.id}",
            {
                "seconds": round(row.seconds, 3),
                "frames": found.frames if found is not None else 0,
                "reason": LOST,
                "node": row.node,
            },
            tenant_id=row.tenant_id,
        )
        lost.append(LostStream(row.id, row.tenant_id, row.seconds, row.node))
    return lost


def stream_row(
    session: Session, tenant_id: str, stream_id: uuid.UUID
) -> tuple[LiveStreamRow, int] | None:
    """The tenant's stream as the database has it (run by any process), with its frames
    as last metered; None when there is no such stream of the tenant."""
    row = session.get(LiveStreamRow, stream_id)
    if row is None or row.tenant_id != tenant_id:
        return None
    usage = UsageRepository(session).get_record(tenant_id, stream_id)
    return row, usage.frames if usage is not None else 0


def tenant_streams(session: Session, tenant_id: str, limit: int) -> list[tuple[LiveStreamRow, int]]:
    """The tenant's streams on every process, as the database has them (``stream_row``):
    the open ones first, then those that ended, newest first; at most ``limit`` ended."""
    newest = LiveStreamRow.started_at.desc()
    mine = select(LiveStreamRow).where(LiveStreamRow.tenant_id == tenant_id)
    rows = [
        *session.scalars(mine.where(LiveStreamRow.ended_at.is_(None)).order_by(newest)),
        *session.scalars(
            mine.where(LiveStreamRow.ended_at.is_not(None)).order_by(newest).limit(limit)
        ),
    ]
    usage = UsageRepository(session)
    frames = {r.job_id: r.frames for r in usage.records_of(tenant_id, [row.id for row in rows])}
    return [(row, frames.get(row.id, 0)) for row in rows]


def request_stop(
    session: Session, tenant_id: str, stream_id: uuid.UUID
) -> tuple[LiveStreamRow, int] | None:
    """Ask the process running the tenant's open stream to end it (``DELETE`` answered by
    another process): it reads the request within a second (``stop_problem``). The stream
    as ``stream_row`` has it; None when not the tenant's."""
    session.execute(
        update(LiveStreamRow)
        .where(
            LiveStreamRow.id == stream_id,
            LiveStreamRow.tenant_id == tenant_id,
            LiveStreamRow.ended_at.is_(None),
            LiveStreamRow.stop_requested_at.is_(None),
        )
        .values(stop_requested_at=utcnow())
    )
    return stream_row(session, tenant_id, stream_id)


def stop_problem(
    session: Session, principal: Principal, stream_id: uuid.UUID, *, credentials: bool = True
) -> str | None:
    """Why the process running a stream must end it now: its caller may no longer stream
    (``credentials_problem``, looked at when ``credentials``), or a ``DELETE`` on another
    process asked for its end (``deleted``); None otherwise."""
    problem = credentials_problem(session, principal) if credentials else None
    if problem is not None:
        return problem
    asked = session.scalar(
        select(LiveStreamRow.stop_requested_at).where(LiveStreamRow.id == stream_id)
    )
    return DELETED if asked is not None else None
