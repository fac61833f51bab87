"""Tracking on clips made here: steady landmarks on a still face, stable ids, no-face frames."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from videoclips import NO_FACE, SOURCE, create_clip, decode_all

from facegate.engine.faces import FaceAnalyser
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.tracking import FaceTracker
from facegate.engine.video import VideoOptions, probe_video


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


def test_static_face_jitters_under_a_third_of_a_pixel(
    tmp_path: Path, analyser: FaceAnalyser
) -> None:
    frames = decode_all(
        create_clip(
            tmp_path / "still.mp4", seconds=1.0, motion=False, audio=False, width=1280, height=720
        )
    )
    tracker = FaceTracker(analyser)
    landmarks = []
    for index, frame in enumerate(frames):
        faces = tracker.update(frame, index)
        assert len(faces) == 1
        landmarks.append(faces[0].landmarks[:, :2])
    tracker.close()
    steps = np.linalg.norm(np.diff(np.array(landmarks), axis=0), axis=2).mean(axis=1)
    assert steps.max() <= 0.3
    assert tracker.detections < len(frames) // 5  # tracked, not re-detected every frame


def test_moving_face_keeps_one_track(tmp_path: Path, analyser: FaceAnalyser) -> None:
    frames = decode_all(create_clip(tmp_path / "move.mp4", seconds=1.5, audio=False))
    tracker = FaceTracker(analyser)
    ids = set()
    for index, frame in enumerate(frames):
        faces = tracker.update(frame, index)
        assert len(faces) == 1  # followed in every frame
        ids.add(faces[0].track_id)
        # Smoothed landmarks still sit on the face the detector finds.
        if index % 15 == 7:
            found = analyser.analyse(frame)[0]
            error = np.abs(found.landmarks[:, :2] - faces[0].landmarks[:, :2]).mean()
            assert error < 0.1 * found.inter_ocular
    tracker.close()
    assert ids == {0}


def test_run_video_swaps_faces_and_passes_faceless_frames(
    tmp_path: Path, face_engine: EngineRuntime
) -> None:
    pipeline = face_engine.pipeline(PipelineSpec.model_validate({"selector": {"mode": "many"}}))
    source = cv2.imread(str(SOURCE))
    src = create_clip(tmp_path / "face.mp4", seconds=0.5)
    dst = tmp_path / "out.mp4"
    result = pipeline.run_video([source], src, dst)
    assert result.frames == probe_video(src).frames
    before, after = decode_all(src), decode_all(dst)
    assert np.abs(before[5].astype(int) - after[5]).max() > 60  # the face changed

    empty = create_clip(tmp_path / "empty.mp4", NO_FACE, seconds=0.5, audio=False)
    dst2 = tmp_path / "out2.mkv"
    pipeline.run_video([source], empty, dst2, options=VideoOptions(crf=10))
    before, after = decode_all(empty), decode_all(dst2)
    assert np.abs(before[5].astype(int) - after[5]).mean() < 1.5  # only codec noise
