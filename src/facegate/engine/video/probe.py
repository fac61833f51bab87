"""Look at a video file before any work: what it is, whether it is sound, whether it fits the
limits. Everything the service must refuse is refused here with a typed error, so a job never
starts on a file it cannot finish."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import av.error

from facegate.engine.errors import CorruptMedia, MediaTooLarge, UnsupportedMedia
from facegate.engine.video_sniff import is_video_file

# Demuxers that read still images: FFmpeg opens a JPEG as a one-frame "video".
_IMAGE_DEMUXERS = ("image2", "_pipe", "gif", "webp")
#: Beyond this a dimension is not a real video (and would make a decompression bomb).
MAX_DIMENSION = 16384


@dataclass(frozen=True)
class VideoLimits:
    """Input limits, from the tenant's policy (the engine defaults are generous)."""

    max_bytes: int = 2 * 1024**3
    max_seconds: float = 3600.0
    max_frames: int = 216_000
    max_pixels: int = 7680 * 4320


@dataclass(frozen=True)
class VideoInfo:
    """What ``probe_video`` found. ``width``/``height`` are as stored (before ``rotation``)."""

    duration: float
    fps: Fraction
    frames: int
    width: int
    height: int
    rotation: int
    has_audio: bool
    codec: str
    audio_codec: str | None
    pix_fmt: str
    color_range: int
    container: str

    @property
    def display_size(self) -> tuple[int, int]:
        """(width, height) as shown, after the display-matrix rotation."""
        return (self.height, self.width) if self.rotation % 180 else (self.width, self.height)


def ffmpeg_reason(exc: av.error.FFmpegError) -> str:
    """What went wrong, without the file name FFmpeg's message carries (a scratch path of
    the server that the client has no business seeing)."""
    return str(exc.strerror or type(exc).__name__)


def _open_input(path: Path) -> av.container.InputContainer:
    try:
        return av.open(str(path), "r")
    except av.error.FFmpegError as exc:
        # A known container signature that FFmpeg cannot read is damaged, not foreign.
        if is_video_file(path):
            raise CorruptMedia(
                f"the video container cannot be read (truncated?): {ffmpeg_reason(exc)}"
            ) from None
        raise UnsupportedMedia("not a video file this service can read") from None


def _count_packets(container: av.container.InputContainer, stream: av.VideoStream) -> int:
    """Exact frame count without decoding (matroska/webm do not declare one)."""
    count = 0
    try:
        for packet in container.demux(stream):
            if packet.size:
                count += 1
        # A track with no samples cannot be rewound (FFmpeg answers EPERM, which PyAV
        # raises as av.error.PermissionError, an FFmpegError): damaged input, not a fault.
        container.seek(0)
    except av.error.FFmpegError as exc:
        raise CorruptMedia(f"the video data is damaged: {ffmpeg_reason(exc)}") from None
    return count


def _first_frame(container: av.container.InputContainer, stream: av.VideoStream) -> av.VideoFrame:
    try:
        for frame in container.decode(stream):
            return frame
    except av.error.FFmpegError as exc:
        raise CorruptMedia(
            f"the first video frame cannot be decoded: {ffmpeg_reason(exc)}"
        ) from None
    raise CorruptMedia("the video stream has no decodable frame")


def probe_video(path: Path, limits: VideoLimits | None = None) -> VideoInfo:
    """Check ``path`` against ``limits`` and describe it; raises a typed ``EngineError``."""
    limits = limits or VideoLimits()
    size = os.path.getsize(path)
    if size > limits.max_bytes:
        raise MediaTooLarge(
            f"video is {size} bytes, over the limit of {limits.max_bytes}",
            limit_name="max_bytes",
            limit=limits.max_bytes,
            actual=size,
        )
    with _open_input(path) as container:
        fmt = container.format.name
        if not container.streams.video:
            if container.streams.audio:
                raise UnsupportedMedia("audio-only file: there is no video stream")
            raise UnsupportedMedia("the file has no video stream")
        if any(key in fmt for key in _IMAGE_DEMUXERS):
            raise UnsupportedMedia(f"a still image ({fmt}), not a video")
        stream = container.streams.video[0]
        width, height = stream.codec_context.width, stream.codec_context.height
        if not (0 < width <= MAX_DIMENSION and 0 < height <= MAX_DIMENSION):
            raise CorruptMedia(f"absurd video dimensions {width}x{height}")
        if width * height > limits.max_pixels:
            raise MediaTooLarge(
                f"video is {width}x{height}, over the limit of {limits.max_pixels} pixels",
                limit_name="max_pixels",
                limit=limits.max_pixels,
                actual=width * height,
            )
        declared = stream.frames
        counted = _count_packets(container, stream)
        if counted == 0:
            raise CorruptMedia("the video stream has no frames")
        if declared and counted < declared * 0.98 - 1:
            raise CorruptMedia(f"truncated video: {counted} of {declared} frames present")
        fps = stream.average_rate or stream.guessed_rate or Fraction(25)
        duration = _duration(container, stream, counted, fps)
        _check_length(duration, counted, limits)
        first = _first_frame(container, stream)
        audio = container.streams.audio[0] if container.streams.audio else None
        return VideoInfo(
            duration=duration,
            fps=Fraction(fps),
            frames=counted,
            width=width,
            height=height,
            rotation=round(first.rotation) % 360,
            has_audio=audio is not None,
            codec=stream.codec_context.name,
            audio_codec=audio.codec_context.name if audio else None,
            pix_fmt=first.format.name,
            color_range=int(first.color_range),
            container=fmt,
        )


def _duration(
    container: av.container.InputContainer, stream: av.VideoStream, frames: int, fps: Fraction
) -> float:
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / av.time_base
    return float(frames / fps)


def _check_length(duration: float, frames: int, limits: VideoLimits) -> None:
    if duration > limits.max_seconds:
        raise MediaTooLarge(
            f"video is {duration:.1f} s long, over the limit of {limits.max_seconds:g} s",
            limit_name="max_seconds",
            limit=limits.max_seconds,
            actual=round(duration, 3),
        )
    if frames > limits.max_frames:
        raise MediaTooLarge(
            f"video has {frames} frames, over the limit of {limits.max_frames}",
            limit_name="max_frames",
            limit=limits.max_frames,
            actual=frames,
        )
