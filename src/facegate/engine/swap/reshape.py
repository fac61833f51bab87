"""Face shape: the target's mesh moved towards the source's proportions, in the target's
pose and expression (the classical 3D-fitting idea of Blanz & Vetter and Nirkin et al.,
with the 478-point mesh in place of a morphable model).

Both meshes are turned into the face's own frontal frame (``descriptor.face_frame``), the
source's is scaled and centred onto the target's over the rigid points (eye corners, nose,
cheekbones, forehead, upper outline), and the difference is what makes the source look like
the source: eye spacing, nose length and width, mouth position, cheekbones. That difference is
put back in the target's pose and added to the target's mesh, except:

- expression: the mouth and the eyes move and scale as wholes (their position and width are
  the source's, their opening the target's), and the jaw's drop from an open mouth is taken
  out, so a laughing source does not open a closed target mouth;
- pose: the shift shrinks as either face turns away from the camera (``FULL_POSE``);
- the outline: the face oval (jaw, cheeks, chin) takes ``outline`` of its shift (0: none, so
  the swapped face meets the target's own jaw), with the rest of the face fading to the full
  shift inside it; above the trimmed forehead nothing moves (the hairline stays the target's).

The target's pixels are then warped onto the moved mesh (:func:`reshaped_target`), so its
eyes, mouth interior and shading follow the new shape; where the oval moved, the region
around it follows too (``swap.outline``), else nothing outside the mesh moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.descriptor import face_frame, frame_pose
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.swap.masks import FOREHEAD_KEPT
from facegate.engine.swap.warp import MeshRaster, mesh_maps
from facegate.engine.types import Frame, frozen

IndexArray = npt.NDArray[np.int32]
#: A target region or a mask over it (``reshaped_target`` warps either).
ImageT = TypeVar("ImageT", Frame, FloatArray)

# Rigid points (subject's right side; their mirrors are added): eye corners, nose, cheekbones,
# forehead and the upper outline. The scale and centre of the fit come from these.
_RIGID_RIGHT = frozen(
    np.array(
        [
            33,
            133,
            98,
            129,
            48,
            64,
            102,
            122,
            196,
            174,
            108,
            67,
            109,
            103,
            54,
            116,
            117,
            118,
            50,
            205,
        ],
        dtype=np.int32,
    )
)
_RIGID = frozen(
    np.unique(
        np.concatenate([_RIGID_RIGHT, mesh.MIRROR[_RIGID_RIGHT], [1, 2, 4, 5, 6, 9, 168, 195, 197]])
    ).astype(np.int32)
)
#: The frontal frame's proportions are trusted up to FULL_POSE degrees of yaw or pitch (of
#: either face) and not at all from NO_POSE on: a profile's depth is mediapipe's guess, and
#: its "proportions" moved a frontal target's eyes and nose by 5 % of their spacing.
FULL_POSE = 20.0
NO_POSE = 40.0
#: The shift is full from this distance to the face oval on (in inter-ocular distances of
#: the target's frontal frame) and fades to nothing at FADE_START.
FADE_START = 0.12
FADE_FULL = 0.45


def _inside(points: FloatArray, contour: IndexArray) -> IndexArray:
    """Indices of the landmarks inside (or on) the polygon through ``points[contour]``
    (looked up in a raster of the polygon's box: one fill instead of 478 point tests)."""
    corner = np.floor(points[contour, :2].min(axis=0)) - 1
    polygon = np.round(points[contour, :2] - corner).astype(np.int32)
    raster = np.zeros((int(polygon[:, 1].max()) + 3, int(polygon[:, 0].max()) + 3), np.uint8)
    cv2.fillPoly(raster, [polygon], (1,))
    cv2.polylines(raster, [polygon], True, (1,))
    xy = np.round(points[:, :2] - corner).astype(np.int64)
    h, w = raster.shape
    within = (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)
    hits = np.zeros(len(points), bool)
    hits[within] = raster[xy[within, 1], xy[within, 0]] > 0
    hits[contour] = True
    return np.flatnonzero(hits).astype(np.int32)


@dataclass(frozen=True)
class Shape:
    """A face's landmarks (pixels), the same in its own frontal frame (centred on the rigid
    points' centroid), the rotation (columns: right, down, away) that maps them back, and
    how far its proportions can be trusted: 1 within FULL_POSE degrees of frontal (yaw or
    pitch), 0 from NO_POSE; ``turned`` is that angle (the larger of |yaw| and |pitch|, in
    degrees). A source's is made once, in ``prepare_source``."""

    points: FloatArray
    local: npt.NDArray[np.float64]
    rotation: npt.NDArray[np.float64]
    trust: float
    turned: float


def face_shape(points: FloatArray) -> Shape:
    rotation = face_frame(points)
    p = points.astype(np.float64)
    local = (p - p[_RIGID].mean(axis=0)) @ rotation
    yaw, pitch, _ = frame_pose(rotation)
    turned = float(max(abs(yaw), abs(pitch)))
    trust = float(np.clip((NO_POSE - turned) / (NO_POSE - FULL_POSE), 0.0, 1.0))
    return Shape(points, local, rotation, trust, turned)


def _as_whole(
    target: npt.NDArray[np.float64],
    source: npt.NDArray[np.float64],
    region: IndexArray,
    corners: tuple[int, int],
) -> npt.NDArray[np.float64]:
    """Target positions of ``region`` moved to the source's centre of it and scaled across by
    the source's width (``corners``), its height (the opening) left as the target's."""
    t_centre, s_centre = target[list(corners)].mean(axis=0), source[list(corners)].mean(axis=0)
    t_width = float(np.linalg.norm(target[corners[0]] - target[corners[1]]))
    s_width = float(np.linalg.norm(source[corners[0]] - source[corners[1]]))
    scale = s_width / max(t_width, 1e-6)
    moved = target[region] - t_centre
    moved[:, 0] *= scale
    return np.asarray(moved + s_centre, np.float64)


def reshaped_points(
    source: FloatArray | Shape,
    target: FloatArray | Shape,
    strength: float = 1.0,
    outline: float = 0.0,
) -> FloatArray:
    """The target's landmarks (pixels) moved towards the source's shape (see the module doc);
    ``strength`` 0 returns them unchanged, 1 takes the source's proportions fully. Either
    face is its landmarks or their :func:`face_shape`."""
    source = source if isinstance(source, Shape) else face_shape(source)
    target = target if isinstance(target, Shape) else face_shape(target)
    strength *= min(source.trust, target.trust)
    if strength <= 0.0:
        return target.points
    s_local, t_local, rotation = source.local, target.local, target.rotation
    points = target.points
    scale = np.sqrt((t_local[_RIGID] ** 2).sum() / max((s_local[_RIGID] ** 2).sum(), 1e-9))
    fitted = s_local * scale
    wanted = fitted.copy()
    # Expression: mouth and eyes as wholes, and the jaw's drop taken out below the mouth.
    mouth = _inside(points, mesh.LIPS_OUTER)
    wanted[mouth] = _as_whole(t_local, fitted, mouth, (mesh.MOUTH_RIGHT, mesh.MOUTH_LEFT))
    for contour, iris, corners in (
        (mesh.RIGHT_EYE, mesh.RIGHT_IRIS, (33, 133)),
        (mesh.LEFT_EYE, mesh.LEFT_IRIS, (263, 362)),
    ):
        eye = np.union1d(_inside(points, contour), iris).astype(np.int32)
        wanted[eye] = _as_whole(t_local, fitted, eye, corners)
    drop = (fitted[14, 1] - fitted[13, 1]) - (t_local[14, 1] - t_local[13, 1])
    mouth_line = (t_local[mesh.MOUTH_RIGHT, 1] + t_local[mesh.MOUTH_LEFT, 1]) / 2
    below = np.clip((t_local[:, 1] - mouth_line) / max(abs(drop), 1e-6) + 0.5, 0.0, 1.0)
    below[mouth] = 0.0
    wanted[:, 1] -= below * drop
    delta = wanted - t_local
    shift = (delta * _fade(t_local, outline)[:, None] * strength) @ rotation.T
    return np.asarray(points.astype(np.float64) + shift, np.float32)


def _fade(local: npt.NDArray[np.float64], outline: float = 0.0) -> npt.NDArray[np.float64]:
    """Per landmark, how much of the shift it takes: ``outline`` on the face oval, 0 above
    the trimmed forehead, 1 well inside the face (smooth in between)."""
    # Up is -y in the frontal frame; the mask keeps FOREHEAD_KEPT of brow → top.
    brows = local[np.concatenate([mesh.LEFT_BROW, mesh.RIGHT_BROW]), 1].min()
    top = local[mesh.FOREHEAD_TOP, 1]
    edge = brows + FOREHEAD_KEPT * (top - brows)
    forehead = np.clip((local[:, 1] - edge) / max(brows - edge, 1e-6), 0.0, 1.0)
    if outline >= 1.0:  # the oval moves fully: no fade towards it
        return np.asarray(forehead, np.float64)
    eye_gap = float(np.linalg.norm(local[33, :2] - local[263, :2]))
    oval = local[mesh.FACE_OVAL, :2]
    gaps = np.linalg.norm(local[:, None, :2] - oval[None, :, :], axis=2).min(axis=1) / eye_gap
    fade = np.clip((gaps - FADE_START) / (FADE_FULL - FADE_START), 0.0, 1.0)
    smooth = (outline + (1.0 - outline) * fade * fade * (3 - 2 * fade)) * forehead
    return np.asarray(smooth, np.float64)


def reshaped_target(
    image: ImageT,
    points: FloatArray,
    moved: FloatArray,
    raster: MeshRaster | None = None,
    background: ImageT | None = None,
) -> ImageT:
    """``image`` (a target region, ``points`` its landmarks there) with its face warped onto
    the ``moved`` landmarks (``raster``: theirs, when already made); pixels the mesh does not
    cover are ``background``'s (the region around a moved outline, ``swap.outline``) or left
    as they are. No pose fill: the target shows itself as it is."""
    shape = (image.shape[0], image.shape[1])
    maps, _ = mesh_maps(points, None, moved, shape, raster)
    out = (image if background is None else background).copy()
    maps.paste(image, out)
    return out
