"""Video targets: recognised by content, checked against the tenant's policy before anything
is stored (the same checks the worker makes again), and the output they get.

The policy's limits map onto the engine's: ``max_input_bytes`` → bytes, ``max_input_pixels``
→ pixels per frame, ``max_video_seconds`` → duration, and a frame cap of
``max_video_seconds`` at ``MAX_FPS_AT_CAP`` (a 240 fps clip of allowed length is still
refused: it costs as much as four clips). ``max_output_resolution`` does not refuse a video,
it scales the output down to fit (a camera clip is rarely exactly the plan's size).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from facegate.engine.errors import MediaTooLarge
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.video import VideoInfo, VideoLimits, VideoOptions, probe_video
from facegate.engine.video_sniff import looks_like_video
from facegate.errors import InvalidInput
from facegate.jobs.policy import output_size
from facegate.tenancy.tables import Policy, resolution_dimensions

MAX_FPS_AT_CAP = 60
#: engine limit name -> the policy field a client can look up in /v1/capabilities
POLICY_LIMIT_NAMES = {
    "max_bytes": "max_input_bytes",
    "max_pixels": "max_input_pixels",
    "max_seconds": "max_video_seconds",
    "max_frames": "max_video_frames",
}
VideoFormat = Literal["mp4", "webm"]
#: Codecs whose sources stay WebM (VP9 output); everything else becomes H.264 MP4.
_WEBM_CODECS = frozenset({"vp8", "vp9", "av1", "libdav1d", "libvpx", "libvpx-vp9"})


def is_video(data: bytes) -> bool:
    """Whether an upload is a video container (by its bytes, never its name)."""
    return looks_like_video(data[:512])


def video_limits(policy: Policy) -> VideoLimits:
    return VideoLimits(
        max_bytes=policy.max_input_bytes,
        max_seconds=float(policy.max_video_seconds),
        max_frames=policy.max_video_seconds * MAX_FPS_AT_CAP,
        max_pixels=policy.max_input_pixels,
    )


def probe_with_policy(path: Path, policy: Policy) -> VideoInfo:
    """``probe_video`` under the tenant's limits; an overrun names the policy's field."""
    try:
        return probe_video(path, video_limits(policy))
    except MediaTooLarge as exc:
        name = POLICY_LIMIT_NAMES.get(exc.limit_name, exc.limit_name)
        raise MediaTooLarge(
            f"{exc.detail} ({name})", limit_name=name, limit=exc.limit, actual=exc.actual
        ) from None


def check_video_target(data: bytes, spec: PipelineSpec, policy: Policy) -> VideoInfo:
    """Everything a video submission must pass before it is stored: the spec suits a video,
    and the file is sound and within the policy (probed from a private temporary file)."""
    if spec.output.format is not None:
        raise InvalidInput(
            "output.format is for image targets; a video keeps its container (mp4 or webm)",
            code="invalid-options",
        )
    if output_size(spec, 1, 1) != (1, 1):
        raise InvalidInput(
            "upscaling processors are not available for video targets",
            code="invalid-options",
        )
    fd, name = tempfile.mkstemp(prefix="facegate-probe-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return probe_with_policy(Path(name), policy)
    finally:
        Path(name).unlink(missing_ok=True)


def output_format(info: VideoInfo) -> VideoFormat:
    """The result's container: WebM for VP8/VP9/AV1 sources in Matroska/WebM, else MP4."""
    if "webm" in info.container and info.codec in _WEBM_CODECS:
        return "webm"
    return "mp4"


def input_content_type(info: VideoInfo) -> str:
    if "webm" in info.container or "matroska" in info.container:
        return "video/webm" if info.codec in _WEBM_CODECS else "video/x-matroska"
    if "mp4" in info.container or "mov" in info.container:
        return "video/mp4"
    return "application/octet-stream"


def resolution_cap(info: VideoInfo, policy: Policy) -> dict[str, Any]:
    """VideoOptions fields that scale the output down to the plan's resolution (both sides,
    either orientation), or nothing when it already fits."""
    cap_long, cap_short = resolution_dimensions(policy.max_output_resolution)
    long_side, short_side = max(info.width, info.height), min(info.width, info.height)
    scale = min(1.0, cap_long / long_side, cap_short / short_side)
    if scale >= 1.0:
        return {}
    return {"max_side": max(16, math.floor(long_side * scale))}


def video_options(info: VideoInfo, policy: Policy) -> VideoOptions:
    return VideoOptions(**resolution_cap(info, policy))
