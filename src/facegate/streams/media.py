"""aiortc's side of a stream: a mailbox that holds only the newest frame (a frame that
waits is replaced by a newer one, never queued behind it: latency cannot grow), and the
outgoing video track that sends the swapped frames as they are made."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

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

    def __init__(self, frames: Newest[VideoFrame]) -> None:
        super().__init__()
        self.frames = frames

    async def recv(self) -> VideoFrame:
        frame = await self.frames.take()
        if frame is None:
            raise MediaStreamError("the stream ended")
        return frame
