"""HTTP routes of live streams: start one (an SDP offer in, the answer out), list, read
and end them. Scopes ``streams:write`` (directors and editors) and ``streams:read``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response

from facegate.api.deps import get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.database import session_scope
from facegate.errors import NotFound
from facegate.jobs.runtime import tenant_store_for
from facegate.principal import Principal
from facegate.state import AppState
from facegate.streams.ice import IceServers, client_ice_servers
from facegate.streams.live import StreamDeps
from facegate.streams.runtime import process_engines
from facegate.streams.schemas import StreamAnswer, StreamList, StreamOut, StreamStart
from facegate.streams.service import check_live_enabled, stream_row
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
}


def _deps(state: AppState) -> StreamDeps:
    return StreamDeps(
        state.settings,
        state.session_factory,
        state.face_engine,
        state.streams,
        process_engines(state),
    )


@router.post("/streams", status_code=201, responses=_START_RESPONSES)
async def start_stream(
    request: Request, response: Response, principal: WritePrincipal, body: StreamStart
) -> StreamAnswer:
    """Start a live swap: send the camera's SDP offer (a video track, audio optional; a
    data channel, if the client opens one, carries stats and the reason the stream ended)
    and the source; the answer's SDP comes back with the stream's id."""
    state = get_state(request)
    record, sdp = await start(_deps(state), tenant_store_for(state.settings), principal, body)
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
async def list_streams(request: Request, principal: ReadPrincipal) -> StreamList:
    """The tenant's streams on this server: live ones first, then those that ended."""
    records = get_state(request).streams.of_tenant(principal.tenant_id)
    return StreamList(items=[StreamOut.of(r) for r in records])


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


@router.delete("/streams/{stream_id}")
async def end_stream(
    request: Request, principal: WritePrincipal, stream_id: uuid.UUID
) -> StreamOut:
    """End the stream (metered up to now); an ended one is answered as it is."""
    record = get_state(request).streams.get(principal.tenant_id, stream_id)
    if record.state == "live" and record.stop is not None:
        await record.stop("deleted", None)
    return StreamOut.of(record)
