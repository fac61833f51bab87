"""A camera made of one photo, and frame numbers stamped into its pixels: what the tests,
``benchmarks/live_bench.py`` and ``facegate stream-check`` stream to a server and read back
from the swapped frames it returns (the number says which camera frame a returned frame
is, so the time between sending and receiving it is the latency a viewer sees); and the
client that does it over HTTP (:func:`run_client`)."""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import cv2
import httpx
import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCIceServer,
    RTCIceTransportPolicy,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

from facegate.engine.types import Frame
from facegate.streams.media import release_on_marker

STAMP_BITS = 16
STAMP_CELL = 16  # px: a cell survives VP8 at the sizes streamed here
_CLOCK = 90_000  # the RTP video clock
FIRST_FRAME_SECONDS = 30.0  # how long a client waits for its first swapped frame


def stamp(frame: Frame, number: int) -> Frame:
    """``frame`` with ``number`` (below 2^16) as a row of black/white cells, top-left,
    framed by a white cell on each side (so a reader can tell a stamp is there)."""
    out = frame.copy()
    cells = [1] + [(number >> (STAMP_BITS - 1 - i)) & 1 for i in range(STAMP_BITS)] + [1]
    for i, bit in enumerate(cells):
        x = i * STAMP_CELL
        out[0:STAMP_CELL, x : x + STAMP_CELL] = 255 if bit else 0
    return out


def read_stamp(frame: Frame) -> int | None:
    """The number :func:`stamp` put in ``frame``, or None."""
    gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
    values = [
        float(gray[2 : STAMP_CELL - 2, i * STAMP_CELL + 2 : (i + 1) * STAMP_CELL - 2].mean())
        for i in range(STAMP_BITS + 2)
    ]
    if values[0] < 160 or values[-1] < 160:
        return None
    if any(64 < v < 192 for v in values[1:-1]):
        return None  # a cell neither black nor white: no stamp, or a damaged one
    number = 0
    for value in values[1:-1]:
        number = (number << 1) | int(value >= 128)
    return number


def camera_frame(photo: Frame, width: int = 640, height: int = 480) -> Frame:
    """The photo fitted into a ``width`` x ``height`` picture (letterboxed, centred)."""
    scale = min(width / photo.shape[1], height / photo.shape[0])
    resized = cv2.resize(photo, (round(photo.shape[1] * scale), round(photo.shape[0] * scale)))
    canvas = np.full((height, width, 3), 90, dtype=np.uint8)
    top, left = (height - resized.shape[0]) // 2, (width - resized.shape[1]) // 2
    canvas[top : top + resized.shape[0], left : left + resized.shape[1]] = resized
    return canvas


class PhotoCamera(MediaStreamTrack):
    """A video track of ``picture`` at ``fps``, each frame stamped with its number; the
    monotonic time each number was sent is kept in ``sent``."""

    kind = "video"

    def __init__(self, picture: Frame, fps: float = 30.0) -> None:
        super().__init__()
        self.picture = picture
        self.fps = fps
        self.count = 0
        self.sent: dict[int, float] = {}
        self._start: float | None = None

    async def recv(self) -> VideoFrame:
        if self._start is None:
            self._start = time.monotonic()
        due = self._start + self.count / self.fps
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        number = self.count % (1 << STAMP_BITS)
        frame = VideoFrame.from_ndarray(stamp(self.picture, number), format="bgr24")
        frame.pts = round(self.count * _CLOCK / self.fps)
        frame.time_base = fractions.Fraction(1, _CLOCK)
        self.sent[number] = time.monotonic()
        self.count += 1
        return frame


def client_configuration(ice: dict[str, Any], relay: bool = False) -> RTCConfiguration:
    """A client's peer configuration from ``GET /v1/streams/ice``'s answer; ``relay``: relay
    candidates only (every packet through the TURN server, as a client behind a firewall
    that lets no UDP through to the server would)."""
    servers = [
        RTCIceServer(urls=s["urls"], username=s.get("username"), credential=s.get("credential"))
        for s in ice["ice_servers"]
    ]
    if relay:
        return RTCConfiguration(iceServers=servers, iceTransportPolicy=RTCIceTransportPolicy.RELAY)
    return RTCConfiguration(iceServers=servers)


async def fetch_ice(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /v1/streams/ice`` (raises for an error status)."""
    response = await client.get("/v1/streams/ice", headers=headers)
    response.raise_for_status()
    ice: dict[str, Any] = response.json()
    return ice


@dataclass
class ClientRun:
    """What a client saw: per received frame (seconds since the answer, latency seconds);
    frames without a readable stamp; a few received frames kept (one in ``keep_every``)
    and the last one;
    the stream as the server showed it when the client ended it (or it ended)."""

    stream_id: str = ""
    started: float = 0.0
    seconds: float = 0.0
    samples: list[tuple[float, float]] = field(default_factory=list)
    unreadable: int = 0
    kept: list[Frame] = field(default_factory=list)
    last: Frame | None = None
    server: dict[str, Any] = field(default_factory=dict)
    #: the POST's round trip (offer sent to answer back), and the answer to the first
    #: swapped frame
    answer_seconds: float = 0.0
    first_frame_seconds: float = math.nan
    #: the DELETE's round trip (sent to the stream ended)
    end_seconds: float = 0.0

    def latency_ms(self, q: float) -> float:
        ordered = sorted(lat for _, lat in self.samples)
        if not ordered:
            return math.nan
        return 1000 * ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    def fps(self) -> float:
        return len(self.samples) / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        latencies = [lat for _, lat in self.samples]
        return {
            "stream_id": self.stream_id,
            "seconds": round(self.seconds, 2),
            "frames_received": len(self.samples),
            "fps": round(self.fps(), 1),
            "latency_ms_p50": round(1000 * statistics.median(latencies)) if latencies else None,
            "latency_ms_p95": round(self.latency_ms(0.95)) if latencies else None,
            "end_reason": self.server.get("end_reason"),
        }


async def run_client(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    body: dict[str, Any],
    picture: Frame,
    seconds: float,
    *,
    fps: float = 30.0,
    keep: int = 20,
    keep_every: int = 30,
    marker: bool = True,
    relay: bool = False,
) -> ClientRun:
    """Stream ``picture`` as a camera for ``seconds`` to ``POST /v1/streams`` (``body``:
    the source and options), then end it (DELETE). ``marker``: a swapped frame is decoded
    as soon as its last packet is in, as a browser does (False: aiortc's own receiver,
    which waits for the next frame's first packet). The client uses the ICE servers of
    ``GET /v1/streams/ice``; ``relay``: relay candidates only (through the TURN server)."""
    run = ClientRun()
    camera = PhotoCamera(picture, fps=fps)
    pc = RTCPeerConnection(client_configuration(await fetch_ice(client, headers), relay))
    pc.addTrack(camera)
    if marker:
        release_on_marker(pc)

    async def read(track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            now = time.monotonic()
            if run.seconds:
                continue  # the run is over: frames that come while it ends are not counted
            image: Frame = frame.to_ndarray(format="bgr24")  # type: ignore[union-attr]
            run.last = image
            first.set()
            number = read_stamp(image)
            if number is None or number not in camera.sent:
                run.unreadable += 1
                continue
            run.samples.append((now - run.started, now - camera.sent[number]))
            if len(run.samples) % keep_every == 0 and len(run.kept) < keep:
                run.kept.append(image)

    first = asyncio.Event()
    readers: list[asyncio.Task[None]] = []
    pc.on("track", lambda track: readers.append(asyncio.ensure_future(read(track))))
    try:
        await pc.setLocalDescription(await pc.createOffer())
        asked = time.monotonic()
        answer = await client.post(
            "/v1/streams", json={"sdp": pc.localDescription.sdp, **body}, headers=headers
        )
        answer.raise_for_status()
        run.stream_id = answer.json()["id"]
        run.started = time.monotonic()
        run.answer_seconds = run.started - asked
        await pc.setRemoteDescription(RTCSessionDescription(answer.json()["sdp"], "answer"))
        # ``seconds`` of frames: counted from the first one back (connecting takes a while)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first.wait(), FIRST_FRAME_SECONDS)
            run.first_frame_seconds = time.monotonic() - run.started
        await asyncio.sleep(seconds)
        ending = time.monotonic()
        run.seconds = ending - run.started
        ended = await client.delete(f"/v1/streams/{run.stream_id}", headers=headers)
        run.end_seconds = time.monotonic() - ending
        run.server = ended.json()
    finally:
        for task in readers:
            task.cancel()
        await pc.close()
    return run


async def run_client_at(
    url: str,
    key: str,
    body: dict[str, Any],
    picture: Frame,
    seconds: float,
    **options: Any,
) -> ClientRun:
    """``run_client`` against the service at ``url`` with the API key ``key`` (``options``:
    ``run_client``'s own)."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        headers = {"Authorization": f"Bearer {key}"}
        return await run_client(client, headers, body, picture, seconds, **options)
