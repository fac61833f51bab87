"""An aiortc client of ``POST /v1/streams`` over loopback: a camera made of a face photo
(``facegate.streams.loopback``), the swapped frames it gets back, and the data channel's
messages."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import httpx
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, MediaStreamError
from sqlalchemy import select
from tests.testdata import FACES

from facegate.database import session_scope, utcnow
from facegate.engine.types import Frame
from facegate.observability.audit.tables import AuditEvent
from facegate.streams.loopback import PhotoCamera, camera_frame, read_stamp
from facegate.streams.media import release_on_marker
from facegate.streams.service import STREAM_END
from facegate.streams.tables import LiveStreamRow
from facegate.usage.tables import UsageRecord

SOURCE_PHOTO = FACES / "man_frontal_beard_closeup.jpg"
CAMERA_PHOTO = FACES / "woman_b_frontal_dark_background.jpg"
LIVE_POLICY: dict[str, Any] = {"max_concurrent_streams": 1, "requests_per_minute": 1_000_000}


def photo(path: Path) -> Frame:
    image = cv2.imread(str(path))
    assert image is not None, path
    return image


def source_body(path: Path = SOURCE_PHOTO) -> dict[str, Any]:
    return {"source_image": base64.b64encode(path.read_bytes()).decode()}


@dataclass
class Client:
    """One stream's client side."""

    pc: RTCPeerConnection
    camera: PhotoCamera
    received: list[tuple[Frame, int | None, float]] = field(default_factory=list)
    audio_frames: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None
    listener: asyncio.Task[None] | None = None

    async def read(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            image = frame.to_ndarray(format="bgr24")  # type: ignore[union-attr]
            self.received.append((image, read_stamp(image), time.monotonic()))

    async def listen(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                await track.recv()
            except MediaStreamError:
                return
            self.audio_frames += 1

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.listener is not None:
            self.listener.cancel()
        await self.pc.close()


async def offer_of(pc: RTCPeerConnection) -> str:
    await pc.setLocalDescription(await pc.createOffer())
    return str(pc.localDescription.sdp)


async def open_stream(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    camera_photo: Path | Frame = CAMERA_PHOTO,
    body: dict[str, Any] | None = None,
    fps: float = 15.0,
    audio: bool = False,
    configuration: RTCConfiguration | None = None,
) -> tuple[Client, httpx.Response]:
    """Start a stream (the response is returned whatever it is; the client is connected
    when it is a 201). A photo's path is fitted to 640x480; a frame is sent as it is.
    ``configuration``: the client's ICE servers and policy (none: host candidates)."""
    picture = camera_frame(photo(camera_photo)) if isinstance(camera_photo, Path) else camera_photo
    pc = RTCPeerConnection(configuration)
    camera = PhotoCamera(picture, fps=fps)
    pc.addTrack(camera)
    release_on_marker(pc)
    if audio:
        pc.addTrack(AudioStreamTrack())  # silence, 20 ms a frame
    channel = pc.createDataChannel("facegate")
    live = Client(pc, camera)
    channel.on("message", lambda text: live.messages.append(json.loads(text)))

    @pc.on("track")
    def on_track(track: MediaStreamTrack) -> None:
        if track.kind == "video":
            live.reader = asyncio.get_running_loop().create_task(live.read(track))
        else:
            live.listener = asyncio.get_running_loop().create_task(live.listen(track))

    sdp = await offer_of(pc)
    response = await client.post(
        "/v1/streams", json={"sdp": sdp, **(body or source_body())}, headers=headers, timeout=60
    )
    if response.status_code == 201:
        answer = response.json()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    return live, response


async def wait_for(predicate: Any, timeout: float, step: float = 0.1) -> float:
    """Seconds until ``predicate()`` held (AssertionError after ``timeout``)."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "timed out"
        await asyncio.sleep(step)
    return time.monotonic() - started


def stored(h: Any, stream_id: uuid.UUID) -> tuple[LiveStreamRow, UsageRecord, list[AuditEvent]]:
    """The stream's row, usage record and ``stream.end`` events, as the database has them."""
    with session_scope(h.state.session_factory) as session:
        row = session.get(LiveStreamRow, stream_id)
        usage = session.scalars(select(UsageRecord).where(UsageRecord.job_id == stream_id)).one()
        ends = session.scalars(
            select(AuditEvent).where(
                AuditEvent.action == STREAM_END, AuditEvent.target == f"stream:{stream_id}"
            )
        ).all()
        assert row is not None
        session.expunge_all()
        return row, usage, list(ends)


def open_elsewhere(h: Any, tenant_id: str, node: str, seconds: float = 0.0) -> uuid.UUID:
    """A stream another API process runs, as this one sees it: its open row (nothing runs
    it here, no usage record)."""
    stream_id = uuid.uuid4()
    with session_scope(h.state.session_factory) as session:
        now = utcnow()
        session.add(
            LiveStreamRow(
                id=stream_id,
                tenant_id=tenant_id,
                node=node,
                started_at=now,
                heartbeat_at=now,
                seconds=seconds,
            )
        )
    return stream_id
