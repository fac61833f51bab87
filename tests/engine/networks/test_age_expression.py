"""age_modifier and expression_restorer: feeds, normalisation and paste-back with tiny
ONNX graphs of the FaceFusion names and shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.inference import InferencePool
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.age_modify import (
    fran_direction,
    normalize_crop_frame,
    prepare_crop_frame,
    scale_keypoints5,
    styleganex_direction,
)
from facegate.engine.networks.live_portrait import (
    LOWER_FACE,
    UPPER_FACE,
    Motion,
    create_rotation,
    motion_points,
    restore_expression,
)
from facegate.engine.processors.age_modifier import AgeModifier, AgeModifierOptions
from facegate.engine.processors.base import JobContext
from facegate.engine.processors.expression_restorer import ExpressionRestorer
from onnx_graphs import const, create_face, save_graph


def create_hub(tmp_path: Path) -> ModelHub:
    return ModelHub(ModelStore(tmp_path / "models", include_builtins=False), InferencePool())


def styleganex_graph(path: Path) -> Path:
    """output = target_with_background + 0.1 * direction (``target`` accepted, unused)."""
    nodes = [
        const("k", np.array(0.1)),
        helper.make_node("Mul", ["direction", "k"], ["d"]),
        helper.make_node("Add", ["target_with_background", "d"], ["output"]),
    ]
    return save_graph(
        path,
        nodes,
        [
            ("target", [1, 3, 256, 256]),
            ("target_with_background", [1, 3, 384, 384]),
            ("direction", []),
        ],
        [("output", [1, 3, 384, 384])],
    )


def test_direction_and_keypoint_scaling() -> None:
    assert float(styleganex_direction(100)) == -2.5
    assert float(styleganex_direction(-50)) == 1.25
    np.testing.assert_allclose(fran_direction(30, 20), [0.3, 0.5])
    np.testing.assert_allclose(fran_direction(90, 40), [0.9, 1.0])  # target age capped at 100
    points = np.array([[0, 0], [10, 0], [5, 5], [0, 10], [10, 10]], float)
    scaled = scale_keypoints5(points, 0.5)
    np.testing.assert_allclose(scaled[2], [5, 5])
    np.testing.assert_allclose(scaled[0], [2.5, 2.5])


def test_age_crop_normalisation_round_trip() -> None:
    crop = np.random.default_rng(1).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    prepared = prepare_crop_frame(crop)
    np.testing.assert_allclose(
        prepared[0].transpose(1, 2, 0), (crop[:, :, ::-1] / 255 - 0.5) / 0.5, atol=1e-6
    )
    assert np.abs(normalize_crop_frame(prepared[0]).astype(int) - crop).max() <= 1


def test_styleganex_feeds_direction_and_pastes_background_crop(tmp_path: Path) -> None:
    hub = create_hub(tmp_path)
    hub.store.add(
        "styleganex_age",
        "v1",
        {"model": styleganex_graph(tmp_path / "s.onnx")},
        kind="age_modifier",
        licence="t",
    )
    processor = AgeModifier(hub)
    processor.check_models()
    # A smooth frame: resampling to the crop and back is then near-lossless, so any offset
    # of the paste-back shows, while noise would only measure interpolation.
    yy, xx = np.mgrid[0:500, 0:500]
    channels = [120 + 80 * np.sin(xx / 37 + k) * np.cos(yy / 29 - k) for k in range(3)]
    frame = np.stack(channels, axis=-1).astype(np.uint8)
    face = create_face("ffhq_512", 256, (120, 110))
    ctx = JobContext(options={"age_modifier": AgeModifierOptions(direction=0, mask_blur=0.0)})
    ctx.target_faces = [face]
    processor.prepare(ctx)
    assert ctx.models_used == {"styleganex_age": "v1"}
    out = processor.process_frame(frame.copy(), ctx)
    # direction 0 -> the background crop comes back unchanged: pasted where it was taken.
    centre = (slice(200, 300), slice(200, 300))
    assert np.abs(out[centre].astype(int) - frame[centre]).max() <= 3
    model = ctx.state["age_modifier"]["model"]
    twb = np.zeros((1, 3, 384, 384), np.float32)
    got = model.run(
        {
            "target": np.zeros((1, 3, 256, 256), np.float32),
            "target_with_background": twb,
            "direction": styleganex_direction(100),
        }
    )[0]
    np.testing.assert_allclose(got, -0.25, atol=1e-6)


def test_age_modifier_names_the_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match=r"styleganex_age\.onnx or fran\.onnx"):
        AgeModifier(create_hub(tmp_path)).check_models()
    with pytest.raises(ModelUnavailable, match=r"live_portrait_generator\.onnx"):
        ExpressionRestorer(create_hub(tmp_path)).check_models()


def test_restore_expression_areas_and_factor() -> None:
    source = Motion(
        0,
        0,
        0,
        np.ones(1, np.float32),
        np.zeros((1, 3), np.float32),
        np.full((1, 21, 3), 2.0, np.float32),
        np.zeros((1, 21, 3), np.float32),
    )
    target = Motion(
        0,
        0,
        0,
        source.scale,
        source.translation,
        np.zeros((1, 21, 3), np.float32),
        source.motion_points,
    )
    both = restore_expression(source, target, 1.2, ("upper-face", "lower-face"))
    chosen = sorted(UPPER_FACE + LOWER_FACE)
    np.testing.assert_allclose(both[0, chosen], 2.4)
    np.testing.assert_allclose(both[0, [0, 4, 5, 8, 9]], 0.0)  # never from the source
    upper = restore_expression(source, target, 0.5, ("upper-face",))
    np.testing.assert_allclose(upper[0, list(UPPER_FACE)], 1.0)
    np.testing.assert_allclose(upper[0, list(LOWER_FACE)], 0.0)


def test_rotation_and_motion_points() -> None:
    np.testing.assert_allclose(create_rotation(0, 90, 0) @ [1, 0, 0], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(create_rotation(0, 0, 90) @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    points = np.zeros((1, 21, 3), np.float32)
    points[0, 0] = [1, 0, 0]
    motion = Motion(
        0,
        0,
        90,
        np.array([[2.0]], np.float32),
        np.array([[1, 2, 0]], np.float32),
        np.zeros((1, 21, 3), np.float32),
        points,
    )
    moved = motion_points(motion, np.full((1, 21, 3), 0.5, np.float32))
    np.testing.assert_allclose(moved[0, 0], [2 * 0.5 + 1, 2 * 1.5 + 2, 2 * 0.5], atol=1e-5)
