"""Alignment and paste-back exactly as FaceFusion's ``face_helper`` does them, so FaceFusion-format
models receive the crops they were trained on (facefusion-contracts.md, "Warp templates")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.types import Frame, frozen

WarpTemplate = Literal[
    "arcface_112_v1",
    "arcface_112_v2",
    "arcface_128",
    "dfl_whole_face",
    "ffhq_512",
    "mtcnn_512",
    "styleganex_384",
]
Matrix = npt.NDArray[np.float64]  # 2x3 affine
FloatImage = npt.NDArray[np.float32]

# Normalised to a 1x1 crop; order: image-left eye, image-right eye, nose, left/right mouth.
WARP_TEMPLATES: Mapping[str, npt.NDArray[np.float64]] = MappingProxyType(
    {
        name: frozen(np.array(points, dtype=np.float64))
        for name, points in {
            "arcface_112_v1": [
                [0.35473214, 0.45658929],
                [0.64526786, 0.45658929],
                [0.50000000, 0.61154464],
                [0.37913393, 0.77687500],
                [0.62086607, 0.77687500],
            ],
            "arcface_112_v2": [
                [0.34191607, 0.46157411],
                [0.65653393, 0.45983393],
                [0.50022500, 0.64050536],
                [0.37097589, 0.82469196],
                [0.63151696, 0.82325089],
            ],
            "arcface_128": [
                [0.36167656, 0.40387734],
                [0.63696719, 0.40235469],
                [0.50019687, 0.56044219],
                [0.38710391, 0.72160547],
                [0.61507734, 0.72034453],
            ],
            "dfl_whole_face": [
                [0.35342266, 0.39285716],
                [0.62797622, 0.39285716],
                [0.48660713, 0.54017860],
                [0.38839287, 0.68750011],
                [0.59821427, 0.68750011],
            ],
            "ffhq_512": [
                [0.37691676, 0.46864664],
                [0.62285697, 0.46912813],
                [0.50123859, 0.61331904],
                [0.39308822, 0.72541100],
                [0.61150205, 0.72490465],
            ],
            "mtcnn_512": [
                [0.36562865, 0.46733799],
                [0.63305391, 0.46585885],
                [0.50019127, 0.61942959],
                [0.39032951, 0.77598822],
                [0.61178945, 0.77476328],
            ],
            "styleganex_384": [
                [0.42353745, 0.52289879],
                [0.57725008, 0.52319972],
                [0.50123859, 0.61331904],
                [0.43364461, 0.68337652],
                [0.57015325, 0.68306005],
            ],
        }.items()
    }
)


def estimate_matrix(keypoints5: npt.ArrayLike, template: str, crop_size: tuple[int, int]) -> Matrix:
    """The similarity transform frame -> crop (RANSAC, reprojection threshold 100)."""
    target = WARP_TEMPLATES[template] * np.array(crop_size, dtype=np.float64)
    points = np.asarray(keypoints5, dtype=np.float64).reshape(5, 2)
    matrix, _ = cv2.estimateAffinePartial2D(
        points, target, method=cv2.RANSAC, ransacReprojThreshold=100
    )
    return np.asarray(matrix, dtype=np.float64)


def warp_face_by_keypoints5(
    frame: Frame, keypoints5: npt.ArrayLike, template: str, crop_size: tuple[int, int]
) -> tuple[Frame, Matrix]:
    """The aligned crop (``crop_size`` = (w, h)) and the affine that produced it."""
    matrix = estimate_matrix(keypoints5, template, crop_size)
    crop = cv2.warpAffine(
        frame, matrix, crop_size, borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_AREA
    )
    return np.asarray(crop, dtype=np.uint8), matrix


def transform_points(points: npt.ArrayLike, matrix: Matrix) -> npt.NDArray[np.float64]:
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 1, 2)
    return np.asarray(cv2.transform(pts, matrix), dtype=np.float64).reshape(-1, 2)


def paste_area(
    frame_shape: tuple[int, ...], crop_shape: tuple[int, ...], matrix: Matrix
) -> tuple[tuple[int, int, int, int], Matrix]:
    """The frame box the crop covers, and the crop -> box affine (only that box is warped)."""
    height, width = frame_shape[:2]
    crop_h, crop_w = crop_shape[:2]
    inverse = np.asarray(cv2.invertAffineTransform(matrix), dtype=np.float64)
    corners = np.array([[0, 0], [crop_w, 0], [crop_w, crop_h], [0, crop_h]], dtype=np.float64)
    region = transform_points(corners, inverse)
    x1, y1 = np.clip(np.floor(region.min(axis=0)).astype(int), 0, [width, height])
    x2, y2 = np.clip(np.ceil(region.max(axis=0)).astype(int), 0, [width, height])
    paste_matrix = inverse.copy()
    paste_matrix[0, 2] -= x1
    paste_matrix[1, 2] -= y1
    return (int(x1), int(y1), int(x2), int(y2)), paste_matrix


def paste_back(
    frame: Frame, crop: npt.NDArray[Any], crop_mask: FloatImage, matrix: Matrix
) -> Frame:
    """Warp ``crop`` back into ``frame`` through the inverse of ``matrix``, blended by the mask."""
    (x1, y1, x2, y2), paste_matrix = paste_area(frame.shape, crop.shape, matrix)
    result = frame.copy()
    if x2 <= x1 or y2 <= y1:
        return result
    size = (x2 - x1, y2 - y1)
    mask = cv2.warpAffine(crop_mask, paste_matrix, size).clip(0, 1)[:, :, None]
    inverse_crop = cv2.warpAffine(crop, paste_matrix, size, borderMode=cv2.BORDER_REPLICATE)
    region = result[y1:y2, x1:x2]
    blended = region * (1 - mask) + inverse_crop * mask
    result[y1:y2, x1:x2] = blended.astype(result.dtype)
    return result


def create_box_mask(
    crop_size: tuple[int, int], blur: float = 0.3, padding: tuple[int, int, int, int] = (0, 0, 0, 0)
) -> FloatImage:
    """FaceFusion's static box mask: ones, zeroed border (padding % t/r/b/l), blurred."""
    width, height = crop_size
    blur_amount = int(width * 0.5 * blur)
    blur_area = max(blur_amount // 2, 1)
    mask = np.ones((height, width), dtype=np.float32)
    mask[: max(blur_area, int(height * padding[0] / 100)), :] = 0
    mask[-max(blur_area, int(height * padding[2] / 100)) :, :] = 0
    mask[:, : max(blur_area, int(width * padding[3] / 100))] = 0
    mask[:, -max(blur_area, int(width * padding[1] / 100)) :] = 0
    if blur_amount > 0:
        mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), blur_amount * 0.25), dtype=np.float32)
    return mask


def implode_pixel_boost(crop: Frame, total: int, model_size: int) -> npt.NDArray[np.uint8]:
    """Space-to-depth: a (total*S)² crop -> total² sub-images of S×S (pixel i,j of each)."""
    tiles = crop.reshape(model_size, total, model_size, total, 3)
    return tiles.transpose(1, 3, 0, 2, 4).reshape(total**2, model_size, model_size, 3)


def explode_pixel_boost(
    tiles: Sequence[npt.NDArray[Any]] | npt.NDArray[Any], total: int, model_size: int
) -> npt.NDArray[Any]:
    """The inverse of :func:`implode_pixel_boost` (keeps the tiles' dtype)."""
    grid = np.asarray(tiles).reshape(total, total, model_size, model_size, 3)
    size = total * model_size
    return np.ascontiguousarray(grid.transpose(2, 0, 3, 1, 4).reshape(size, size, 3))
