"""Pose fill: triangles the source face does not show are taken from their mirror images.

A head turned away hides or foreshortens one cheek; warping that sliver onto a target that
shows the cheek stretches it (and drags the nose across it). The mesh is left-right
symmetric (``mesh.MIRROR``), so such a triangle can be textured from the mirrored triangle
on the visible side: the affine map from the target triangle (a, b, c) to the source points
(M[a], M[b], M[c]) is itself a reflection, which flips the texture horizontally.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from facegate.engine.mesh import MIRROR, TRIANGLES
from facegate.engine.swap.geometry import FloatArray, IntArray, facing_cosines, visible_fractions

#: Below this source quality (facing cosine × unoccluded fraction) a triangle is a candidate
#: for mirroring; the mirror must be better by MARGIN and the target must show the triangle
#: better than the source does by MARGIN (else the target is turned the same way and the
#: source's own foreshortened texture is the right one).
POOR_QUALITY = 0.35
MARGIN = 0.25
#: For a source turned too far to trust its proportions (``reshape.NO_POSE``): below this
#: quality, in the source or (where chosen) its mirror, a triangle is not textured at all. A
#: face turned past ~50° shows neither its far side nor its nose's, and stretching the sliver
#: it has broke the target's nose. (A frontal face's outline folds are as poor, but real.)
UNUSABLE = 0.15


def _mirror_triangle_index(triangles: IntArray, mirror: IntArray) -> IntArray:
    lookup = {frozenset(map(int, tri)): index for index, tri in enumerate(triangles)}
    out = np.full(len(triangles), -1, np.int32)
    for index, tri in enumerate(triangles):
        found = lookup.get(frozenset(int(mirror[v]) for v in tri))
        if found is not None and found != index:
            out[index] = found
    out.flags.writeable = False
    return out


#: index of each triangle's mirror image (-1 on the midline or where the mirror is unknown).
MIRROR_TRIANGLE: IntArray = _mirror_triangle_index(TRIANGLES, MIRROR)


def triangle_quality(landmarks: FloatArray) -> FloatArray:
    """How well the face shows each triangle: facing cosine × unoccluded fraction, in [0, 1]."""
    cos = np.clip(facing_cosines(landmarks), 0.0, 1.0)
    return (cos * visible_fractions(landmarks)).astype(np.float32)


def choose_mirrored(
    source_quality: FloatArray, target_quality: FloatArray
) -> npt.NDArray[np.bool_]:
    """Triangles whose texture should come from the mirrored source triangle."""
    has_mirror = MIRROR_TRIANGLE >= 0
    mirror_quality = np.where(has_mirror, source_quality[np.maximum(MIRROR_TRIANGLE, 0)], 0.0)
    return (
        has_mirror
        & (source_quality < POOR_QUALITY)
        & (mirror_quality > source_quality + MARGIN)
        & (target_quality > source_quality + MARGIN)
    )


def source_vertices(source_points: FloatArray, mirrored: npt.NDArray[np.bool_]) -> FloatArray:
    """(T, 3, 2) source coordinates per target triangle, mirrored where chosen."""
    direct = source_points[:, :2][TRIANGLES]
    flipped = source_points[:, :2][MIRROR[TRIANGLES]]
    return np.where(mirrored[:, None, None], flipped, direct).astype(np.float32)


def usable_triangles(
    source_quality: FloatArray, mirrored: npt.NDArray[np.bool_], least: float = UNUSABLE
) -> npt.NDArray[np.bool_]:
    """Triangles whose texture (the source's own, or its mirror where ``mirrored``) the
    source shows at ``least`` this well."""
    mirror_quality = source_quality[np.maximum(MIRROR_TRIANGLE, 0)]
    chosen = np.where(mirrored, mirror_quality, source_quality)
    return np.asarray(chosen >= least, np.bool_)
