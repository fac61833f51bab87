"""The source's eyes in the mesh's eye holes.

The mesh has no triangles over the eyeballs, so the warp leaves them empty and the target's
own eyes used to show there always. Eyes carry identity (iris, the eye's shape inside the
lids): where the source's eye is open about as wide as the target's (the expression agrees,
``masks.keep_mask``), the hole is filled from the source's eye instead, mapped by the
similarity transform that best takes its lid contour onto the target's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.swap.masks import EYE_DIFFERENCE, openness

EYES = (mesh.RIGHT_EYE, mesh.LEFT_EYE)


def agreeing_eyes(source_points: FloatArray, target_points: FloatArray) -> list[bool]:
    """Per eye (subject's right, left): True where the openings agree (fill it)."""
    _, s_right, s_left = openness(source_points)
    _, t_right, t_left = openness(target_points)
    return [abs(s_right - t_right) <= EYE_DIFFERENCE, abs(s_left - t_left) <= EYE_DIFFERENCE]


def fill_eyes(
    images: Sequence[npt.NDArray[Any]],
    coverage: npt.NDArray[np.bool_],
    sources: Sequence[npt.NDArray[Any]],
    source_points: FloatArray,
    target_points: FloatArray,
    which: list[bool],
) -> None:
    """Paint the uncovered pixels inside each chosen target eye contour of each of
    ``images`` from its ``sources`` (the same face's layers, any channel count) and mark
    them covered; ``images`` and ``coverage`` are changed."""
    h, w = coverage.shape
    for contour, chosen in zip(EYES, which, strict=True):
        if not chosen:
            continue
        src = source_points[contour, :2].astype(np.float32)
        dst = target_points[contour, :2].astype(np.float32)
        matrix, _ = cv2.estimateAffinePartial2D(src, dst)
        if matrix is None:
            continue
        x0, y0 = (max(int(v), 0) for v in np.floor(dst.min(axis=0)) - 1)
        x1, y1 = (min(int(v), m) for v, m in zip(np.ceil(dst.max(axis=0)) + 2, (w, h), strict=True))
        if x1 <= x0 or y1 <= y0:
            continue
        shifted = np.asarray(matrix, np.float64) - np.array([[0, 0, x0], [0, 0, y0]], np.float64)
        inside = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillPoly(inside, [np.round(dst - (x0, y0)).astype(np.int32)], (1,))
        fill = (inside > 0) & ~coverage[y0:y1, x0:x1]
        for image, source in zip(images, sources, strict=True):
            patch = cv2.warpAffine(source, shifted, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR)
            image[y0:y1, x0:x1][fill] = patch.reshape(inside.shape + source.shape[2:])[fill]
        coverage[y0:y1, x0:x1] |= fill
