"""Occlusion masks: what stays in front of a target face (``mask_types`` ``occlusion``).

Two cues, each for what the other misses, combined and limited to the face:

- **hands**: mediapipe 0.10.21's palm detector + hand landmark model (shipped in the wheel)
  on a crop around the face; each hand found becomes its palm polygon and thick finger
  segments. A hand is skin-coloured, so the colour cue below cannot see it.
- **colour**: the target's own skin, sampled at the mesh's skin vertices (the nearer half
  around their median, so an occluder over a third of them moves nothing), and every face
  pixel far from it in L*a*b* (lightness weighs less: shading varies over a face, hue
  hardly). The eyes, brows, lips and nostrils differ by nature, so a region far from the
  skin counts only when most of it lies outside them and enough of it lies inside the face's
  core: an object over the mouth is kept whole; the eyes, a shaded jaw line are not. This
  finds objects, hair strands, a microphone, dark frames of glasses (kept as the target's,
  as FaceFusion's occluder model does); it cannot find an object of the face's own colour.

``OcclusionDetector.mask`` answers a soft mask (1 = occluder, keep the frame's pixels) over a
region of the frame; ``face_swapper`` puts those pixels back after the backend pasted its
face, so it holds for every backend.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.mediapipe_import import mp
from facegate.engine.swap.filters import gaussian_blur
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Face, Frame, frozen

#: The region searched: the landmarks' box grown by this fraction of its size on each side
#: for hands (a hand reaching in is found whole), and the mask returned over the same box.
HAND_MARGIN = 0.5
#: The hand model's crop is resized so its longer side is this many pixels (the palm
#: detector works at 192 px; small faces' hands are found only when enlarged).
HAND_CROP = 320
#: Finger thickness as a fraction of the palm's length (wrist → middle-finger knuckle).
FINGER_WIDTH = 0.3
#: Colour distance (L*a*b*, lightness weighted LIGHTNESS_WEIGHT: shading varies over a face,
#: hue hardly) from the skin beyond which a pixel is not skin: at least MIN_DISTANCE, or
#: SPREAD_FACTOR times the skin's own spread. The skin is the nearer half of the skin vertices
#: around their median (an occluder covering a third of them moves neither).
LIGHTNESS_WEIGHT = 0.3
MIN_DISTANCE = 16.0
SPREAD_FACTOR = 2.5
#: A region far from the skin is an occluder when at most FEATURE_SHARE of it lies in the
#: eyes, brows, lips or nostrils, and more than MIN_AREA of the face lies inside the face's
#: core (the face eroded by CORE_MARGIN of its width): thin bands of shade or hair along the
#: jaw and temples are no occluder, an object reaching over the face is.
FEATURE_SHARE = 0.5
MIN_AREA = 0.01
CORE_MARGIN = 0.08

#: The mesh's vertices that are not skin: eyes, brows, lips (their polygons, grown).
_FEATURES = (
    mesh.LEFT_EYE,
    mesh.RIGHT_EYE,
    mesh.LEFT_BROW,
    mesh.RIGHT_BROW,
    mesh.LIPS_OUTER,
)
#: Nostrils: around the alar base and the columella (the dark holes under the nose tip).
_NOSTRILS = frozen(np.array([98, 327, 2, 79, 309, 64, 294, 20, 250, 60, 290], np.int32))

# mediapipe's hand landmarks: the palm (wrist and the four knuckles) and the finger chains.
_PALM = frozen(np.array([0, 1, 5, 9, 13, 17], np.int32))
_FINGERS = ((0, 1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 20))


@dataclass(frozen=True)
class Occlusion:
    """A soft occluder mask (float32, 1 = in front of the face) over ``frame[y0:y1, x0:x1]``."""

    box: tuple[int, int, int, int]
    mask: FloatArray


def search_box(face: Face, shape: tuple[int, ...], margin: float) -> tuple[int, int, int, int]:
    """The landmarks' box grown by ``margin`` of its size on each side, inside the frame."""
    lo, hi = face.landmarks[:, :2].min(axis=0), face.landmarks[:, :2].max(axis=0)
    pad = (hi - lo) * margin
    x0, y0 = np.floor(lo - pad).astype(int)
    x1, y1 = np.ceil(hi + pad).astype(int)
    return max(0, int(x0)), max(0, int(y0)), min(shape[1], int(x1)), min(shape[0], int(y1))


def _fill(points: FloatArray, indices: npt.NDArray[np.int32], shape: tuple[int, int]) -> FloatArray:
    mask = np.zeros(shape, np.uint8)
    polygon = np.round(points[indices, :2] * 16).astype(np.int32)
    cv2.fillPoly(mask, [polygon], (255,), cv2.LINE_8, 4)
    return (mask > 0).astype(np.float32)


def hand_mask(hands: list[FloatArray], shape: tuple[int, int]) -> FloatArray:
    """1 over each hand (21 landmarks in region pixels): palm polygon and thick fingers."""
    mask = np.zeros(shape, np.uint8)
    for points in hands:
        palm = float(np.linalg.norm(points[9, :2] - points[0, :2]))
        width = max(2, round(FINGER_WIDTH * palm))
        hull = cv2.convexHull(np.round(points[_PALM, :2] * 16).astype(np.int32))
        cv2.fillConvexPoly(mask, hull, (255,), cv2.LINE_8, 4)
        for chain in _FINGERS:
            line = np.round(points[list(chain), :2]).astype(np.int32)
            cv2.polylines(mask, [line], False, (255,), width, cv2.LINE_8)
            for x, y in line:
                cv2.circle(mask, (int(x), int(y)), width // 2, (255,), -1)
    return (mask > 0).astype(np.float32)


def colour_mask(region: Frame, points: FloatArray, face: FloatArray) -> FloatArray:
    """1 where the face (hard mask ``face``) is far from the target's own skin colour and the
    far region lies mostly outside the eyes, brows, lips and nostrils (see the module)."""
    shape = (region.shape[0], region.shape[1])
    width = float(np.ptp(points[mesh.FACE_OVAL, 0]))
    lab = cv2.cvtColor(region, cv2.COLOR_BGR2LAB).astype(np.float32)
    smooth = cv2.GaussianBlur(lab, (0, 0), max(0.8, 0.006 * width))
    features = np.zeros(shape, np.float32)
    for loop in _FEATURES:
        features = np.maximum(features, _fill(points, loop, shape))
    grow = max(1, round(0.035 * width))
    features = np.asarray(
        cv2.dilate(features, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)), np.float32
    )
    for index in _NOSTRILS:
        x, y = points[index, :2]
        cv2.circle(features, (round(float(x)), round(float(y))), grow, (1.0,), -1)
    # The skin: the mesh's vertices inside the face and away from the features.
    h, w = shape
    xy = np.round(points[:, :2]).astype(int)
    inside = (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)
    xy = xy[inside]
    skin_vertices = xy[(face[xy[:, 1], xy[:, 0]] > 0) & (features[xy[:, 1], xy[:, 0]] == 0)]
    if len(skin_vertices) < 20:
        return np.zeros(shape, np.float32)
    weights = np.array([LIGHTNESS_WEIGHT, 1.0, 1.0], np.float32)
    samples = smooth[skin_vertices[:, 1], skin_vertices[:, 0]] * weights
    near = np.linalg.norm(samples - np.median(samples, axis=0), axis=1)
    skin = samples[near <= np.median(near)]
    centre = skin.mean(axis=0)
    spread = float(np.quantile(np.linalg.norm(skin - centre, axis=1), 0.9))
    limit = max(MIN_DISTANCE, SPREAD_FACTOR * spread)
    distance = np.linalg.norm(smooth * weights - centre, axis=2)
    far = ((distance > limit) & (face > 0)).astype(np.uint8)
    far = np.asarray(cv2.morphologyEx(far, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)), np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(far, connectivity=8)
    if count <= 1:
        return np.zeros(shape, np.float32)
    area = stats[1:, cv2.CC_STAT_AREA].astype(np.float64)
    in_features = np.bincount(labels.ravel(), weights=features.ravel(), minlength=count)[1:]
    erode = max(1, round(CORE_MARGIN * width))
    core = cv2.erode(face, np.ones((2 * erode + 1, 2 * erode + 1), np.uint8))
    in_core = np.bincount(labels.ravel(), weights=np.ravel(core), minlength=count)[1:]
    face_area = max(float(face.sum()), 1.0)
    keep = (in_features <= FEATURE_SHARE * area) & (in_core >= MIN_AREA * face_area)
    lookup = np.concatenate([[0.0], keep.astype(np.float32)]).astype(np.float32)
    return np.asarray(lookup[labels], np.float32)


class OcclusionDetector:
    """Finds occluders in front of faces. Thread-safe: each thread gets its own hand graph
    (mediapipe graphs are not safe to share); one detector serves every job of a process."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._graphs: list[Any] = []

    def _hands(self) -> Any:
        graph = getattr(self._local, "hands", None)
        if graph is None:
            solutions: Any = mp.solutions
            graph = solutions.hands.Hands(
                static_image_mode=True,
                max_num_hands=2,
                model_complexity=1,
                min_detection_confidence=0.5,
            )
            self._local.hands = graph
            with self._lock:
                self._graphs.append(graph)
        return graph

    def find_hands(self, region: Frame) -> list[FloatArray]:
        """Each hand's 21 landmarks (x, y in ``region`` pixels)."""
        h, w = region.shape[:2]
        scale = HAND_CROP / max(h, w)
        image = region
        if abs(scale - 1.0) > 0.05:
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            interpolation = cv2.INTER_AREA if scale < 1.0 else cv2.INTER_LINEAR
            image = np.asarray(cv2.resize(region, size, interpolation=interpolation), np.uint8)
        result = self._hands().process(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
        found: list[FloatArray] = []
        for hand in result.multi_hand_landmarks or []:
            xy = np.array([[p.x * w, p.y * h] for p in hand.landmark], np.float32)
            found.append(xy)
        return found

    def mask(self, frame: Frame, face: Face) -> Occlusion:
        """The occluders in front of ``face`` in ``frame`` (the frame before any swap)."""
        x0, y0, x1, y1 = search_box(face, frame.shape, HAND_MARGIN)
        region = np.ascontiguousarray(frame[y0:y1, x0:x1])
        shape = (y1 - y0, x1 - x0)
        points = (face.landmarks[:, :2] - np.array([x0, y0], np.float32)).astype(np.float32)
        face_area = _fill(points, mesh.FACE_OVAL, shape)
        occluder = colour_mask(region, points, face_area)
        hands = self.find_hands(region)
        if hands:
            occluder = np.maximum(occluder, hand_mask(hands, shape))
        width = float(np.ptp(points[mesh.FACE_OVAL, 0]))
        grow = max(1, round(0.01 * width))
        occluder = np.asarray(
            cv2.dilate(occluder, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)), np.float32
        )
        soft = gaussian_blur(occluder, max(0.5, 0.008 * width))
        return Occlusion((x0, y0, x1, y1), np.clip(soft, 0.0, 1.0).astype(np.float32))

    def close(self) -> None:
        with self._lock:
            graphs, self._graphs = self._graphs, []
        for graph in graphs:
            graph.close()


def keep_occluders(swapped: Frame, original: Frame, occlusion: Occlusion) -> Frame:
    """``swapped`` (in place) with the occluders' pixels of ``original`` put back."""
    x0, y0, x1, y1 = occlusion.box
    alpha = occlusion.mask[..., None]
    before = original[y0:y1, x0:x1].astype(np.float32)
    after = swapped[y0:y1, x0:x1].astype(np.float32)
    mixed = after + (before - after) * alpha
    swapped[y0:y1, x0:x1] = np.clip(np.rint(mixed), 0, 255).astype(np.uint8)
    return swapped
