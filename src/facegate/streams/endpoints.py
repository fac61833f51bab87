"""HTTP routes of live streams: start one (an SDP offer in, the answer out), list, read
and end them. Scopes ``streams:write`` (directors and editors) and ``streams:read``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from facegate.api.deps import get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.database import session_scope
from facegate.errors import NotFound, Unavailable
from facegate.jobs.runtime import tenant_store_for
from facegate.principal import Principal
from facegate.state import AppState
from facegate.streams import placement
from facegate.streams.ice import IceServers, client_ice_servers
from facegate.streams.live import StreamDeps
from facegate.streams.runtime import process_engines
from facegate.streams.schemas import StreamAnswer, StreamList, StreamOut, StreamStart
from facegate.streams.service import (
    DELETED,
    check_live_enabled,
    request_stop,
    stream_row,
    tenant_streams,
)
from facegate.streams.start import start_stream as start
from facegate.streams.tables import LiveStreamRow
from facegate.tenancy.repository import TenancyRepository

router = APIRouter(prefix="/v1", tags=["streams"], responses=PROBLEM_RESPONSES)

ReadPrincipal = Annotated[Principal, scoped("streams:read")]
WritePrincipal = Annotated[Principal, scoped("streams:write")]

_START_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: problem_openapi("The offer is no SDP offer with video (invalid-sdp)"),
    403: problem_openapi(
        "Live is off for the tenant (max_concurrent_streams 0), or a processor outside its policy"
    ),
    429: problem_openapi("The tenant runs max_concurrent_streams streams already"),
    503: problem_openapi(
        "No room for another stream on this process (streams_per_process, stream_cores) "
        "nor on a peer it could hand the start to"
    ),
}


def _deps(state: AppState) -> StreamDeps:
    return StreamDeps(
        state.settings,
        state.session_factory,
        state.face_engine,
        state.streams,
        process_engines(state),
    )


@router.post("/streams", status_code=201, response_model=StreamAnswer, responses=_START_RESPONSES)
async def start_stream(
    request: Request, response: Response, principal: WritePrincipal, body: StreamStart
) -> StreamAnswer | Response:
    """Start a live swap: send the camera's SDP offer (a video track, audio optional; a
    data channel, if the client opens one, carries stats and the reason the stream ended)
    and the source; the answer's SDP comes back with the stream's id. In a cluster, a
    process without room hands the start to one that has (facegate.streams.placement)."""
    state = get_state(request)
    try:
        record, sdp = await start(_deps(state), tenant_store_for(state.settings), principal, body)
    except Unavailable as refused:
        client = request.client.host if request.client is not None else None
        handed = placement.Handed(dict(request.headers), await request.body(), client)
        if not placement.may_hand(state.settings, handed, refused):
            raise
        answer = await placement.hand_to_peer(state.settings, state.session_factory, handed)
        if answer is None:
            raise
        return Response(answer.content, answer.status, headers=answer.headers)
    # one less room, said at once
    await asyncio.to_thread(placement.beat, state.settings, state.session_factory, state.streams)
    response.headers["Location"] = f"/v1/streams/{record.id}"
    return StreamAnswer(**StreamOut.of(record).model_dump(), sdp=sdp)


@router.get("/streams/ice", responses={403: problem_openapi("Live is off for the tenant")})
async def ice_servers(
    request: Request, response: Response, principal: WritePrincipal
) -> IceServers:
    """The ICE servers to make the offer with (``RTCPeerConnection({iceServers})``): STUN,
    and TURN with a credential of this tenant that expires (``expires_at``); the TURN
    server's secret never leaves the service. Fetch them before each offer."""
    state = get_state(request)
    servers = await asyncio.to_thread(_ice_servers, state, principal.tenant_id)
    response.headers["Cache-Control"] = "no-store"
    return servers


def _ice_servers(state: AppState, tenant_id: str) -> IceServers:
    with session_scope(state.session_factory, read_only=True) as session:
        policy = TenancyRepository(session).get_policy(tenant_id)
        if policy is None:
            raise NotFound("no such tenant")
        check_live_enabled(policy)  # no relay credentials for a tenant without live
        return client_ice_servers(state.settings, tenant_id, policy.max_stream_seconds)


@router.get("/streams")
async def list_streams(
    request: Request,
    principal: ReadPrincipal,
    limit: Annotated[int, Query(ge=1, le=200, description="at most this many ended")] = 50,
) -> StreamList:
    """The tenant's streams on every API process: live ones first, then those that ended,
    newest first (at most ``limit`` of those). A stream this process runs shows its live
    figures (fps, latency, stages); another process's is as of its last heartbeat."""
    state = get_state(request)
    tenant_id = principal.tenant_id
    stored = await asyncio.to_thread(_stored_streams, state, tenant_id, limit)
    # (this process keeps up to 1000 ended streams: only those listed are shown from it)
    here = {record.id: record for record in state.streams.of_tenant(tenant_id)}
    items = [
        StreamOut.of(here.pop(row.id)) if row.id in here else StreamOut.of_row(row, frames)
        for row, frames in stored
    ]
    # a stream being opened here has no row yet
    items += [StreamOut.of(record) for record in here.values() if record.state == "live"]
    items.sort(key=lambda out: (out.state != "live", -out.created_at.timestamp()))
    return StreamList(items=items)


def _stored_streams(state: AppState, tenant_id: str, limit: int) -> list[tuple[LiveStreamRow, int]]:
    with session_scope(state.session_factory, read_only=True) as session:
        return tenant_streams(session, tenant_id, limit)


@router.get("/streams/{stream_id}")
async def get_stream(request: Request, principal: ReadPrincipal, stream_id: uuid.UUID) -> StreamOut:
    """State, fps, latency and seconds so far (why it ended, once it has). A stream another
    process runs or ran is answered from the database: its state, seconds and frames as of
    its last heartbeat (``server-lost`` when that process died)."""
    state = get_state(request)
    try:
        return StreamOut.of(state.streams.get(principal.tenant_id, stream_id))
    except NotFound:
        found = await asyncio.to_thread(_stored, state, principal.tenant_id, stream_id)
        if found is None:
            raise
        return StreamOut.of_row(*found)


def _stored(
    state: AppState, tenant_id: str, stream_id: uuid.UUID
) -> tuple[LiveStreamRow, int] | None:
    with session_scope(state.session_factory, read_only=True) as session:
        return stream_row(session, tenant_id, stream_id)


@router.delete(
    "/streams/{stream_id}",
    responses={
        202: {
            "description": "Another process runs the stream and has been asked to "
            "end it; it had not ended yet"
        }
    },
)
async def end_stream(
    request: Request, response: Response, principal: WritePrincipal, stream_id: uuid.UUID
) -> StreamOut:
    """End the stream (metered up to now); an ended one is answered as it is. A stream
    another API process runs is asked to end through the database and answered once it
    has (within about a second); 202 with it still live if not within twice
    ``stream_check_seconds`` and a second."""
    state = get_state(request)
    try:
        record = state.streams.get(principal.tenant_id, stream_id)
    except NotFound:
        return await _end_elsewhere(state, response, principal.tenant_id, stream_id)
    if record.state == "live" and record.stop is not None:
        await record.stop(DELETED, None)
    return StreamOut.of(record)


async def _end_elsewhere(
    state: AppState, response: Response, tenant_id: str, stream_id: uuid.UUID
) -> StreamOut:
    """A stream this process does not run: its end asked through its row, which the
    process running it reads within a second; waited for a little."""

    def ask() -> tuple[LiveStreamRow, int] | None:
        with session_scope(state.session_factory) as session:
            return request_stop(session, tenant_id, stream_id)

    found = await asyncio.to_thread(ask)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2 * state.settings.stream_check_seconds + 1.0
    while found is not None and found[0].ended_at is None and loop.time() < deadline:
        await asyncio.sleep(0.2)
        found = await asyncio.to_thread(_stored, state, tenant_id, stream_id)
    if found is None:
        raise NotFound(f"no stream {stream_id}")
    if found[0].ended_at is None:
        response.status_code = 202
    return StreamOut.of_row(*found)
