from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.detectors import (
    create_anchors,
    decode_retinaface,
    decode_yolo_face,
    decode_yunet,
    detect_faces,
    prepare_detect_frame,
)
from onnx_graphs import const, save_graph

SIZE = (64, 64)


def create_retinaface_outputs() -> list[np.ndarray]:
    """Raw outputs with one face at stride 16, cell (row 1, col 2), second anchor."""
    outputs = []
    for kind in ("score", "bbox", "kps"):
        for stride in (8, 16, 32):
            rows = (64 // stride) ** 2 * 2
            width = {"score": 1, "bbox": 4, "kps": 10}[kind]
            outputs.append(np.zeros((rows, width), np.float32))
    index = (1 * 4 + 2) * 2 + 1  # anchor (x 32, y 16)
    outputs[1][index] = 0.9
    outputs[4][index] = [1, 1, 2, 2]
    outputs[7][index] = [0, 0, 1, 0, 0.5, 0.5, 0, 1, 1, 1]
    return outputs


def test_anchors_are_grid_times_stride_repeated() -> None:
    anchors = create_anchors(16, 2, 2, 3)
    assert anchors.tolist()[:6] == [[0, 0], [0, 0], [16, 0], [16, 0], [32, 0], [32, 0]]
    assert anchors.tolist()[6] == [0, 16]


def test_retinaface_decoding() -> None:
    found = decode_retinaface(create_retinaface_outputs(), SIZE, 0.5)
    assert found.boxes.tolist() == [[16, 0, 64, 48]]
    assert found.scores.tolist() == [np.float32(0.9)]
    expected = [[32, 16], [48, 16], [40, 24], [32, 32], [48, 32]]
    assert found.keypoints5[0].tolist() == expected


def test_yolo_face_decoding() -> None:
    raw = np.zeros((1, 20, 3), np.float32)  # 3 candidates, channels first as exported
    raw[0, :5, 1] = [30, 40, 20, 10, 0.8]
    raw[0, 5:, 1] = np.array([[1, 2, 0.9]] * 5, np.float32).ravel()
    raw[0, 4, 2] = 0.5  # not strictly above the threshold
    found = decode_yolo_face(raw, 0.5)
    assert found.boxes.tolist() == [[20, 35, 40, 45]]
    assert found.keypoints5[0].tolist() == [[1, 2]] * 5


def test_yunet_decoding() -> None:
    outputs = []
    for channels in (1, 1, 4, 10):
        for stride in (8, 16, 32):
            outputs.append(np.zeros((1, (64 // stride) ** 2, channels), np.float32))
    cell = 1 * 2 + 1  # stride 32: row 1, col 1 -> anchor (32, 32)
    outputs[2][0, cell] = 0.9  # cls
    outputs[5][0, cell] = 0.8  # obj
    outputs[8][0, cell] = [0.5, 0.25, np.log(2), 0]
    outputs[11][0, cell] = [0, 0, 1, 0, 0.5, 0.5, 0, 1, 1, 1]
    found = decode_yunet(outputs, SIZE, 0.5)
    assert np.allclose(found.scores, [0.72])
    assert np.allclose(found.boxes, [[48 - 32, 40 - 16, 48 + 32, 40 + 16]])
    assert np.allclose(found.keypoints5[0], [[32, 32], [64, 32], [48, 48], [32, 64], [64, 64]])


def test_prepare_keeps_bgr_top_left_and_normalises() -> None:
    frame = np.zeros((10, 20, 3), np.uint8)
    frame[..., 0] = 255  # blue
    tensor = prepare_detect_frame(frame, SIZE, "retinaface")
    assert tensor.shape == (1, 3, 64, 64)
    assert tensor[0, 0, 0, 0] == np.float32((255 - 127.5) / 128)
    assert tensor[0, 2, 0, 0] == np.float32(-127.5 / 128)
    assert tensor[0, 0, 10, 0] == np.float32(-127.5 / 128)  # below the pasted frame: zeros
    assert prepare_detect_frame(frame, SIZE, "yunet")[0, 0, 0, 0] == 255


def test_detect_faces_scales_back_to_the_frame(tmp_path: Path) -> None:
    outputs = create_retinaface_outputs()
    names = [f"out{i}" for i in range(9)]
    nodes = [const(n, o) for n, o in zip(names, outputs, strict=True)]
    nodes.append(helper.make_node("Identity", ["input"], ["echo"]))
    graph = save_graph(
        tmp_path / "retinaface_10g.onnx",
        nodes,
        [("input", [1, 3, 64, 64])],
        [(n, list(o.shape)) for n, o in zip(names, outputs, strict=True)]
        + [("echo", [1, 3, 64, 64])],
    )
    store = ModelStore(tmp_path / "models", include_builtins=False)
    store.add("retinaface_10g", "v1", {"model": graph}, kind="face_detector", licence="t")
    model = ModelHub(store).onnx("retinaface_10g")
    frame = np.zeros((128, 96, 3), np.uint8)  # restricted to 48×64 (w×h): ratio 2 per axis
    found = detect_faces(model, "retinaface", frame, SIZE)
    ratio = np.array([96 / 48, 128 / 64])
    assert np.allclose(found.boxes, [[16 * ratio[0], 0, 64 * ratio[0], 48 * ratio[1]]])
    assert np.allclose(found.keypoints5[0, 0], [32 * ratio[0], 16 * ratio[1]])
