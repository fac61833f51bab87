"""The face's outline moved with its mesh: a smooth warp of the region around the face.

The swap pastes inside the face oval only, so the jaw line, the cheeks' contour and the chin
were always the target's, and a recogniser reads them (the hard paste of the whole inner face
in the target's outline got no nearer the source than a median distance of 0.43). Where the
reshape moves the oval towards the source's outline (``reshape.reshaped_points`` with
``outline``), what lies around it (neck, hair, background) has to follow, or the swapped face
would end before the target's jaw does (or reach over it).

The displacement is a thin-plate spline through the oval's landmarks (their shifts), a few
points inside the face and zero-shift anchors on the region's border, evaluated on a coarse
grid and enlarged: smooth everywhere, exact at the landmarks (to the grid's interpolation),
nothing moving at the region's edge (a taper over the outer part of its margin makes that
exact). Inside the mesh the
piecewise-affine warp of ``reshape.reshaped_target`` is used instead (it agrees with the
spline at the oval's vertices).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Frame, frozen

#: Inner landmarks that pin the spline inside the face (eye corners, nose, mouth corners,
#: brows): the field there is replaced by the mesh warp, but near the oval it is blended.
_INNER = frozen(np.array([33, 133, 362, 263, 1, 4, 61, 291, 105, 334, 168, 199], np.int32))
#: Zero-shift anchors per side of the region's border.
ANCHORS_PER_SIDE = 6
#: The spline is evaluated on a coarse grid of about GRID_CELLS cells along the region's
#: longer side (at least GRID_MIN_STEP pixels each) and enlarged: it is smooth at that scale.
GRID_CELLS = 40
GRID_MIN_STEP = 4
#: Shifts smaller than this (pixels, largest over the oval) are not worth a warp.
MIN_SHIFT = 0.5


def _tps_kernel(r2: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    # U(r) = r² log r, written with r²: ½ r² log r² (0 at r = 0, where r² log r² → 0).
    # In place, one array for all (the grid's is ~1,400 × 70): the same values as
    # 0.5 * r2 * log(max(r2, 1e-12)) to the bit (a product by ½ is exact in any order).
    kernel = np.maximum(r2, 1e-12)
    np.log(kernel, out=kernel)
    kernel *= r2
    kernel *= 0.5
    return kernel


def _border_anchors(shape: tuple[int, int]) -> npt.NDArray[np.float64]:
    h, w = shape
    xs = np.linspace(0.0, w - 1.0, ANCHORS_PER_SIDE + 1)
    ys = np.linspace(0.0, h - 1.0, ANCHORS_PER_SIDE + 1)
    top = np.stack([xs, np.zeros_like(xs)], axis=1)
    bottom = np.stack([xs, np.full_like(xs, h - 1.0)], axis=1)
    left = np.stack([np.zeros_like(ys[1:-1]), ys[1:-1]], axis=1)
    right = np.stack([np.full_like(ys[1:-1], w - 1.0), ys[1:-1]], axis=1)
    return np.concatenate([top, bottom, left, right])


@dataclass(frozen=True)
class Displacement:
    """Backward shifts over a region of ``shape`` (height, width), on the coarse grid: the
    output pixel ``q`` shows the input at ``q - shift(q)`` (:func:`field` enlarges them)."""

    coarse: npt.NDArray[np.float32]  # (grid rows, grid columns, 2), pixels of ``shape``
    shape: tuple[int, int]

    def field(self, shape: tuple[int, int]) -> npt.NDArray[np.float32]:
        """(H, W, 2) shifts for the same region at another size (the working scale): the
        grid's nodes sit at cell centres, so one bilinear enlargement serves every size."""
        h, w = shape
        scale = (w / self.shape[1], h / self.shape[0])
        coarse = self.coarse
        if scale != (1.0, 1.0):
            coarse = np.asarray(coarse * np.array(scale, np.float32), np.float32)
        return np.asarray(cv2.resize(coarse, (w, h), interpolation=cv2.INTER_LINEAR), np.float32)


def displacement_field(
    points: FloatArray, moved: FloatArray, shape: tuple[int, int], margin: float
) -> Displacement | None:
    """The shifts that take the region's ``points`` to ``moved`` (landmarks in the region's
    pixels, ``shape`` its size). None where the oval does not move. ``margin``: pixels
    between the face and the region's border (the taper's room)."""
    index = np.concatenate([mesh.FACE_OVAL, _INNER])
    shifts = (moved[index, :2] - points[index, :2]).astype(np.float64)
    if float(np.abs(shifts[: len(mesh.FACE_OVAL)]).max()) < MIN_SHIFT:
        return None
    anchors = _border_anchors(shape)
    centres = np.concatenate([moved[index, :2].astype(np.float64), anchors])
    values = np.concatenate([shifts, np.zeros((len(anchors), 2))])
    n = len(centres)
    between = centres[:, None, :] - centres[None, :, :]
    system = np.zeros((n + 3, n + 3))
    system[:n, :n] = _tps_kernel(between[..., 0] ** 2 + between[..., 1] ** 2)
    system[:n, :n] += np.eye(n) * 1e-6
    system[:n, n] = 1.0
    system[:n, n + 1 :] = centres
    system[n, :n] = 1.0
    system[n + 1 :, :n] = centres.T
    rhs = np.zeros((n + 3, 2))
    rhs[:n] = values
    # OpenCV's LU: numpy's solve of this ~75x75 system costs ~40x more (BLAS threads).
    solved, coefficients = cv2.solve(system, rhs, flags=cv2.DECOMP_LU)
    if not solved:
        return None
    h, w = shape
    # Grid nodes at the centres of cv2.resize's cells, so its bilinear enlargement
    # interpolates between them exactly.
    step = max(float(GRID_MIN_STEP), max(h, w) / GRID_CELLS)
    gw, gh = max(3, round(w / step)), max(3, round(h / step))
    xs = (np.arange(gw) + 0.5) * (w / gw) - 0.5
    ys = (np.arange(gh) + 0.5) * (h / gh) - 0.5
    gx, gy = np.meshgrid(xs, ys)
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    # Squared distances from every node to every centre: the grid is a product of its
    # columns and rows, so the squares are taken per column and per row (gw + gh rows of n,
    # not gw × gh) and summed in one pass, node (row, column) at row × gw + column.
    across = (xs[:, None] - centres[None, :, 0]) ** 2
    down = (ys[:, None] - centres[None, :, 1]) ** 2
    gaps = np.add(across[None, :, :], down[:, None, :]).reshape(gh * gw, n)
    field = _tps_kernel(gaps) @ coefficients[:n] + coefficients[n] + grid @ coefficients[n + 1 :]
    # Nothing moves at the border: a taper over the outer half of the margin, and the outer
    # ring of nodes at zero (the enlargement holds the outermost nodes' value to the border).
    room = max(margin / 2.0, 1.0)
    ramp_x = np.clip(np.minimum(xs, w - 1 - xs) / room, 0.0, 1.0)
    ramp_y = np.clip(np.minimum(ys, h - 1 - ys) / room, 0.0, 1.0)
    taper = np.minimum(ramp_y[:, None], ramp_x[None, :])
    taper = taper * taper * (3.0 - 2.0 * taper)
    taper[[0, -1], :] = 0.0
    taper[:, [0, -1]] = 0.0
    coarse = (field.reshape(gh, gw, 2) * taper[..., None]).astype(np.float32)
    return Displacement(coarse, shape)


#: ``cv2.remap``'s second map when the first holds both coordinates (its stubs require one).
_NO_MAP: Any = None


def displaced(image: Frame, displacement: Displacement) -> Frame:
    """``image`` (the region, at any size) warped by the displacement's backward shifts."""
    h, w = image.shape[:2]
    # The shifts become the positions sampled, in place: one two-channel map (cv2.split of
    # the (H, W, 2) field cost more than the remap itself).
    where = displacement.field((h, w))
    np.subtract(np.arange(w, dtype=np.float32), where[..., 0], out=where[..., 0])
    np.subtract(np.arange(h, dtype=np.float32)[:, None], where[..., 1], out=where[..., 1])
    return np.asarray(
        cv2.remap(image, where, _NO_MAP, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE),
        image.dtype,
    )
