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
from facegate.engine.swap.symmetry import choose_mirrored, source_vertices, usable_triangles


@dataclass(frozen=True)
class MeshMaps:
    """Where the pixels of a target region's mesh window sample the source: the region's
    ``shape``, the window (x0, y0, x1, y1), the raster's triangle ids there, which of those
    pixels are textured (``covered``) and the ``cv2.remap`` maps (pixels not covered sample
    (-1, -1), outside the source)."""

    shape: tuple[int, int]
    window: tuple[int, int, int, int]
    ids: IntArray
    covered: npt.NDArray[np.bool_]
    map_x: FloatArray
    map_y: FloatArray

    def sample(self, source: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """``source`` (any image with the landmarks' geometry: the face, or a layer of its
        detail) warped onto the region: the region's size, 0 where uncovered."""
        image = np.zeros(self.shape + source.shape[2:], source.dtype)
        self._remap(source, image, cv2.BORDER_CONSTANT)
        return image

    def paste(self, source: npt.NDArray[Any], onto: npt.NDArray[Any]) -> None:
        """``source`` warped onto ``onto`` (an image of the region), in place, where covered
        (one remap, no region-sized copy). A covered pixel whose sample falls outside the
        source (within a pixel of its last row or column, or beyond: a folded triangle's)
        keeps ``onto``'s value, where :meth:`sample` gives black."""
        self._remap(source, onto, cv2.BORDER_TRANSPARENT)

    def _remap(self, source: npt.NDArray[Any], onto: npt.NDArray[Any], border: int) -> None:
        """One remap written straight into the window of ``onto`` (region-sized)."""
        x0, y0, x1, y1 = self.window
        cv2.remap(
            source,
            self.map_x,
            self.map_y,
            cv2.INTER_LINEAR,
            dst=onto[y0:y1, x0:x1],
            borderMode=border,
        )


@dataclass(frozen=True)
class WarpResult:
    """The warped source over a target region, which pixels it covers, and the maps that
    warped it (``maps.sample``: another layer of the source, warped alike)."""

    image: npt.NDArray[Any]  # the region's size, source dtype; 0 outside the mesh
    coverage: npt.NDArray[np.bool_]
    mirrored: npt.NDArray[np.bool_]  # (852,) triangles textured from their mirror image
    maps: MeshMaps

    @property
    def ids(self) -> IntArray:
        """The triangle covering each pixel of the region (-1 where none)."""
        x0, y0, x1, y1 = self.maps.window
        ids = np.full(self.maps.shape, -1, np.int32)
        ids[y0:y1, x0:x1] = np.where(self.maps.covered, self.maps.ids, -1)
        return ids


def target_quality(points: FloatArray, ids: IntArray) -> FloatArray:
    """How well the target shows each triangle, from its own raster (no extra drawing)."""
    areas = signed_areas(points)
    counts = np.bincount(ids[ids >= 0].ravel(), minlength=len(TRIANGLES)).astype(np.float32)
    visible = np.clip(counts / np.maximum(areas, 1.0), 0.0, 1.0)
    return np.asarray(np.clip(facing_cosines(points), 0.0, 1.0) * visible, dtype=np.float32)


def _mesh_window(points: FloatArray, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): integer bounds holding every pixel the mesh's triangles can
    cover, clipped to the region of ``shape``."""
    lo = np.floor(points[:, :2].min(axis=0)).astype(int) - 1
    hi = np.ceil(points[:, :2].max(axis=0)).astype(int) + 2
    x0, y0 = (max(0, int(v)) for v in lo)
    x1, y1 = min(shape[1], int(hi[0])), min(shape[0], int(hi[1]))
    if x1 <= x0 or y1 <= y0:  # the mesh lies outside the region: nothing is covered
        return 0, 0, shape[1], shape[0]
    return x0, y0, x1, y1


@dataclass(frozen=True)
class MeshRaster:
    """The target mesh rasterised once: its window (x0, y0, x1, y1) in the region, the
    triangle ids there, and how well it shows each triangle. Several images warped onto one
    mesh (the source's detail, the target itself when reshaped) share it."""

    window: tuple[int, int, int, int]
    ids: IntArray
    quality: FloatArray


def mesh_raster(target_points: FloatArray, shape: tuple[int, int]) -> MeshRaster:
    front = signed_areas(target_points) > 0
    # Only the mesh's bounding box holds covered pixels (the region around it is margin for
    # the mask's feather): raster, maps and remap run there, at global coordinates, so the
    # result is exactly the whole region's, computed on ~2/3 of its pixels.
    x0, y0, x1, y1 = _mesh_window(target_points, shape)
    offset = np.array([x0, y0, 0], np.float32)
    ids = rasterise_ids(target_points - offset, (y1 - y0, x1 - x0), include=front)
    return MeshRaster((x0, y0, x1, y1), ids, target_quality(target_points, ids))


def mesh_maps(
    source_points: FloatArray,
    source_quality: FloatArray | None,
    target_points: FloatArray,
    shape: tuple[int, int],
    raster: MeshRaster | None = None,
    least_quality: float = 0.0,
) -> tuple[MeshMaps, npt.NDArray[np.bool_]]:
    """The maps of :func:`warp_face` (same arguments, less the source image) and the
    triangles textured from their mirror image."""
    raster = raster or mesh_raster(target_points, shape)
    x0, y0, x1, y1 = raster.window
    ids_window = raster.ids
    mirrored = (
        np.zeros(len(TRIANGLES), bool)
        if source_quality is None
        else choose_mirrored(source_quality, raster.quality)
    )
    affines = triangle_affines(
        target_points[:, :2][TRIANGLES].astype(np.float32),
        source_vertices(source_points, mirrored),
    )
    covered = ids_window >= 0
    if source_quality is not None and least_quality > 0.0:
        # Triangles the source shows neither directly nor mirrored (a profile's far side and
        # nose) are not textured: the pixels below stay the target's.
        usable = usable_triangles(source_quality, mirrored, least_quality)
        if not usable.all():
            covered &= usable[np.maximum(ids_window, 0)]
    # One coefficient table per affine term, with an extra last row that sends uncovered
    # pixels to (-1, -1) (outside the source: BORDER_CONSTANT). Six contiguous gathers and
    # in-place arithmetic run ~2x faster than gathering (H, W, 2, 3) blocks.
    table = np.empty((6, len(TRIANGLES) + 1), np.float32)
    table[:, :-1] = affines.reshape(-1, 6).T
    table[:, -1] = (0.0, 0.0, -1.0, 0.0, 0.0, -1.0)
    lookup = np.where(covered, ids_window, len(TRIANGLES))
    c = [np.take(row, lookup) for row in table]
    xs = np.arange(x0, x1, dtype=np.float32)[None, :]
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    map_x = c[0] * xs
    map_x += c[1] * ys
    map_x += c[2]
    map_y = c[3] * xs
    map_y += c[4] * ys
    map_y += c[5]
    return MeshMaps(shape, raster.window, ids_window, covered, map_x, map_y), mirrored


def warp_face(
    source: npt.NDArray[Any],
    source_points: FloatArray,
    source_quality: FloatArray | None,
    target_points: FloatArray,
    shape: tuple[int, int],
    raster: MeshRaster | None = None,
    least_quality: float = 0.0,
) -> WarpResult:
    """Map ``source`` (with its landmarks) onto ``target_points`` in a region of ``shape``.

    ``source`` is any 1- to 4-channel image (the uint8 face, or a float layer of its
    detail); ``target_points`` are in the region's coordinates; ``source_quality`` is the
    per-triangle visibility of the source (``symmetry.triangle_quality``), used for the pose
    fill (None: no pose fill); ``raster`` is ``mesh_raster(target_points, shape)`` when
    already made; triangles whose texture's quality (own or mirrored) is under
    ``least_quality`` are left uncovered.
    """
    maps, mirrored = mesh_maps(
        source_points, source_quality, target_points, shape, raster, least_quality
    )
    x0, y0, x1, y1 = maps.window
    coverage = np.zeros(shape, bool)
    coverage[y0:y1, x0:x1] = maps.covered
    return WarpResult(image=maps.sample(source), coverage=coverage, mirrored=mirrored, maps=maps)
