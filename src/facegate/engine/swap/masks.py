"""Blend masks from the target's mesh: the face region (forehead trimmed below the
hairline, padding, feathered edge) and the regions kept from the target for expression."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.swap.filters import erode_blur, gaussian_blur
from facegate.engine.swap.geometry import FloatArray

#: Fraction of the forehead (brows → top of the mesh) that stays in the mask. The mesh's
#: top row sits on the hairline, so the full oval would paste the source's fringe.
FOREHEAD_KEPT = 0.5
#: Mouth/eye openness differences (opening ÷ width) above which the whole lips / lids of
#: the target are kept instead of only the mouth interior / eyeball.
MOUTH_DIFFERENCE = 0.08
EYE_DIFFERENCE = 0.12


def polygon_mask(
    points: FloatArray, indices: npt.NDArray[np.int32], shape: tuple[int, int]
) -> FloatArray:
    """1 inside the polygon through ``points[indices]``, 0 outside (float32)."""
    mask = np.zeros(shape, np.uint8)
    cv2.fillPoly(mask, [np.round(points[indices, :2] * 16).astype(np.int32)], (1,), cv2.LINE_8, 4)
    return mask.astype(np.float32)


def face_axes(points: FloatArray) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Unit vectors (right, up) of the face in the image: up runs chin → forehead."""
    up = points[mesh.FOREHEAD_TOP, :2] - points[mesh.CHIN, :2]
    up = up / max(float(np.linalg.norm(up)), 1e-6)
    return np.array([-up[1], up[0]]), up


def trimmed_oval(points: FloatArray) -> FloatArray:
    """The face-oval polygon with its upper part pulled down towards the brows."""
    oval = points[mesh.FACE_OVAL, :2].astype(np.float64)
    _, up = face_axes(points)
    chin = points[mesh.CHIN, :2]
    brows = points[np.concatenate([mesh.LEFT_BROW, mesh.RIGHT_BROW]), :2]
    brow_level = float(((brows - chin) @ up).max())
    height = (oval - chin) @ up
    excess = np.maximum(height - brow_level, 0.0)
    return (oval - np.outer(excess * (1.0 - FOREHEAD_KEPT), up)).astype(np.float32)


def padding_mask(
    points: FloatArray, shape: tuple[int, int], padding: tuple[float, float, float, float]
) -> FloatArray:
    """1 inside the face's oriented box shrunk by ``padding`` % (top, right, bottom, left)."""
    right, up = face_axes(points)
    oval = points[mesh.FACE_OVAL, :2].astype(np.float64)
    u, v = oval @ right, oval @ up
    w, h = u.max() - u.min(), v.max() - v.min()
    top, rgt, bottom, lft = (p / 100.0 for p in padding)
    # Image-left of the face is the low end of the `right` axis.
    u0, u1 = u.min() + lft * w, u.max() - rgt * w
    v0, v1 = v.min() + bottom * h, v.max() - top * h
    corners = np.array([[u0, v0], [u1, v0], [u1, v1], [u0, v1]])
    xy = corners[:, :1] * right + corners[:, 1:] * up
    mask = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(mask, np.round(xy * 16).astype(np.int32), (1,), cv2.LINE_8, 4)
    return mask.astype(np.float32)


def face_mask(
    points: FloatArray,
    shape: tuple[int, int],
    padding: tuple[float, float, float, float],
    blur: float,
    inset: float = 1.5,
) -> FloatArray:
    """Soft face mask: trimmed oval × padding box, eroded by ``inset`` feather sigmas then
    blurred, so the soft edge falls inside the face (a feather centred on the jaw line shows
    what lies past it, where nothing else keeps it off: ``mesh_warp`` keeps it off with the
    warp's coverage, and takes a smaller inset)."""
    oval = trimmed_oval(points)
    hard = np.zeros(shape, np.uint8)
    cv2.fillPoly(hard, [np.round(oval * 16).astype(np.int32)], (1,), cv2.LINE_8, 4)
    mask = hard.astype(np.float32)
    if any(padding):
        mask *= padding_mask(points, shape, padding)
    width = float(np.ptp(points[mesh.FACE_OVAL, 0]))
    sigma = blur * 0.08 * width
    if sigma >= 0.5:
        mask = erode_blur(mask, max(1, round(inset * sigma)), sigma)
    return np.clip(mask, 0.0, 1.0, out=mask)


def openness(points: FloatArray) -> tuple[float, float, float]:
    """(mouth, subject-right eye, subject-left eye) opening ÷ width."""

    def ratio(a: int, b: int, c: int, d: int) -> float:
        gap = float(np.linalg.norm(points[a, :2] - points[b, :2]))
        return gap / max(float(np.linalg.norm(points[c, :2] - points[d, :2])), 1e-6)

    return ratio(13, 14, 61, 291), ratio(159, 145, 33, 133), ratio(386, 374, 362, 263)


def keep_mask(
    source_points: FloatArray,
    target_points: FloatArray,
    shape: tuple[int, int],
    expression: bool = True,
    source_eyes: bool = False,
) -> FloatArray:
    """Soft mask (1 = keep the target) of the eyes and mouth interior (holes of the mesh,
    which the warp cannot fill), grown to the whole lips or lids where ``expression`` is
    set and the source's mouth or eye opening differs from the target's. With
    ``source_eyes``, an eye whose opening agrees is not kept (``swap.eyes`` fills it)."""
    s_mouth, s_reye, s_leye = openness(source_points)
    t_mouth, t_reye, t_leye = openness(target_points)
    width = float(np.ptp(target_points[mesh.FACE_OVAL, 0]))
    keep = polygon_mask(target_points, mesh.LIPS_INNER, shape)
    if expression and abs(s_mouth - t_mouth) > MOUTH_DIFFERENCE:
        keep = np.maximum(keep, polygon_mask(target_points, mesh.LIPS_OUTER, shape))
    for eye, s_open, t_open in (
        (mesh.RIGHT_EYE, s_reye, t_reye),
        (mesh.LEFT_EYE, s_leye, t_leye),
    ):
        differs = abs(s_open - t_open) > EYE_DIFFERENCE
        if source_eyes and not differs:
            continue
        region = polygon_mask(target_points, eye, shape)
        if expression and differs:
            grow = max(1, round(0.03 * width))
            kernel = np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)
            region = np.asarray(cv2.dilate(region, kernel), dtype=np.float32)
        keep = np.maximum(keep, region)
    sigma = max(0.5, 0.01 * width)
    keep = gaussian_blur(keep, sigma)
    return np.clip(keep, 0.0, 1.0, out=keep)


def features_mask(points: FloatArray, shape: tuple[int, int], grow: float) -> FloatArray:
    """Soft mask (1 = a feature) of the eyes with their brows, the nose and the lips: each
    one's convex hull, grown by ``grow`` of the face width and feathered over as much again.
    What lies outside (the cheeks, the forehead, the chin) is skin, whose broad shading is
    the target's (``mesh_warp.Tuning.skin_mid``)."""
    width = float(np.ptp(points[mesh.FACE_OVAL, 0]))
    hard = np.zeros(shape, np.uint8)
    for part in (
        np.concatenate([mesh.RIGHT_EYE, mesh.RIGHT_BROW]),
        np.concatenate([mesh.LEFT_EYE, mesh.LEFT_BROW]),
        mesh.NOSE,
        mesh.LIPS_OUTER,
    ):
        hull = cv2.convexHull(np.round(points[part, :2] * 16).astype(np.int32))
        cv2.fillConvexPoly(hard, hull, (1,), cv2.LINE_8, 4)
    # Grown and feathered in one wide blur (at reduced size: filters.gaussian_blur): a
    # dilation by an elliptic kernel of that size cost 30 ms on a 1080p face.
    soft = gaussian_blur(hard.astype(np.float32), max(0.5, grow * width))
    return np.asarray(np.clip(soft * np.float32(2.5), 0.0, 1.0), np.float32)
