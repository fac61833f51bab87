"""Triangle geometry of the face mesh: signed areas, per-triangle affine maps, and a
z-ordered triangle-id raster (the core of the single-pass piecewise-affine warp)."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.mesh import TRIANGLES

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int32]

#: mesh.TRIANGLES are consistently oriented; with image coordinates (y down) a triangle that
#: faces the camera has a positive signed area (checked on frontal faces: 837 of 852 positive,
#: the rest are folds at the face outline).
FRONT_SIGN = 1.0
_SHIFT = 4  # sub-pixel bits for cv2.fillConvexPoly: 1/16 px vertex precision


def signed_areas(points: FloatArray, triangles: IntArray = TRIANGLES) -> FloatArray:
    """Signed 2D area of every triangle (positive = facing the camera)."""
    p = points[:, :2][triangles]
    d1 = p[:, 1] - p[:, 0]
    d2 = p[:, 2] - p[:, 0]
    area = FRONT_SIGN * 0.5 * (d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0])
    return np.asarray(area, dtype=np.float32)


def facing_cosines(points: FloatArray, triangles: IntArray = TRIANGLES) -> FloatArray:
    """cos of the angle between each triangle's 3D normal and the view direction.

    1 = seen head-on, 0 = seen edge-on, negative = back-facing. mediapipe's z is in the same
    pixel scale as x, so the 3D area is meaningful without calibration.
    """
    p = points[triangles].astype(np.float64)
    normal = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    length = np.linalg.norm(normal, axis=1)
    cos = FRONT_SIGN * normal[:, 2] / np.maximum(length, 1e-9)
    return np.asarray(cos, dtype=np.float32)


def triangle_affines(dst: FloatArray, src: FloatArray) -> FloatArray:
    """(T, 2, 3) affine maps taking each dst triangle (T,3,2) onto its src triangle (T,3,2).

    Closed form per triangle (barycentric differences), vectorised over all triangles: a
    batched LAPACK solve of 852 tiny systems costs milliseconds, this costs microseconds.
    Degenerate dst triangles get the map of their first vertex's translation only; they
    cover no pixels of the raster, so the value never matters but must stay finite.
    """
    d = dst.astype(np.float64)
    s = src.astype(np.float64)
    e1, e2 = d[:, 1] - d[:, 0], d[:, 2] - d[:, 0]  # (T, 2) dst edges
    f1, f2 = s[:, 1] - s[:, 0], s[:, 2] - s[:, 0]  # (T, 2) src edges
    det = e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]
    ok = np.abs(det) > 1e-6
    safe = np.where(ok, det, 1.0)
    # Linear part L with L @ [e1 e2] = [f1 f2]  =>  L = [f1 f2] @ inv([e1 e2]).
    inv = np.empty((len(d), 2, 2))
    inv[:, 0, 0], inv[:, 0, 1] = e2[:, 1] / safe, -e2[:, 0] / safe
    inv[:, 1, 0], inv[:, 1, 1] = -e1[:, 1] / safe, e1[:, 0] / safe
    edges = np.stack([f1, f2], axis=-1)  # (T, 2, 2): columns f1, f2
    linear = np.einsum("tij,tjk->tik", edges, inv)
    linear[~ok] = np.eye(2)
    shift = s[:, 0] - np.einsum("tij,tj->ti", linear, d[:, 0])
    affines: FloatArray = np.concatenate([linear, shift[:, :, None]], axis=2).astype(np.float32)
    return affines


def rasterise_ids(
    points: FloatArray,
    shape: tuple[int, int],
    triangles: IntArray = TRIANGLES,
    include: npt.NDArray[np.bool_] | None = None,
) -> IntArray:
    """int32 map of the triangle covering each pixel (-1 where none).

    Triangles are drawn far to near (by mean z), so where the projected mesh folds over
    itself (a turned head: the nose over the far cheek) the nearest surface wins.
    """
    ids = np.full(shape, -1, np.int32)
    order = np.argsort(-points[triangles, 2].mean(axis=1), kind="stable")
    if include is not None:
        order = order[include[order]]
    fixed = np.round(points[:, :2] * (1 << _SHIFT)).astype(np.int32)
    # Gathered once: per-triangle numpy indexing in the loop costs more than the drawing.
    polygons = fixed[triangles[order]]
    for index, polygon in zip(order.tolist(), polygons, strict=True):
        cv2.fillConvexPoly(ids, polygon, (index,), cv2.LINE_8, _SHIFT)
    return ids


def visible_fractions(points: FloatArray, triangles: IntArray = TRIANGLES) -> FloatArray:
    """Fraction of each triangle's projected area not hidden behind nearer triangles.

    Rasterised at a normalised scale (face about 256 px wide) so small faces still give
    usable counts. Back-facing and degenerate triangles get 0.
    """
    xy = points[:, :2].astype(np.float64)
    lo = xy.min(axis=0)
    scale = 256.0 / max(float(np.ptp(xy[:, 0])), float(np.ptp(xy[:, 1])), 1e-6)
    norm = points.astype(np.float32).copy()
    norm[:, :2] = ((xy - lo) * scale + 4.0).astype(np.float32)
    norm[:, 2] = points[:, 2] * scale
    size = int(np.ceil(norm[:, :2].max())) + 5
    areas = signed_areas(norm, triangles)
    ids = rasterise_ids(norm, (size, size), triangles, include=areas > 0)
    counts = np.bincount(ids[ids >= 0].ravel(), minlength=len(triangles)).astype(np.float32)
    # Shared edge pixels go to whichever neighbour is drawn last, so on average a triangle
    # keeps about its own area: the count over the area is the unoccluded fraction.
    fraction = np.clip(counts / np.maximum(areas, 1.0), 0.0, 1.0)
    return np.where(areas > 0.5, fraction, 0.0).astype(np.float32)
