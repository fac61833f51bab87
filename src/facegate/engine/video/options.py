"""Options and progress records of a video run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from facegate.engine.errors import InvalidOptions

Preset = Literal[
    "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"
]

#: output suffix -> (FFmpeg muxer, video encoder)
CONTAINERS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        ".mp4": ("mp4", "libx264"),
        ".mov": ("mov", "libx264"),
        ".mkv": ("matroska", "libx264"),
        ".webm": ("webm", "libvpx-vp9"),
    }
)


class VideoOptions(BaseModel):
    """How to write the output. ``max_side``/``max_pixels`` are the tenant's resolution cap:
    the output is scaled down (never up) to fit both, with even dimensions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: float = Field(0.0, ge=0)
    end: float | None = Field(None, gt=0)
    crf: int = Field(23, ge=0, le=63)
    preset: Preset = "veryfast"
    max_side: int | None = Field(None, ge=16)
    max_pixels: int | None = Field(None, ge=256)
    #: render threads (the frame function must be thread-safe); 2 beat 1 by ~1.3x on 2 cores
    #: (benchmarks/video_bench.py) because rendering overlaps decode, tracking and encode.
    workers: int = Field(2, ge=1, le=16)
    #: frames in flight between stages (bounds memory; a few are enough to keep stages busy).
    queue_size: int = Field(4, ge=1, le=64)

    @model_validator(mode="after")
    def _check_trim(self) -> VideoOptions:
        if self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        return self


def container_for(dst: Path) -> tuple[str, str]:
    """(muxer, video encoder) for an output path, from its suffix."""
    try:
        return CONTAINERS[dst.suffix.lower()]
    except KeyError:
        allowed = ", ".join(sorted(CONTAINERS))
        raise InvalidOptions(f"output must end with one of {allowed}, not {dst.name!r}") from None


def output_size(width: int, height: int, options: VideoOptions) -> tuple[int, int]:
    """Scale (width, height) down to the cap, keeping the aspect ratio; both even."""
    scale = 1.0
    if options.max_side is not None:
        scale = min(scale, options.max_side / max(width, height))
    if options.max_pixels is not None:
        scale = min(scale, math.sqrt(options.max_pixels / (width * height)))
    # Round down to even so the cap is never exceeded and 4:2:0 chroma fits exactly.
    out_w = max(2, int(width * scale) // 2 * 2)
    out_h = max(2, int(height * scale) // 2 * 2)
    return out_w, out_h


@dataclass(frozen=True)
class VideoProgress:
    """One progress report: frames written so far, of ``frames_total`` (an estimate when the
    container declares none), the processing rate and the estimated time left."""

    frames_done: int
    frames_total: int
    fps: float
    eta_seconds: float | None
    elapsed_seconds: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.frames_done / self.frames_total) if self.frames_total else 0.0


@dataclass(frozen=True)
class VideoResult:
    """What a finished run wrote (the service records frames and pixels for usage)."""

    frames: int
    width: int
    height: int
    duration: float
    has_audio: bool
    seconds: float

    @property
    def output_pixels(self) -> int:
        return self.frames * self.width * self.height
