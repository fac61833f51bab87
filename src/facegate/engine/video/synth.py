"""Synthetic face clips for tests and benchmarks: a still photo moved, zoomed and turned over
time, with a sine tone on the audio track. Written with PyAV in one pass (no temporary files),
so a test can make exactly the clip it needs instead of committing media.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType

import av
import cv2
import numpy as np

from facegate.engine.types import Frame

_VIDEO_CODECS = MappingProxyType({".webm": "libvpx-vp9"})
_AUDIO_CODECS = MappingProxyType({".webm": "libopus"})


@dataclass(frozen=True)
class ClipSpec:
    """What to draw. ``motion`` False gives a perfectly static face (jitter tests)."""

    seconds: float = 2.0
    fps: int = 30
    width: int = 640
    height: int = 360
    motion: bool = True
    audio: bool = True
    #: display-matrix rotation written on the stream; pixels are stored turned the other way,
    #: so the clip *displays* upright.
    rotation: int = 0
    #: alternate 1/fps and 1.5/fps frame durations (variable frame rate).
    vfr: bool = False
    full_range: bool = False
    sample_rate: int = 48000


def _canvas(photo: Frame, width: int, height: int) -> Frame:
    """The photo fitted to the canvas height over a blurred, stretched copy of itself."""
    background = cv2.GaussianBlur(cv2.resize(photo, (width, height)), (0, 0), 15)
    scale = min(height / photo.shape[0], width / photo.shape[1])
    fitted = cv2.resize(photo, (int(photo.shape[1] * scale), int(photo.shape[0] * scale)))
    y0 = (height - fitted.shape[0]) // 2
    x0 = (width - fitted.shape[1]) // 2
    background[y0 : y0 + fitted.shape[0], x0 : x0 + fitted.shape[1]] = fitted
    return np.asarray(background, dtype=np.uint8)


def clip_frame(base: Frame, index: int, spec: ClipSpec) -> Frame:
    """Frame ``index``: a smooth pan, a slow zoom and a small roll (or the still canvas)."""
    if not spec.motion:
        return base
    t = index / spec.fps
    h, w = base.shape[:2]
    angle = 8.0 * math.sin(2 * math.pi * t / 3.0)
    zoom = 1.0 + 0.15 * math.sin(2 * math.pi * t / 4.0)
    matrix = cv2.getRotationMatrix2D((w / 2, h / 2), angle, zoom)
    matrix[0, 2] += 0.06 * w * math.sin(2 * math.pi * t / 2.5)
    matrix[1, 2] += 0.03 * h * math.cos(2 * math.pi * t / 3.5)
    moved = cv2.warpAffine(base, matrix, (w, h), borderMode=cv2.BORDER_REFLECT)
    return np.asarray(moved, dtype=np.uint8)


def _frame_pts(index: int, spec: ClipSpec) -> tuple[int, Fraction]:
    if not spec.vfr:
        return index, Fraction(1, spec.fps)
    # Durations alternate 2 and 3 ticks of 1/(2*fps): 1/fps and 1.5/fps.
    return (index // 2) * 5 + (index % 2) * 2, Fraction(1, 2 * spec.fps)


def make_face_clip(path: Path, photo_path: Path, spec: ClipSpec = ClipSpec()) -> int:
    """Write the clip to ``path`` (container from its suffix); returns the frame count."""
    photo = cv2.imread(str(photo_path), cv2.IMREAD_COLOR)
    if photo is None:
        raise FileNotFoundError(photo_path)
    base = _canvas(np.asarray(photo, dtype=np.uint8), spec.width, spec.height)
    turns = (spec.rotation // 90) % 4
    total = round(spec.seconds * spec.fps)
    suffix = path.suffix.lower()
    with av.open(str(path), "w") as out:
        video = out.add_stream(_VIDEO_CODECS.get(suffix, "libx264"), rate=spec.fps)
        assert isinstance(video, av.VideoStream)
        stored_w, stored_h = (spec.height, spec.width) if turns % 2 else (spec.width, spec.height)
        video.width, video.height = stored_w, stored_h
        video.pix_fmt = "yuv420p"
        _, time_base = _frame_pts(0, spec)
        video.codec_context.time_base = time_base
        video.time_base = time_base
        # Each encoder's fastest settings (VP9 at its default cpu-used is ~10x slower).
        if suffix == ".webm":
            video.options = {"deadline": "realtime", "cpu-used": "8"}
        else:
            video.options = {"preset": "ultrafast"}
        if spec.full_range:
            video.codec_context.color_range = 2
        if turns:
            video.set_display_rotation(spec.rotation)
        audio: av.AudioStream | None = None
        if spec.audio:
            stream = out.add_stream(_AUDIO_CODECS.get(suffix, "aac"), rate=spec.sample_rate)
            assert isinstance(stream, av.AudioStream)
            audio = stream
            audio.layout = "mono"
        sample_pos = 0
        for index in range(total):
            upright = clip_frame(base, index, spec)
            stored = np.ascontiguousarray(np.rot90(upright, -turns)) if turns else upright
            frame = av.VideoFrame.from_ndarray(stored, format="bgr24")
            if spec.full_range:
                frame = frame.reformat(format="yuvj420p", dst_color_range=2)
            frame.pts, frame.time_base = _frame_pts(index, spec)
            out.mux(video.encode(frame))
            if audio is not None:
                pts, tb = _frame_pts(index + 1, spec)
                until = int(pts * tb * spec.sample_rate)
                n = np.arange(sample_pos, until)
                tone = (0.3 * np.sin(2 * np.pi * 440.0 * n / spec.sample_rate)).astype(np.float32)
                chunk = av.AudioFrame.from_ndarray(tone[None], format="flt", layout="mono")
                chunk.sample_rate, chunk.pts = spec.sample_rate, sample_pos
                out.mux(audio.encode(chunk))
                sample_pos = until
        out.mux(video.encode())
        if audio is not None:
            out.mux(audio.encode())
    return total
