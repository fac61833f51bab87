"""Decoded picture <-> BGR frame, with as few colour conversions and copies as possible.

The common case (limited-range 4:2:0, what almost every camera and encoder writes) goes through
OpenCV's I420 conversions: about 0.3 ms each way for 720p, where swscale's BGR -> YUV path takes
4 ms. The round trip is exact to a few levels on untouched pixels, so only what the processors
change is changed. Full-range sources go through swscale, which honours the range both ways.
Frames are turned upright for processing (faces are found upright) and turned back before
encoding, so the output keeps the source's display-matrix rotation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import av
import cv2
import numpy as np

from facegate.engine.types import Frame

_FULL = 2  # AVCOL_RANGE_JPEG
_I420 = ("yuv420p", "yuvj420p")


def _u8(array: Any) -> Frame:
    """Type narrowing only: these arrays are uint8 by construction (no copy)."""
    result: Frame = array
    return result


@dataclass(frozen=True)
class FrameGeometry:
    """Stored (encoded) size of output frames and how to turn them upright."""

    width: int
    height: int
    #: quarter turns counter-clockwise (np.rot90's k) that make a stored frame upright
    turns: int
    full_range: bool

    @classmethod
    def for_rotation(
        cls, width: int, height: int, rotation: int, full_range: bool
    ) -> FrameGeometry:
        # FFmpeg's display matrix angle is counter-clockwise: showing the frame means turning
        # it by that angle, which is what np.rot90 does for k = angle / 90.
        return cls(width, height, (round(rotation / 90)) % 4, full_range)


def decoded_to_bgr(frame: av.VideoFrame, geometry: FrameGeometry) -> Frame:
    """A decoded picture as an upright, contiguous BGR frame at the output size."""
    size_ok = frame.width == geometry.width and frame.height == geometry.height
    if geometry.full_range:
        bgr = _u8(
            frame.reformat(
                geometry.width,
                geometry.height,
                "bgr24",
                src_color_range=_FULL,
                dst_color_range=_FULL,
                interpolation="AREA",
            ).to_ndarray()
        )
    else:
        if not size_ok or frame.format.name not in _I420:
            frame = frame.reformat(geometry.width, geometry.height, "yuv420p", interpolation="AREA")
        bgr = _u8(cv2.cvtColor(_u8(frame.to_ndarray()), cv2.COLOR_YUV2BGR_I420))
    if geometry.turns:
        bgr = _u8(np.ascontiguousarray(np.rot90(bgr, geometry.turns)))
    return bgr


def bgr_to_encodable(bgr: Frame, geometry: FrameGeometry) -> av.VideoFrame:
    """An upright BGR frame back to a stored-orientation 4:2:0 picture for the encoder."""
    if geometry.turns:
        bgr = _u8(np.ascontiguousarray(np.rot90(bgr, -geometry.turns)))
    if geometry.full_range:
        picture = av.VideoFrame.from_ndarray(bgr, format="bgr24").reformat(
            format="yuv420p", src_color_range=_FULL, dst_color_range=_FULL
        )
        picture.color_range = _FULL
        return picture
    planes = _u8(cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420))
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


def pixels_of(picture: av.VideoFrame) -> Callable[[], Frame]:
    """How to get a decoded picture's BGR pixels at its own size, upright as stored (for
    moderation, which converts only the frames it checks)."""

    def convert() -> Frame:
        geometry = FrameGeometry(picture.width, picture.height, 0, picture.color_range == 2)
        return decoded_to_bgr(picture, geometry)  # OpenCV's fast I420 path

    return convert
