"""Glasses: a target's frames kept in front of the swapped face, a source's never carried.

The frames are found from the mesh and the pixels, no model: in the band around the eyes
(brows to the upper cheeks, temple to temple, ``glasses_band``), the thin structures darker
or brighter than their surroundings (morphological black-hat and top-hat of L*, at a third
of an eye's height) that lie off the eyes and brows. A pair of glasses is there when the
nose bridge between the inner eye corners and the rims below the eyes both hold such lines
(``has_glasses``): bare skin there is smooth, whatever the brows and lashes do.

- a target's frames are put back over the result (``mesh_warp``: the blend mask is 0 there),
  so they stay whole in front of the new face, where they were;
- a source's frames are painted out of its crop before anything is taken from it
  (``remove_glasses``: OpenCV's inpainting), so its detail carries no frames, and where the
  paint is the result shows the target's own skin (``mesh_warp``: kept like the target's
  eyes and mouth).
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Frame

#: A line's contrast (L*, 0-100) from its surroundings for it to count as a frame.
LINE_CONTRAST = 12.0
#: Share of the bridge's and of the rims' pixels on such lines for glasses to be there.
BRIDGE_SHARE = 0.2
RIM_SHARE = 0.2
#: How far a source's paint-out reaches past the frames' lines, of the eye distance.
PAINT_GROW = 0.1
#: Glasses are looked for at a size where the eyes are at most this many pixels apart (a
#: frame is still several pixels wide there; a 1080p close-up's 250 px cost 7 ms more).
WORK_EYES = 90.0


def _centre(points: FloatArray, indices: npt.NDArray[np.int32]) -> FloatArray:
    return np.asarray(points[indices, :2].mean(axis=0), np.float64)


def _band_hull(points: FloatArray) -> npt.NDArray[np.int32]:
    """The glasses band's convex hull, in 1/16 pixels (fillConvexPoly's shift 4)."""
    right, left = _centre(points, mesh.RIGHT_EYE), _centre(points, mesh.LEFT_EYE)
    drop = points[mesh.NOSE_TIP, :2] - (right + left) / 2
    across = left - right
    brows = np.concatenate([points[mesh.RIGHT_BROW, :2], points[mesh.LEFT_BROW, :2]])
    corners = [right - 0.45 * across + 0.55 * drop, left + 0.45 * across + 0.55 * drop]
    corners += [right - 0.45 * across - 0.35 * drop, left + 0.45 * across - 0.35 * drop]
    hull = cv2.convexHull(np.round(np.concatenate([brows, corners]) * 16).astype(np.int32))
    return np.asarray(hull, np.int32)


def glasses_band(points: FloatArray, shape: tuple[int, int]) -> npt.NDArray[np.uint8]:
    """1 over the region glasses occupy: the brows' hull extended to the face's sides and
    down to half-way between the eyes and the nose tip."""
    band = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(band, _band_hull(points), (1,), cv2.LINE_8, 4)
    return band


def _band_box(points: FloatArray, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x, y, w, h): ``cv2.boundingRect(glasses_band(points, shape))``, drawn on a canvas
    around the hull only, not on an image of ``shape`` (the band is a tenth of a face's
    region: the region-sized raster and its scan cost ~1 ms a face at 1080p)."""
    hull = _band_hull(points)
    lo = np.maximum(hull.reshape(-1, 2).min(axis=0) // 16 - 2, 0)
    hi = np.minimum(hull.reshape(-1, 2).max(axis=0) // 16 + 3, (shape[1], shape[0]))
    if (hi <= lo).any():
        return 0, 0, 0, 0
    canvas = np.zeros((int(hi[1] - lo[1]), int(hi[0] - lo[0])), np.uint8)
    shifted = hull - (lo * 16).astype(np.int32)
    cv2.fillConvexPoly(canvas, shifted, (1,), cv2.LINE_8, 4)
    x, y, w, h = cv2.boundingRect(canvas)
    if w == 0 or h == 0:
        return 0, 0, 0, 0
    return x + int(lo[0]), y + int(lo[1]), w, h


def _eye_distance(points: FloatArray) -> float:
    right, left = _centre(points, mesh.RIGHT_EYE), _centre(points, mesh.LEFT_EYE)
    return float(np.linalg.norm(left - right))


def _kernel_size(eyes: float) -> int:
    """The line filter's kernel side: a third of an eye's height (odd)."""
    return max(3, round(0.12 * eyes)) | 1


def _lines(
    image: Frame, points: FloatArray, eyes: float | None = None
) -> tuple[npt.NDArray[np.bool_], float]:
    """Thin dark or bright lines of ``image`` (boolean) and the inter-ocular distance
    (``eyes``: already measured, on the same points before a shift)."""
    eyes = _eye_distance(points) if eyes is None else eyes
    light = cv2.cvtColor(image, cv2.COLOR_BGR2Lab)[..., 0].astype(np.float32) * (100 / 255)
    size = _kernel_size(eyes)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
    dark = cv2.morphologyEx(light, cv2.MORPH_BLACKHAT, kernel)
    bright = cv2.morphologyEx(light, cv2.MORPH_TOPHAT, kernel)
    return np.asarray((dark > LINE_CONTRAST) | (bright > LINE_CONTRAST), np.bool_), eyes


def _features(
    points: FloatArray, shape: tuple[int, int], grow: int, brows: bool = True
) -> npt.NDArray[np.bool_]:
    """The eyes and (``brows``) the brows, grown by ``grow`` pixels (their own lines are no
    frame)."""
    mask = np.zeros(shape, np.uint8)
    parts = [mesh.RIGHT_EYE, mesh.LEFT_EYE] + ([mesh.RIGHT_BROW, mesh.LEFT_BROW] if brows else [])
    for part in parts:
        hull = cv2.convexHull(np.round(points[part, :2]).astype(np.int32))
        cv2.fillConvexPoly(mask, hull, (1,))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
    return np.asarray(cv2.dilate(mask, kernel) > 0, np.bool_)


def frames_mask(image: Frame, points: FloatArray) -> FloatArray | None:
    """A soft mask (1 = a frame of the glasses) over ``image``, or None: no glasses."""
    found = frames_box(image, points)
    if found is None:
        return None
    (x0, y0, x1, y1), frames = found
    mask = np.zeros((image.shape[0], image.shape[1]), np.float32)
    mask[y0:y1, x0:x1] = frames
    return mask


def frames_box(
    image: Frame, points: FloatArray
) -> tuple[tuple[int, int, int, int], FloatArray] | None:
    """The box (x0, y0, x1, y1) around the glasses band and the frames' soft mask over it,
    or None: no glasses. The work is done on that box only (a tenth of a face's region)."""
    x, y, w, h = _band_box(points, (image.shape[0], image.shape[1]))
    pad = max(2, round(0.1 * max(w, h)))
    x0, y0 = max(0, x - pad), max(0, y - pad)
    x1, y1 = min(image.shape[1], x + w + pad), min(image.shape[0], y + h + pad)
    if x1 - x0 < 8 or y1 - y0 < 8:
        return None
    moved = np.asarray(points, np.float32).copy()
    moved[:, 0] -= x0
    moved[:, 1] -= y0
    crop = np.ascontiguousarray(image[y0:y1, x0:x1])
    eyes = float(np.linalg.norm(_centre(moved, mesh.LEFT_EYE) - _centre(moved, mesh.RIGHT_EYE)))
    factor = WORK_EYES / eyes if eyes > WORK_EYES else 1.0
    if factor < 1.0:  # found at a working size, the mask enlarged back
        small = cv2.resize(crop, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
        moved[:, :2] *= np.float32(factor)
        found = _frames_in(np.asarray(small, np.uint8), moved)
        if found is not None:
            size = (crop.shape[1], crop.shape[0])
            found = np.asarray(cv2.resize(found, size, interpolation=cv2.INTER_LINEAR), np.float32)
    else:
        found = _frames_in(crop, moved)
    return None if found is None else ((x0, y0, x1, y1), found)


def _frames_in(image: Frame, points: FloatArray) -> FloatArray | None:
    shape = (image.shape[0], image.shape[1])
    if not _evidence_found(image, points):
        return None
    lines, eyes = _lines(image, points)
    band = glasses_band(points, shape) > 0
    grow = max(1, round(0.06 * eyes))
    features = _features(points, shape, grow)
    if not has_glasses(lines, points, eyes, features):
        return None
    hard = (lines & band & ~features).astype(np.uint8)
    # Not grown: every pixel of the target's own eye region put back is identity lost (a
    # frame mask grown by 1/80 of the eye distance cost 0.02 more of the median distance).
    soft = cv2.GaussianBlur(hard.astype(np.float32), (0, 0), max(0.5, eyes / 120))
    return np.asarray(np.clip(soft * 1.5, 0.0, 1.0), np.float32)


def has_glasses(
    lines: npt.NDArray[np.bool_],
    points: FloatArray,
    eyes: float,
    features: npt.NDArray[np.bool_],
) -> bool:
    """Lines on the nose bridge (between the inner eye corners) and on the rims under the
    eyes: bare skin has neither."""
    bridge_share, rim_share = line_shares(lines, points, eyes, features)
    return bridge_share >= BRIDGE_SHARE and rim_share >= RIM_SHARE


def frame_evidence(image: Frame, points: FloatArray) -> tuple[float, float]:
    """The shares of the nose bridge's and of the rims' pixels on thin lines (what
    :func:`has_glasses` decides on): near 0 on bare skin, 0.4-0.8 under glasses."""
    lines, eyes = _lines(image, points)
    shape = (image.shape[0], image.shape[1])
    return line_shares(lines, points, eyes, _features(points, shape, max(1, round(0.06 * eyes))))


def _evidence_shapes(
    points: FloatArray, eyes: float
) -> tuple[npt.NDArray[np.int32], list[tuple[tuple[int, int], tuple[int, int]]]]:
    """Where :func:`line_shares` looks: the nose bridge's quad and the rims' ellipses
    (centre, half-axes), in whole pixels."""
    right, left = _centre(points, mesh.RIGHT_EYE), _centre(points, mesh.LEFT_EYE)
    drop = points[mesh.NOSE_TIP, :2] - (right + left) / 2
    mid = (right + left) / 2
    half = 0.12 * (left - right)
    quad = [mid - half - 0.2 * drop, mid + half - 0.2 * drop, mid + half + 0.15 * drop]
    quad += [mid - half + 0.15 * drop]
    axes = (round(0.3 * eyes), round(0.12 * eyes))
    ellipses = []
    for eye in (right, left):
        centre = eye + 0.3 * drop
        ellipses.append(((round(centre[0]), round(centre[1])), axes))
    return np.round(np.array(quad)).astype(np.int32), ellipses


def _evidence_found(image: Frame, points: FloatArray) -> bool:
    """:func:`has_glasses` over the whole of ``image``, decided on the box around the
    bridge and the rims only (most faces have no glasses, and then that is all the work):
    the box is grown by the reach of the line filter and of the features' growth, so every
    value the decision reads is the one the whole image gives."""
    eyes = _eye_distance(points)
    quad, ellipses = _evidence_shapes(points, eyes)
    corners = [quad]
    for (cx, cy), (ax, ay) in ellipses:
        corners.append(np.array([[cx - ax, cy - ay], [cx + ax, cy + ay]], np.int32))
    lo, hi = np.concatenate(corners).min(axis=0), np.concatenate(corners).max(axis=0)
    # A line at a pixel reads the image up to the kernel's side away (a closing: a dilation,
    # then an erosion); the features' growth reaches no further than that.
    grow = max(1, round(0.06 * eyes))
    reach = max(_kernel_size(eyes), grow + 1) + 1
    x0, y0 = max(0, int(lo[0]) - reach), max(0, int(lo[1]) - reach)
    x1 = min(image.shape[1], int(hi[0]) + reach + 1)
    y1 = min(image.shape[0], int(hi[1]) + reach + 1)
    if x1 - x0 < 1 or y1 - y0 < 1:
        return False
    box = np.ascontiguousarray(image[y0:y1, x0:x1])
    moved = np.asarray(points, np.float32).copy()
    moved[:, 0] -= x0
    moved[:, 1] -= y0
    lines, _ = _lines(box, moved, eyes)
    features = _features(moved, (y1 - y0, x1 - x0), grow)
    return has_glasses(lines, moved, eyes, features)


def line_shares(
    lines: npt.NDArray[np.bool_],
    points: FloatArray,
    eyes: float,
    features: npt.NDArray[np.bool_],
) -> tuple[float, float]:
    """(bridge, rims): the share of each region's pixels on ``lines``."""
    shape = lines.shape
    quad, ellipses = _evidence_shapes(points, eyes)
    bridge = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(bridge, quad, (1,))
    rims = np.zeros(shape, np.uint8)
    for centre, axes in ellipses:
        cv2.ellipse(rims, centre, axes, 0, 0, 360, (1,), -1)
    rim = (rims > 0) & ~features
    bridge_share = float(lines[bridge > 0].mean()) if bridge.any() else 0.0
    rim_share = float(lines[rim].mean()) if rim.any() else 0.0
    return bridge_share, rim_share


def remove_glasses(image: Frame, points: FloatArray) -> tuple[Frame, FloatArray | None]:
    """``image`` with the frames of its glasses painted out, and where they were (a soft
    mask, 1 = painted: the swap shows the target's own skin there, not the paint, which
    smears: on the man with glasses his own photo painted out is 0.44 from the photo for the
    recogniser, and every swap from it showed a grey band over the eyes and a pale bridge);
    ``image`` itself and None when there are none. The paint-out reaches ``PAINT_GROW`` of
    the eye distance past the lines found (a light frame's rim is found only in part; its
    soft edge, its shadow and the lens's edge go too), never into the eyes themselves: the
    source's eyes are what the swap is for."""
    frames = frames_mask(image, points)
    if frames is None:
        return image, None
    eyes = float(np.linalg.norm(_centre(points, mesh.LEFT_EYE) - _centre(points, mesh.RIGHT_EYE)))
    size = max(1, round(eyes * PAINT_GROW))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * size + 1, 2 * size + 1))
    hard = cv2.dilate((frames > 0.1).astype(np.uint8), kernel)
    shape = (image.shape[0], image.shape[1])
    hard[_features(points, shape, max(1, round(0.02 * eyes)), brows=False)] = 0
    painted = cv2.inpaint(image, hard, max(3.0, eyes / 15), cv2.INPAINT_TELEA)
    hole = cv2.GaussianBlur(hard.astype(np.float32), (0, 0), max(0.5, eyes / 40))
    return np.asarray(painted, np.uint8), np.asarray(hole, np.float32)


def remove_glasses_in_place(image: Frame, points: FloatArray) -> FloatArray | None:
    """Paint a face's glasses out of ``image`` in place (``remove_glasses`` on the box around
    the glasses band only) and return where the paint is (a soft mask over ``image``, 1 =
    painted); None when there are none. A target's, for the option ``glasses`` ``remove``:
    the swap then covers the painted face and takes its broad shading from the skin around
    the paint, not from the paint (a dark frame smeared by the inpainting left a grey haze
    over the eyes), and the frames' parts off the face are painted over."""
    found = frames_box(image, points)
    if found is None:
        return None
    x0, y0, x1, y1 = found[0]
    eyes = float(np.linalg.norm(_centre(points, mesh.LEFT_EYE) - _centre(points, mesh.RIGHT_EYE)))
    margin = round(eyes * (PAINT_GROW + 1 / 15)) + 2  # the paint's reach and its radius
    x0, y0 = max(0, x0 - margin), max(0, y0 - margin)
    x1, y1 = min(image.shape[1], x1 + margin), min(image.shape[0], y1 + margin)
    moved = np.asarray(points, np.float32).copy()
    moved[:, 0] -= x0
    moved[:, 1] -= y0
    painted, hole = remove_glasses(np.ascontiguousarray(image[y0:y1, x0:x1]), moved)
    image[y0:y1, x0:x1] = painted
    where = np.zeros((image.shape[0], image.shape[1]), np.float32)
    if hole is not None:
        where[y0:y1, x0:x1] = hole
    return where
