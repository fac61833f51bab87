"""aiortc's side of a stream: a mailbox that holds only the newest frame (a frame that
waits is replaced by a newer one, never queued behind it: latency cannot grow), the
outgoing video track that sends the swapped frames as they are made, and a receive buffer
that hands a video frame to the decoder as soon as its last packet is in.

aiortc's own video jitter buffer releases a frame only when the first packet of the *next*
frame arrives (it learns that a frame is complete from the timestamp changing), so every
received frame waits one frame interval (33 ms at 30 fps) before it is decoded; a browser's
receiver does not wait. :class:`MarkerJitterBuffer` also releases a frame on its RTP
marker bit (set on a video frame's last packet, RFC 3550 / RFC 7741), when all of its
packets are in; a frame with a packet missing still waits for the next frame, as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Generic, TypeVar

import structlog
from aiortc import MediaStreamTrack, RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamError
from aiortc.rtp import RtpPacket
from av import VideoFrame

log = structlog.get_logger("facegate.streams")

T = TypeVar("T")


class Newest(Generic[T]):
    """A mailbox of one: ``put`` replaces what was not taken yet (True: one was dropped);
    ``take`` waits for the next item. ``close`` wakes a waiting taker with None."""

    def __init__(self) -> None:
        self._item: T | None = None
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, item: T) -> bool:
        dropped = self._item is not None
        self._item = item
        self._ready.set()
        return dropped

    async def take(self) -> T | None:
        await self._ready.wait()
        item, self._item = self._item, None
        if not self.closed:
            self._ready.clear()
        return item

    def close(self) -> None:
        self.closed = True
        self._item = None
        self._ready.set()


class SwappedTrack(MediaStreamTrack):
    """The video track sent back: each swapped frame once, as soon as it is ready (the
    sender encodes at the rate the engine keeps up with)."""

    kind = "video"

    def __init__(
        self,
        frames: Newest[tuple[VideoFrame, float]],
        waited: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__()
        self.frames = frames
        self.waited = waited

    async def recv(self) -> VideoFrame:
        """The next swapped frame (each is put with the monotonic time it was ready;
        ``waited`` is told how long it waited for the sender to take it)."""
        item = await self.frames.take()
        if item is None:
            raise MediaStreamError("the stream ended")
        frame, ready = item
        if self.waited is not None:
            self.waited(time.monotonic() - ready)
        return frame


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer, releasing a complete frame at its marker packet."""

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        pli, frame = super().add(packet)
        if frame is None and packet.marker:
            frame = self._complete_frame()
        return pli, frame

    def _complete_frame(self) -> JitterFrame | None:
        """The frame at the buffer's origin when its packets, up to the marker, are all in
        (and removed from the buffer); None otherwise."""
        origin = self._origin
        if origin is None:
            return None
        packets: list[RtpPacket] = []
        for count in range(self.capacity):
            packet = self._packets[(origin + count) % self.capacity]
            if packet is None or (packets and packet.timestamp != packets[0].timestamp):
                return None  # a packet missing (or an older frame left): wait, as before
            packets.append(packet)
            if packet.marker:
                self.remove(count + 1)
                data = b"".join(p._data for p in packets)  # type: ignore[attr-defined]
                return JitterFrame(data=data, timestamp=packet.timestamp)
        return None


#: where aiortc (1.16) keeps a receiver's jitter buffer (a private attribute)
_RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"


def release_on_marker(pc: RTCPeerConnection) -> None:
    """Give ``pc``'s video receivers a :class:`MarkerJitterBuffer` (call it once its
    transceivers exist and before media flows: after ``setRemoteDescription`` of an
    offer, or after ``addTrack`` on the offering side)."""
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "video":
            continue
        receiver = transceiver.receiver
        current = getattr(receiver, _RECEIVER_BUFFER, None)
        if type(current) is JitterBuffer:
            setattr(receiver, _RECEIVER_BUFFER, MarkerJitterBuffer(current.capacity, is_video=True))
        elif not isinstance(current, MarkerJitterBuffer):
            log.warning("stream.jitter_buffer_unknown", found=type(current).__name__)
