"""Skin tone of a swapped face against the target's own: the cheek ΔE.

Two round patches on the cheeks, placed from the eye and nose landmarks: each below its eye's
centre, at ``CHEEK_DROP`` of the way from the eyes' level down to the nose tip's and beyond
(on the cheekbone's lower slope: under a glasses lens's rim, above a beard line), radius
``CHEEK_RADIUS`` of the inter-ocular distance. The figure is CIE76 (the Euclidean distance
in L*a*b*) between the patches' mean colours in the result and in the target: under ~2 is
not seen side by side, 4 is a tone a studio would accept, past 8 the face reads as another
person's skin. Used by ``benchmarks/quality.py`` and by the quality report of every result
(``engine.report``).
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.swap.filters import gaussian_blur
from facegate.engine.types import FloatArray, Frame

#: Where a patch's centre lies below its eye: the fraction of the drop from the eyes' centre
#: to the nose tip (1.0 = the nose tip's level).
CHEEK_DROP = 0.8
#: A patch's radius, as a fraction of the inter-ocular distance.
CHEEK_RADIUS = 0.14
#: Fewer pixels than this in both patches together: no figure (a face a few pixels wide).
MIN_PIXELS = 12


def cheek_patches(landmarks: FloatArray, shape: tuple[int, int]) -> npt.NDArray[np.bool_]:
    """A boolean mask of the two cheek patches of the face with ``landmarks`` (x, y, ...)."""
    mask = np.zeros(shape, np.bool_)
    window = _cheek_window(landmarks, shape)
    if window is not None:
        y0, x0, patches = window
        mask[y0 : y0 + patches.shape[0], x0 : x0 + patches.shape[1]] = patches
    return mask


def cheek_centres(landmarks: FloatArray) -> tuple[list[tuple[int, int]], float]:
    """The two cheek centres (x, y, rounded) of the face with ``landmarks``, and its
    inter-ocular distance (eye centre to eye centre)."""
    points = landmarks[:, :2]
    right = points[mesh.RIGHT_EYE].mean(axis=0)
    left = points[mesh.LEFT_EYE].mean(axis=0)
    drop = points[mesh.NOSE_TIP] - (right + left) / 2
    centres = [
        (round(float(x)), round(float(y)))
        for x, y in (eye + CHEEK_DROP * drop for eye in (right, left))
    ]
    return centres, float(np.linalg.norm(left - right))


def cheek_area(landmarks: FloatArray, shape: tuple[int, int], radius: float) -> FloatArray:
    """A soft mask (1 = cheek) of discs of ``radius`` (of the inter-ocular distance) around
    the cheek centres, feathered over a third of it: the skin a viewer judges the tone on."""
    centres, inter_ocular = cheek_centres(landmarks)
    pixels = max(1, round(radius * inter_ocular))
    hard = np.zeros(shape, np.float32)
    for centre in centres:
        cv2.circle(hard, centre, pixels, (1.0,), -1)
    return np.asarray(gaussian_blur(hard, max(0.5, pixels / 3)), np.float32)


def _cheek_window(
    landmarks: FloatArray, shape: tuple[int, int]
) -> tuple[int, int, npt.NDArray[np.bool_]] | None:
    """The cheek patches drawn in the frame's window around them only: (top, left, mask of
    the window); None when they lie off the frame. The same pixels as a whole-frame mask at
    a small part of its cost (a 1080p frame: ~6 ms a call for the whole frame's mask)."""
    centres, inter_ocular = cheek_centres(landmarks)
    radius = max(1, round(CHEEK_RADIUS * inter_ocular))
    x0 = max(0, min(x for x, _ in centres) - radius - 1)
    y0 = max(0, min(y for _, y in centres) - radius - 1)
    x1 = min(shape[1], max(x for x, _ in centres) + radius + 2)
    y1 = min(shape[0], max(y for _, y in centres) + radius + 2)
    if x1 <= x0 or y1 <= y0:
        return None
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    for x, y in centres:
        cv2.circle(mask, (x - x0, y - y0), radius, (1,), -1)
    return y0, x0, np.asarray(mask > 0, np.bool_)


def cheek_lab(frame: Frame, landmarks: FloatArray) -> FloatArray | None:
    """Mean L*a*b* (L* 0-100) over the cheek patches of ``frame``; None: too few pixels."""
    window = _cheek_window(landmarks, (frame.shape[0], frame.shape[1]))
    if window is None:
        return None
    top, left, patches = window
    if int(patches.sum()) < MIN_PIXELS:
        return None
    ys, xs = np.nonzero(patches)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    crop = frame[top + y0 : top + y1, left + x0 : left + x1].astype(np.float32)
    crop *= np.float32(1.0 / 255.0)
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2Lab)
    return np.asarray(lab[patches[y0:y1, x0:x1]].mean(axis=0), np.float32)


def tone_delta_e(
    result: Frame,
    target: Frame,
    landmarks: FloatArray,
    result_landmarks: FloatArray | None = None,
) -> float:
    """CIE76 ΔE between the cheeks of ``result`` (at ``result_landmarks``, default the
    target's: the swap keeps the target's pose) and of ``target`` at ``landmarks``; nan
    when a patch is off the frame or too small."""
    swapped = cheek_lab(result, landmarks if result_landmarks is None else result_landmarks)
    own = cheek_lab(target, landmarks)
    if swapped is None or own is None:
        return float("nan")
    return float(np.linalg.norm(swapped - own))
