"""The work a video frame costs, counted (issue 28): a cheap guard against a stage that
starts doing per frame what it did once per keyframe, per refresh or per batch, or a second
conversion of the whole frame. Counts, not times: they hold on a shared CI machine.

A 1 s clip of one face at 640x360 through the service's chain (swap, watermark, the
output's moderation), as ``benchmarks/video_bench.py`` (c) runs it at 720p.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from tests.engine.video.videoclips import SOURCE, create_clip

from facegate.engine import screening, watermark
from facegate.engine.moderation import ModerationPolicy, Moderator
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.screening import VideoScreen
from facegate.engine.tracking import CropMesh, TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, process_video
from facegate.engine.video.process import FrameStages
from facegate.engine.video.swap import VideoSwap
from facegate.engine.watermark import VideoWatermark

pytestmark = pytest.mark.skipif(not SOURCE.is_file(), reason=f"test photos not at {SOURCE}")

WIDTH, HEIGHT, SECONDS, FPS = 640, 360, 1, 30


class _Screen:
    """The output's moderation as the worker runs it (a FrameInspector)."""

    def __init__(self, screen: VideoScreen) -> None:
        self.screen = screen

    def see(self, frame: Frame, time: Fraction) -> None:
        self.screen.see(frame, time)

    def end(self) -> None:
        self.screen.close()


def test_a_frame_costs_one_tracked_mesh_and_two_whole_frame_conversions(
    face_engine: EngineRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=SECONDS, width=WIDTH, height=HEIGHT, fps=FPS)
    counts: Counter[str] = Counter()
    whole = WIDTH * HEIGHT

    def counted(name: str, work: Any, pixels: bool = False) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if not pixels or args[0].shape[0] * args[0].shape[1] >= whole:
                counts[name] += 1
            return work(*args, **kwargs)

        return run

    # every colour conversion of a whole frame (or of its I420 planes), in any module
    monkeypatch.setattr(cv2, "cvtColor", counted("whole-frame conversion", cv2.cvtColor, True))
    monkeypatch.setattr(CropMesh, "run", counted("tracked mesh", CropMesh.run))
    monkeypatch.setattr(
        watermark, "watermark_delta", counted("watermark embed", watermark.watermark_delta)
    )
    monkeypatch.setattr(
        screening, "forward_open_nsfw", counted("classifier batch", screening.forward_open_nsfw)
    )

    spec = PipelineSpec.model_validate(
        {"processors": ["face_swapper"], "selector": {"mode": "one"}}
    )
    pipeline = face_engine.pipeline(spec)
    ctx = pipeline.prepare([cv2.imread(str(SOURCE), cv2.IMREAD_COLOR)])
    options = TrackerOptions(fps=FPS)
    work = VideoSwap(pipeline, ctx, options)
    detect = counted("detection", pipeline.analyser.analyse)
    work.tracker.analyser = type("Counted", (), {"analyse": staticmethod(detect)})()  # type: ignore[assignment]
    screen = VideoScreen(Moderator(face_engine.hub), "output", ModerationPolicy())
    bits = np.random.default_rng(28).integers(0, 2, 64).astype(np.uint8)
    stages = FrameStages(
        render=work.render,
        analyse=work.analyse,
        finish=VideoWatermark(bits),
        inspect=_Screen(screen),
    )
    try:
        result = process_video(src, tmp_path / "out.mp4", stages, VideoOptions())
    finally:
        work.close()
    frames = result.frames
    assert frames == SECONDS * FPS
    checked = len(screen.checked)
    assert checked >= math.ceil(frames / screening.gap_frames(ModerationPolicy().video_gap_seconds))

    # Faces: a full detection on keyframes only, one tracked mesh a frame in between.
    keyframes = math.ceil(frames / options.detect_every)
    assert counts["detection"] <= keyframes
    assert counts["tracked mesh"] <= frames
    # The watermark's pattern is made once per refresh, added to the frames in between.
    assert counts["watermark embed"] <= math.ceil(frames / VideoWatermark.REFRESH_FRAMES)
    # Moderation scores its frames in batches, not one call a frame.
    assert counts["classifier batch"] <= math.ceil(checked / screening.BATCH)
    # Whole-frame colour conversions: the decoded picture to BGR and back for the encoder,
    # plus one for each keyframe's detection and each frame moderation checks.
    assert counts["whole-frame conversion"] <= 2 * frames + keyframes + checked
