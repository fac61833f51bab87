"""The 2dfan4 68-point landmarker (FaceFusion's ``face_landmarker.detect_with_2dfan4``) and the
68 → 5 key point conversion, for the analyser to refine key points with a learned model."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.networks.face_helper import Matrix, transform_points
from facegate.engine.types import Frame

MODEL_SIZE = (256, 256)
Floats = npt.NDArray[np.float64]


def create_rotated_matrix_and_size(
    angle: float, size: tuple[int, int]
) -> tuple[Matrix, tuple[int, int]]:
    matrix = np.asarray(cv2.getRotationMatrix2D((size[0] / 2, size[1] / 2), angle, 1), np.float64)
    rotated = np.dot(np.abs(matrix[:, :2]), np.array(size, np.float64))
    matrix[:, -1] += (rotated - size) * 0.5
    return np.asarray(matrix, np.float64), (int(rotated[0]), int(rotated[1]))


def conditional_optimize_contrast(crop: Frame) -> Frame:
    """CLAHE (clip limit 2) on L when the crop is very dark (mean L < 30)."""
    lab = cv2.cvtColor(crop, cv2.COLOR_RGB2Lab)
    if np.mean(lab[:, :, 0]) < 30:
        lab[:, :, 0] = cv2.createCLAHE(clipLimit=2).apply(lab[:, :, 0])
    return np.asarray(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB), dtype=np.uint8)


def prepare_2dfan4_crop(
    frame: Frame, box: npt.ArrayLike, angle: float
) -> tuple[npt.NDArray[np.float32], Matrix, Matrix]:
    """The 256² crop (box scaled to 195 px, centred, rotated by ``angle``), /255 NCHW, and the
    two affines (translation, rotation) to map points back."""
    bbox = np.asarray(box, dtype=np.float64)
    scale = 195 / np.subtract(bbox[2:], bbox[:2]).max().clip(1, None)
    translation = (np.array(MODEL_SIZE) - np.add(bbox[2:], bbox[:2]) * scale) * 0.5
    affine = np.array([[scale, 0, translation[0]], [0, scale, translation[1]]], dtype=np.float64)
    crop = cv2.warpAffine(frame, affine, MODEL_SIZE)
    rotation, rotated_size = create_rotated_matrix_and_size(angle, MODEL_SIZE)
    rotated = np.asarray(cv2.warpAffine(crop, rotation, rotated_size), dtype=np.uint8)
    crop = conditional_optimize_contrast(rotated)
    tensor = (crop.transpose(2, 0, 1).astype(np.float32) / 255.0)[None]
    return np.ascontiguousarray(tensor), affine, rotation


def forward_2dfan4(
    model: OnnxModel, tensor: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    landmarks, heatmaps = model.run({"input": tensor})[:2]
    return landmarks, heatmaps


def detect_landmarks_2dfan4(
    model: OnnxModel, frame: Frame, box: npt.ArrayLike, angle: float = 0.0
) -> tuple[Floats, float]:
    """68 points in frame pixels and a score in 0..1 (mean heatmap peak, [0, 0.9] → [0, 1])."""
    tensor, affine, rotation = prepare_2dfan4_crop(frame, box, angle)
    landmarks, heatmaps = forward_2dfan4(model, tensor)
    points = landmarks[0, :, :2].astype(np.float64) / 64 * 256
    points = transform_points(points, np.asarray(cv2.invertAffineTransform(rotation)))
    points = transform_points(points, np.asarray(cv2.invertAffineTransform(affine)))
    score = float(np.interp(np.mean(np.amax(heatmaps, axis=(2, 3))), [0, 0.9], [0, 1]))
    return points, score


def convert_to_keypoints5(landmarks68: npt.ArrayLike) -> Floats:
    """Eye centres (mean of 36:42 and 42:48), nose tip (30), mouth corners (48, 54)."""
    pts = np.asarray(landmarks68, dtype=np.float64)
    return np.array([pts[36:42].mean(axis=0), pts[42:48].mean(axis=0), pts[30], pts[48], pts[54]])
