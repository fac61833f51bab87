"""A camera made of one photo, and frame numbers stamped into its pixels: what the tests
and ``benchmarks/live_bench.py`` stream to a server and read back from the swapped frames
it returns (the number says which camera frame a returned frame is, so the time between
sending and receiving it is the latency a viewer sees)."""

from __future__ import annotations

import asyncio
import fractions
import time

import cv2
import numpy as np
from aiortc import MediaStreamTrack
from av import VideoFrame

from facegate.engine.types import Frame

STAMP_BITS = 16
STAMP_CELL = 16  # px: a cell survives VP8 at the sizes streamed here
_CLOCK = 90_000  # the RTP video clock


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
    """The number :func:`stamp` put in ``frame`` (resized back to ``width``), or None."""
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
