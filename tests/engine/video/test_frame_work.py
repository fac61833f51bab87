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


def _frame_work(
    face_engine: EngineRuntime, tmp_path: Path, owns_frames: bool = True
) -> tuple[Counter[str], int, int]:
    """Run the clip through the service's chain: (what was counted, frames, checked frames).
    Call with ``cv2``, ``CropMesh``, ``watermark`` and ``screening`` patched by the caller.
    ``owns_frames``: the frames are handed over to the render and the watermark, as a video
    job runs them (``Pipeline.run_video``, ``finish_frames(in_place=True)``)."""
    src = create_clip(tmp_path / "in.mp4", seconds=SECONDS, width=WIDTH, height=HEIGHT, fps=FPS)
    spec = PipelineSpec.model_validate(
        {"processors": ["face_swapper"], "selector": {"mode": "one"}}
    )
    pipeline = face_engine.pipeline(spec)
    ctx = pipeline.prepare([cv2.imread(str(SOURCE), cv2.IMREAD_COLOR)])
    work = VideoSwap(pipeline, ctx, TrackerOptions(fps=FPS), owns_frames=owns_frames)
    counts: Counter[str] = Counter()

    def render(frame: Frame, found: Any) -> Frame:
        result = work.render(frame, found)
        if result is not frame:  # the swap pasted into a copy of the whole frame
            counts["whole-frame copy"] += 1
        return result

    mark = VideoWatermark(
        np.random.default_rng(28).integers(0, 2, 64).astype(np.uint8), owns_frames
    )

    def finish(frame: Frame, index: int) -> Frame:
        result = mark(frame, index)
        if result is not frame:  # the mark added into a new whole frame
            counts["whole-frame copy"] += 1
        return result

    detect = _counted(counts, "detection", pipeline.analyser.analyse)
    work.tracker.analyser = type("Counted", (), {"analyse": staticmethod(detect)})()  # type: ignore[assignment]
    screen = VideoScreen(Moderator(face_engine.hub), "output", ModerationPolicy())
    stages = FrameStages(
        render=render,
        analyse=work.analyse,
        finish=finish,
        inspect=_Screen(screen),
    )
    try:
        result = process_video(src, tmp_path / "out.mp4", stages, VideoOptions())
    finally:
        work.close()
    return counts, result.frames, len(screen.checked)


def _counted(counts: Counter[str], name: str, work: Any, pixels: int = 0) -> Any:
    """``work``, counting its calls as ``name`` (with ``pixels``: only the calls whose first
    argument, an image, has at least that many pixels)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if not pixels or args[0].shape[0] * args[0].shape[1] >= pixels:
            counts[name] += 1
        return work(*args, **kwargs)

    return run


def _count_work(monkeypatch: pytest.MonkeyPatch, counts: Counter[str]) -> None:
    # every colour conversion of a whole frame (or of its I420 planes), in any module
    whole = WIDTH * HEIGHT
    monkeypatch.setattr(cv2, "cvtColor", _counted(counts, "conversion", cv2.cvtColor, whole))
    monkeypatch.setattr(CropMesh, "run", _counted(counts, "tracked mesh", CropMesh.run))
    embed = _counted(counts, "watermark embed", watermark.watermark_delta)
    monkeypatch.setattr(watermark, "watermark_delta", embed)
    batch = _counted(counts, "classifier batch", screening.forward_open_nsfw)
    monkeypatch.setattr(screening, "forward_open_nsfw", batch)


def _over_budget(counts: Counter[str], frames: int, checked: int) -> list[str]:
    """What a frame's work exceeds, by name (empty: every count within its budget)."""
    keyframes = math.ceil(frames / TrackerOptions().detect_every)
    budget = {
        # faces: a full detection on keyframes only, one tracked mesh a frame in between
        "detection": keyframes,
        "tracked mesh": frames,
        # the watermark's pattern made once per refresh, added to the frames in between
        "watermark embed": math.ceil(frames / VideoWatermark.REFRESH_FRAMES),
        # moderation scores its frames in batches, not one call a frame
        "classifier batch": math.ceil(checked / screening.BATCH),
        # whole-frame colour conversions: the decoded picture to BGR and back for the
        # encoder, plus one for each keyframe's detection and each frame moderation checks
        "conversion": 2 * frames + keyframes + checked,
        # the swap pastes into the decoded frame it was handed, and the watermark is added
        # into the swapped one: no copy of a whole frame on the way to the encoder
        "whole-frame copy": 0,
    }
    return [name for name, most in budget.items() if counts[name] > most]


def test_a_frame_costs_one_tracked_mesh_and_two_whole_frame_conversions_and_no_copy(
    face_engine: EngineRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: Counter[str] = Counter()
    _count_work(monkeypatch, counts)
    found, frames, checked = _frame_work(face_engine, tmp_path)
    counts.update(found)
    assert frames == SECONDS * FPS
    gap = screening.gap_frames(ModerationPolicy().video_gap_seconds)
    assert checked >= math.ceil(frames / gap)  # the coverage moderation guarantees
    assert counts["tracked mesh"] > 0
    assert counts["watermark embed"] > 0
    assert _over_budget(counts, frames, checked) == []


def test_the_count_catches_per_frame_work(
    face_engine: EngineRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted: the watermark's pattern made afresh for every frame, the classifier
    called once per checked frame, and the frames not handed over to the swap (each one
    copied): the budget names all three."""
    counts: Counter[str] = Counter()
    _count_work(monkeypatch, counts)
    monkeypatch.setattr(VideoWatermark, "REFRESH_FRAMES", 1)
    monkeypatch.setattr(screening, "BATCH", 1)
    found, frames, checked = _frame_work(face_engine, tmp_path, owns_frames=False)
    counts.update(found)
    monkeypatch.undo()  # the budget as the code sets it
    assert _over_budget(counts, frames, checked) == [
        "watermark embed",
        "classifier batch",
        "whole-frame copy",
    ]
