"""Starting a stream, in the order that leaves nothing behind when a step refuses: the
offer's shape (400), the inputs and the policy (read-only: 403, 404, 413, 422, 451), the
cap (429), the source face (422), the negotiation (400); only then is the stream admitted
and opened (its mark and ``stream.start`` in one transaction) and its tasks started."""

from __future__ import annotations

import asyncio
import time
import uuid

from facegate.database import session_scope
from facegate.engine.image import load_image
from facegate.engine.pipeline import Pipeline
from facegate.engine.processors.base import JobContext
from facegate.jobs.service import input_limits
from facegate.principal import Principal
from facegate.provenance.marker import JobMark, marker_for
from facegate.storage.tenant import TenantStore
from facegate.stream_registry import StreamRecord
from facegate.streams.live import LiveStream, StreamDeps, check_offer
from facegate.streams.schemas import StreamStart
from facegate.streams.service import StreamPlan, open_stream, options_text, plan_stream


async def start_stream(
    deps: StreamDeps, store: TenantStore, principal: Principal, body: StreamStart
) -> tuple[StreamRecord, str]:
    """The running stream's record and the SDP answer."""
    check_offer(body.sdp)
    stream_id = uuid.uuid4()
    plan = await asyncio.to_thread(_plan, deps, store, principal, stream_id, body)
    deps.registry.check(principal.tenant_id, plan.policy.max_concurrent_streams)
    pipeline, ctx = await asyncio.to_thread(_prepare, deps, plan)
    record = StreamRecord(
        id=stream_id,
        tenant_id=principal.tenant_id,
        actor=principal.actor,
        max_seconds=plan.policy.max_stream_seconds,
    )
    live = LiveStream(deps, principal, plan, record)
    answer = await live.answer(body.sdp)
    try:
        deps.registry.admit(record, plan.policy.max_concurrent_streams)
        try:
            mark = await asyncio.to_thread(_open, deps, principal, stream_id, plan)
        except BaseException:
            deps.registry.withdraw(record)
            raise
    except BaseException:
        await live.pc.close()
        raise
    record.started = time.monotonic()
    live.run(pipeline, ctx, mark)
    return record, answer


def _plan(
    deps: StreamDeps,
    store: TenantStore,
    principal: Principal,
    stream_id: uuid.UUID,
    body: StreamStart,
) -> StreamPlan:
    consent = None if body.consent is None else options_text(body.consent)
    with session_scope(deps.session_factory, read_only=True) as session:
        return plan_stream(
            session,
            store,
            deps.settings,
            deps.engine,
            principal,
            stream_id,
            options=options_text(body.options),
            face_id=body.source_face_id,
            source_image=body.source_image,
            consent=consent,
        )


def _prepare(deps: StreamDeps, plan: StreamPlan) -> tuple[Pipeline, JobContext]:
    """The source analysed and the processors prepared, once for the stream (422 when the
    source has no face)."""
    source = load_image(plan.source, input_limits(plan.policy)).frame
    pipeline = deps.engine.pipeline(plan.spec)
    return pipeline, pipeline.prepare([source], model_request=plan.model_request)


def _open(
    deps: StreamDeps, principal: Principal, stream_id: uuid.UUID, plan: StreamPlan
) -> JobMark:
    settings = deps.settings
    # The embedded shape (SQLite) makes its keys on first use, as its workers do.
    marker = marker_for(settings.provenance_path, create=settings.database_url.startswith("sqlite"))
    with session_scope(deps.session_factory) as session:
        return open_stream(session, marker, principal, stream_id, plan)
