"""A stream's frame work alone (``streams.frames.LiveFrames``): the camera frame scaled to
the policy's resolution, the face swapped, the disclosure label when the policy has one,
and the watermark with the stream's payload on every frame."""

from __future__ import annotations

import numpy as np
from tests.streams.streamkit import CAMERA_PHOTO, SOURCE_PHOTO, photo

from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.provenance.marker import JobMark
from facegate.provenance.reading import read_image_watermark
from facegate.streams.frames import LiveFrames, fit_frame
from facegate.streams.loopback import camera_frame
from facegate.tenancy.tables import Policy

KEY = b"k" * 32


def live_frames(engine: EngineRuntime, policy: Policy) -> LiveFrames:
    pipeline = engine.pipeline(PipelineSpec())
    ctx = pipeline.prepare([photo(SOURCE_PHOTO)])
    return LiveFrames(pipeline, ctx, policy, JobMark(1, 4242, "ref", KEY))


def test_frames_are_scaled_labelled_and_marked(face_engine: EngineRuntime) -> None:
    label = {"text": "AI-generated", "corner": "bottom-right"}
    frames = live_frames(face_engine, Policy(max_output_resolution="720p", disclosure_label=label))
    camera = camera_frame(photo(CAMERA_PHOTO), 1920, 1080)
    try:
        outputs = [frames.process(camera) for _ in range(3)]
    finally:
        frames.close()
    scaled = fit_frame(camera, "720p")
    for out in outputs:
        assert out.shape == (720, 1280, 3)
        # the label: the bottom-right corner darkened, white text on it
        corner, before = out[-40:, -200:].astype(int), scaled[-40:, -200:].astype(int)
        assert (corner.max(axis=2) > 200).sum() > 50
        assert np.abs(corner - before).mean() > 20
        found = read_image_watermark(out, KEY).payload
        assert found is not None
        assert found.serial == 4242
    # the face changed, the rest of the picture did not (beyond the watermark's change)
    difference = np.abs(outputs[-1].astype(int) - scaled.astype(int)).max(axis=2)
    assert (difference > 40).mean() > 0.005
    assert np.median(difference) < 8


def test_without_a_label_the_corner_is_left_alone(face_engine: EngineRuntime) -> None:
    frames = live_frames(face_engine, Policy(max_output_resolution="1080p", disclosure_label=None))
    camera = camera_frame(photo(CAMERA_PHOTO))
    try:
        out = frames.process(camera)
    finally:
        frames.close()
    assert out.shape == camera.shape
    assert np.abs(out[-40:, -200:].astype(int) - camera[-40:, -200:].astype(int)).mean() < 5


def test_fit_frame_scales_down_only() -> None:
    assert fit_frame(np.zeros((2160, 3840, 3), np.uint8), "1080p").shape == (1080, 1920, 3)
    assert fit_frame(np.zeros((1920, 1080, 3), np.uint8), "720p").shape == (1280, 720, 3)
    small = np.zeros((480, 640, 3), np.uint8)
    assert fit_frame(small, "720p") is small
