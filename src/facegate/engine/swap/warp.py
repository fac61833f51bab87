"""One-pass piecewise-affine warp of the source face onto the target's mesh.

Every target pixel looks up the triangle covering it (a rasterised id map), then the
inverse affine of that triangle gives its source position; one ``cv2.remap`` samples all
pixels at once. Cost is one raster of 852 small polygons plus one remap of the face region.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.mesh import TRIANGLES
from facegate.engine.swap.geometry import (
    FloatArray,
    IntArray,
    facing_cosines,
    rasterise_ids,
    signed_areas,
    triangle_affines,
)
from facegate.engine.swap.symmetry import choose_mirrored, source_vertices


@dataclass(frozen=True)
class WarpResult:
    """The warped source over a target region, and which pixels it covers."""

    image: npt.NDArray[Any]  # the region's size, source dtype; 0 outside the mesh
    coverage: npt.NDArray[np.bool_]
    ids: IntArray
    mirrored: npt.NDArray[np.bool_]  # (852,) triangles textured from their mirror image


def target_quality(points: FloatArray, ids: IntArray) -> FloatArray:
    """How well the target shows each triangle, from its own raster (no extra drawing)."""
    areas = signed_areas(points)
    counts = np.bincount(ids[ids >= 0].ravel(), minlength=len(TRIANGLES)).astype(np.float32)
    visible = np.clip(counts / np.maximum(areas, 1.0), 0.0, 1.0)
    return np.asarray(np.clip(facing_cosines(points), 0.0, 1.0) * visible, dtype=np.float32)


def warp_face(
    source: npt.NDArray[Any],
    source_points: FloatArray,
    source_quality: FloatArray,
    target_points: FloatArray,
    shape: tuple[int, int],
) -> WarpResult:
    """Map ``source`` (with its landmarks) onto ``target_points`` in a region of ``shape``.

    ``source`` is any 1- or 3-channel image (the uint8 face, or its float detail layer);
    ``target_points`` are in the region's coordinates; ``source_quality`` is the per-triangle
    visibility of the source (``symmetry.triangle_quality``), used for the pose fill.
    """
    front = signed_areas(target_points) > 0
    ids = rasterise_ids(target_points, shape, include=front)
    mirrored = choose_mirrored(source_quality, target_quality(target_points, ids))
    affines = triangle_affines(
        target_points[:, :2][TRIANGLES].astype(np.float32),
        source_vertices(source_points, mirrored),
    )
    coverage = ids >= 0
    safe = np.where(coverage, ids, 0)
    ys, xs = np.indices(shape, dtype=np.float32)
    a = affines[safe]  # (H, W, 2, 3)
    map_x = a[..., 0, 0] * xs + a[..., 0, 1] * ys + a[..., 0, 2]
    map_y = a[..., 1, 0] * xs + a[..., 1, 1] * ys + a[..., 1, 2]
    map_x[~coverage] = -1.0
    map_y[~coverage] = -1.0
    image = np.asarray(
        cv2.remap(source, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT),
        dtype=source.dtype,
    )
    return WarpResult(image=image, coverage=coverage, ids=ids, mirrored=mirrored)
