from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.landmarker import convert_to_keypoints5, detect_landmarks_2dfan4
from onnx_graphs import const, save_graph

# Heatmap-space (64²) points the stand-in model always answers, and its heatmap peak.
POINTS = np.stack([np.linspace(16, 48, 68), np.linspace(20, 44, 68)], axis=1).astype(np.float32)


def create_model(tmp_path: Path) -> ModelHub:
    landmarks = np.concatenate([POINTS, np.ones((68, 1), np.float32)], axis=1)[None]
    heatmaps = np.zeros((1, 68, 64, 64), np.float32)
    heatmaps[:, :, 5, 5] = 0.45
    nodes = [
        const("landmarks", landmarks),
        const("heatmaps", heatmaps),
        helper.make_node("Identity", ["input"], ["echo"]),
    ]
    graph = save_graph(
        tmp_path / "2dfan4.onnx",
        nodes,
        [("input", [1, 3, 256, 256])],
        [("landmarks", [1, 68, 3]), ("heatmaps", [1, 68, 64, 64]), ("echo", [1, 3, 256, 256])],
    )
    store = ModelStore(tmp_path / "models", include_builtins=False)
    store.add("2dfan4", "v1", {"model": graph}, kind="face_landmarker", licence="t")
    return ModelHub(store)


def test_points_map_back_through_scale_and_translation(tmp_path: Path) -> None:
    model = create_model(tmp_path).onnx("2dfan4")
    frame = np.zeros((300, 400, 3), np.uint8)
    box = np.array([100, 50, 230, 180])  # 130 px: scale 195/130 = 1.5
    points, score = detect_landmarks_2dfan4(model, frame, box)
    scale = 1.5
    translation = (256 - (box[2:] + box[:2]) * scale) / 2
    expected = (POINTS / 64 * 256 - translation) / scale
    np.testing.assert_allclose(points, expected, atol=1e-4)
    assert abs(score - 0.5) < 1e-6


def test_rotation_is_undone(tmp_path: Path) -> None:
    model = create_model(tmp_path).onnx("2dfan4")
    frame = np.zeros((300, 400, 3), np.uint8)
    box = np.array([100, 50, 230, 180])
    upright, _ = detect_landmarks_2dfan4(model, frame, box, 0.0)
    turned, _ = detect_landmarks_2dfan4(model, frame, box, 90.0)
    centre = np.array([165.0, 115.0])  # the box centre is the crop centre
    # the same crop points, read in a crop rotated by 90°, map to points rotated about it
    np.testing.assert_allclose(
        np.linalg.norm(turned - centre, axis=1), np.linalg.norm(upright - centre, axis=1), atol=1e-4
    )
    assert not np.allclose(turned, upright)


def test_68_to_5() -> None:
    pts = np.arange(136, dtype=np.float64).reshape(68, 2)
    five = convert_to_keypoints5(pts)
    np.testing.assert_allclose(five[0], pts[36:42].mean(axis=0))
    np.testing.assert_allclose(five[2:], pts[[30, 48, 54]])
