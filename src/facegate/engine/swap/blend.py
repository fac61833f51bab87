"""Compositing the corrected face into the target: feathered alpha or Poisson clone."""

from __future__ import annotations

import cv2
import numpy as np

from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Frame


def feather_blend(target: Frame, face: Frame, mask: FloatArray, strength: float) -> Frame:
    """``target`` + (``face`` − ``target``) × mask × strength, rounded (one OpenCV pass)."""
    alpha = mask if strength == 1.0 else mask * np.float32(strength)
    alpha = np.ascontiguousarray(alpha, dtype=np.float32)
    return np.asarray(cv2.blendLinear(face, target, alpha, 1.0 - alpha), dtype=np.uint8)


def poisson_blend(target: Frame, face: Frame, mask: FloatArray, strength: float) -> Frame:
    """Seamless clone of ``face`` into ``target`` inside the mask, then feathered.

    The clone fixes the gradient at the mask border; feathering its result with the soft
    mask afterwards stops the clone's brightness pull (its halo) from reaching outside the
    face. Falls back to the feather when the mask is empty or touches the region border
    (seamlessClone needs a one-pixel margin).
    """
    hard = (mask > 0.5).astype(np.uint8) * 255
    ys, xs = np.nonzero(hard)
    h, w = hard.shape
    if xs.size < 16 or xs.min() < 1 or ys.min() < 1 or xs.max() > w - 2 or ys.max() > h - 2:
        return feather_blend(target, face, mask, strength)
    # OpenCV places the clone at center − (max − min) / 2 (integer division); choosing the
    # centre like this puts it back exactly where it came from.
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    center = (x0 + (x1 - x0) // 2, y0 + (y1 - y0) // 2)
    cloned = np.asarray(cv2.seamlessClone(face, target, hard, center, cv2.NORMAL_CLONE), np.uint8)
    return feather_blend(target, cloned, mask, strength)
