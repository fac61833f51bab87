"""A stream's engine work, frame by frame, from one thread: the video path's tracking and
sticky selection (``engine.video.swap.VideoSwap``: detect on keyframes, follow the face
between), then what every job frame gets last (``worker.video_runner.finish_frames``: the
disclosure label when the policy has one, the watermark always). Frames over the policy's
``max_output_resolution`` are scaled down first.

Live is the latency class, so a keyframe's detection while the face is followed runs beside
the frames and its new faces are taken in when ready (``TrackerOptions.detect_aside``): the
frame does not wait for it."""

from __future__ import annotations

import time

import cv2

from facegate.engine.pipeline import Pipeline
from facegate.engine.processors.base import JobContext
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video.swap import VideoSwap
from facegate.provenance.marker import JobMark
from facegate.tenancy.tables import Policy, resolution_dimensions
from facegate.worker.video_runner import finish_frames

#: the rate the tracker's smoothing assumes (a live stream's processed rate is near it)
LIVE_FPS = 20.0


def fit_frame(frame: Frame, resolution: str) -> Frame:
    """``frame`` scaled down (aspect kept) to fit the named resolution either way round;
    unchanged when it fits."""
    height, width = frame.shape[:2]
    cap_long, cap_short = resolution_dimensions(resolution)
    scale = min(cap_long / max(width, height), cap_short / min(width, height), 1.0)
    if scale >= 1.0:
        return frame
    size = (max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2))
    resized: Frame = cv2.resize(frame, size, interpolation=cv2.INTER_AREA)  # type: ignore[assignment]
    return resized


class LiveFrames:
    """Swaps one stream's frames in order (not thread-safe: one thread calls it)."""

    def __init__(self, pipeline: Pipeline, ctx: JobContext, policy: Policy, mark: JobMark) -> None:
        self.swap = VideoSwap(pipeline, ctx, TrackerOptions(fps=LIVE_FPS, detect_aside=True))
        self.finish = finish_frames(policy, mark)
        self.resolution = policy.max_output_resolution
        self.index = 0
        #: the last frame's seconds per stage: fit, analyse (detect or track, select),
        #: render (the processors), finish (label, watermark)
        self.stages: dict[str, float] = {}

    def process(self, frame: Frame) -> Frame:
        t0 = time.perf_counter()
        frame = fit_frame(frame, self.resolution)
        t1 = time.perf_counter()
        found = self.swap.analyse(frame, self.index)
        t2 = time.perf_counter()
        rendered = self.swap.render(frame, found)
        t3 = time.perf_counter()
        out = self.finish(rendered, self.index)
        t4 = time.perf_counter()
        self.stages = {"fit": t1 - t0, "analyse": t2 - t1, "render": t3 - t2, "finish": t4 - t3}
        self.index += 1
        return out

    def close(self) -> None:
        self.swap.close()
