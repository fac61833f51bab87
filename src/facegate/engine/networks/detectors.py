"""FaceFusion-format ONNX face detectors (yoloface_8n, retinaface_10g, scrfd_2.5g, yunet),
decoded as ``face_detector.py`` does (facefusion-contracts.md, "Face detectors"), for the
analyser to choose instead of the built-in mediapipe detector.

``detect_faces`` = restrict (downsize only) → paste at the top-left of a zero canvas →
normalise (no BGR→RGB swap) → ``forward_<model>`` → ``decode_<type>`` (plain numpy) →
scale back → NMS (IoU 0.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.types import Frame

DetectorType = Literal["retinaface", "scrfd", "yolo_face", "yunet"]
DETECTORS: Mapping[str, DetectorType] = MappingProxyType(
    {
        "retinaface_10g": "retinaface",
        "scrfd_2.5g": "scrfd",
        "yoloface_8n": "yolo_face",
        "yunet_2023mar": "yunet",
        "yunet": "yunet",
    }
)
STRIDES = (8, 16, 32)
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Detections:
    """Boxes (N×4 x1,y1,x2,y2), scores (N), key points (N×5×2), in detector-canvas pixels
    until :func:`detect_faces` scales them back to the frame."""

    boxes: Floats
    scores: Floats
    keypoints5: Floats

    @staticmethod
    def empty() -> Detections:
        return Detections(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 5, 2)))


def create_anchors(stride: int, per_cell: int, height: int, width: int) -> Floats:
    """Grid points × stride, (x, y), row-major, each repeated ``per_cell`` times (no +0.5)."""
    ys, xs = np.mgrid[:height, :width]
    anchors = np.stack((xs, ys), axis=-1).reshape(-1, 2) * stride
    return np.repeat(anchors, per_cell, axis=0).astype(np.float64)


def decode_retinaface(
    outputs: list[npt.NDArray[np.float32]], size: tuple[int, int], threshold: float
) -> Detections:
    """9 outputs (scores, bbox distances, key point offsets for strides 8/16/32), 2 anchors."""
    width, height = size
    boxes, scores, points = [], [], []
    for index, stride in enumerate(STRIDES):
        score = outputs[index].reshape(-1).astype(np.float64)
        keep = np.nonzero(score >= threshold)[0]
        if keep.size == 0:
            continue
        anchors = create_anchors(stride, 2, height // stride, width // stride)
        dist = outputs[index + 3].reshape(-1, 4) * stride
        kps = outputs[index + 6].reshape(-1, 10) * stride
        box = np.concatenate([anchors - dist[:, :2], anchors + dist[:, 2:]], axis=1)
        boxes.append(box[keep])
        scores.append(score[keep])
        points.append((np.tile(anchors, 5) + kps).reshape(-1, 5, 2)[keep])
    return _concat(boxes, scores, points)


def decode_yolo_face(output: npt.NDArray[np.float32], threshold: float) -> Detections:
    """One output, squeezed and transposed to N×20: cx, cy, w, h, score, 5×(x, y, conf)."""
    rows = np.squeeze(output).T.astype(np.float64)
    keep = np.nonzero(rows[:, 4] > threshold)[0]
    rows = rows[keep]
    centre, half = rows[:, :2], rows[:, 2:4] / 2
    boxes = np.concatenate([centre - half, centre + half], axis=1)
    points = rows[:, 5:].reshape(-1, 5, 3)[:, :, :2]
    return Detections(boxes, rows[:, 4], points)


def decode_yunet(
    outputs: list[npt.NDArray[np.float32]], size: tuple[int, int], threshold: float
) -> Detections:
    """12 outputs (cls, obj, bbox, kps per stride); score = cls·obj; 1 anchor per cell."""
    width, height = size
    boxes, scores, points = [], [], []
    for index, stride in enumerate(STRIDES):
        score = (outputs[index] * outputs[index + 3]).reshape(-1).astype(np.float64)
        keep = np.nonzero(score >= threshold)[0]
        if keep.size == 0:
            continue
        anchors = create_anchors(stride, 1, height // stride, width // stride)
        pred = outputs[index + 6].reshape(-1, 4).astype(np.float64)
        centre = pred[:, :2] * stride + anchors
        extent = np.exp(pred[:, 2:4]) * stride
        box = np.concatenate([centre - extent / 2, centre + extent / 2], axis=1)
        kps = outputs[index + 9].reshape(-1, 5, 2) * stride + anchors[:, None, :]
        boxes.append(box[keep])
        scores.append(score[keep])
        points.append(kps[keep])
    return _concat(boxes, scores, points)


def _concat(boxes: list[Floats], scores: list[Floats], points: list[Floats]) -> Detections:
    if not boxes:
        return Detections.empty()
    return Detections(np.concatenate(boxes), np.concatenate(scores), np.concatenate(points))


def restrict_frame(frame: Frame, size: tuple[int, int]) -> Frame:
    """Downsize only, keeping the aspect ratio, to fit ``size`` (w, h)."""
    height, width = frame.shape[:2]
    if height > size[1] or width > size[0]:
        scale = min(size[1] / height, size[0] / width)
        return np.asarray(cv2.resize(frame, (int(width * scale), int(height * scale))))
    return frame


def prepare_detect_frame(
    frame: Frame, size: tuple[int, int], kind: DetectorType
) -> npt.NDArray[np.float32]:
    """Top-left on a zero canvas, NCHW, normalised for ``kind`` (channels stay BGR)."""
    canvas = np.zeros((size[1], size[0], 3), dtype=np.float64)
    canvas[: frame.shape[0], : frame.shape[1]] = frame
    if kind in {"retinaface", "scrfd"}:
        canvas = (canvas - 127.5) / 128.0
    elif kind == "yolo_face":
        canvas = canvas / 255.0
    return np.ascontiguousarray(canvas.transpose(2, 0, 1)[None], dtype=np.float32)


def forward_detector(
    model: OnnxModel, tensor: npt.NDArray[np.float32]
) -> list[npt.NDArray[np.float32]]:
    return model.run({"input": tensor})


def nms(detections: Detections, threshold: float, iou: float = 0.4) -> Detections:
    """cv2.dnn.NMSBoxes on (x, y, w, h) boxes, as FaceFusion's ``create_faces``."""
    if len(detections.scores) == 0:
        return detections
    xywh = np.concatenate(
        [detections.boxes[:, :2], detections.boxes[:, 2:] - detections.boxes[:, :2]], axis=1
    )
    keep = np.asarray(
        cv2.dnn.NMSBoxes(xywh.tolist(), detections.scores.tolist(), threshold, iou), dtype=int
    ).reshape(-1)
    return Detections(detections.boxes[keep], detections.scores[keep], detections.keypoints5[keep])


def detect_faces(
    model: OnnxModel,
    kind: DetectorType,
    frame: Frame,
    size: tuple[int, int] = (640, 640),
    threshold: float = 0.5,
    iou: float = 0.4,
) -> Detections:
    """Faces of ``frame`` in frame pixels, after NMS."""
    small = restrict_frame(frame, size)
    ratio = np.array([frame.shape[1] / small.shape[1], frame.shape[0] / small.shape[0]])
    outputs = forward_detector(model, prepare_detect_frame(small, size, kind))
    if kind == "yolo_face":
        found = decode_yolo_face(outputs[0], threshold)
    elif kind == "yunet":
        found = decode_yunet(outputs, size, threshold)
    else:
        found = decode_retinaface(outputs, size, threshold)
    scaled = Detections(found.boxes * np.tile(ratio, 2), found.scores, found.keypoints5 * ratio)
    return nms(scaled, threshold, iou)
