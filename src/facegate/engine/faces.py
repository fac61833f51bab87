"""Face analysis on the CPU with mediapipe 0.10.21's built-in models.

Detection: mediapipe's full-range detector model (run by LiteRT as mediapipe's graph runs it:
``networks.blazeface``) over the whole frame plus a grid of overlapping tiles (it sees a 192 px
letterboxed copy, so small faces of a group photo only show up in a tile), boxes merged with
NMS. Then the 478-point mesh on a square crop around each
box (1.8× the box), mapped back to frame pixels. A detection whose mesh fails, or whose mesh
lands somewhere else than the box, is dropped: that second opinion is what removes the
detector's false positives (a cat's face). When the detector finds nothing, ``FaceMesh`` runs
on the whole frame: it catches the tight, already-cropped faces the detector misses.

Tiles cost more detector runs (~4 ms of CPU each; 2 rows, and as many columns as keep them about
square: 6 tiles on a landscape photo or a 16:9 frame): with ``tile_policy="auto"`` (default) they
are skipped when every face the whole-frame pass found is large (a close-up, one speaker).
The tiles' detector runs, and the meshes of the faces found, are independent: they run side
by side on ``AnalyserOptions.threads`` threads (mediapipe releases the GIL while a graph
runs): a group photo's analysis takes ~75 ms with two threads on a 2-core machine, ~120 ms
with one.

Measured on the 19 photos of shared/data/faces, each upscaled to 1080 px long side
(tests/engine/test_faces.py): every face of the frontal and group photos found (2, 3, 4, 6, 7,
8 and 1 per single-face photo), none on the cat or the landscape. The grayscale profile photo
(a man half hidden by a camera) is the documented hard case: at 1080 px it *is* found, with a
yaw of ~50 degrees; so is every face of the 6-face photo on a 1920x1080 canvas (its turned
man was missed with 2×2 tiles, which are 1097×617 px there). Mesh crops of 256 px match
384 px ones within 0.1-0.5 % of the inter-ocular distance; landmarks on a shifted/scaled copy
agree within ~0.5-1.3 %.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.descriptor import (
    average_embedding,
    compute_embedding,
    estimate_pose,
    face_distance,
)
from facegate.engine.errors import InvalidOptions
from facegate.engine.mediapipe_import import mp
from facegate.engine.networks.blazeface import BlazeFace, Detection
from facegate.engine.types import Face, FloatArray, Frame

__all__ = [
    "AnalyserOptions",
    "FaceAnalyser",
    "FaceOrder",
    "average_embedding",
    "face_distance",
    "filter_faces",
    "nms",
    "sort_faces",
]

T = TypeVar("T")
R = TypeVar("R")

FaceOrder = Literal[
    "large-small",
    "small-large",
    "left-right",
    "right-left",
    "top-bottom",
    "bottom-top",
    "best-worst",
    "worst-best",
]
FACE_ORDERS: tuple[str, ...] = get_args(FaceOrder)


@dataclass(frozen=True)
class AnalyserOptions:
    """How faces are found. Defaults are the set-up measured in ENGINE-NOTES (42 of 42 faces),
    with tiles about square on wide frames (``tile_grid``) where it used 2×2."""

    min_score: float = 0.5  # the detector itself reports nothing under 0.6 (blazeface)
    min_size: float = 0.0  # px, the shorter side of the box
    # Columns, rows of overlapping tiles; (1, 1) = the whole frame only. None: TILE_ROWS across
    # the shorter side and as many along the longer as keep every tile at most
    # TILE_ASPECT times as long as it is wide (``tile_grid``).
    tiles: tuple[int, int] | None = None
    tile_overlap: float = 0.25  # fraction of a tile shared with its neighbour
    tile_max_side: int = 640  # tiles are shrunk to this before detection (the model sees 192)
    # "auto" skips the tiles when the whole-frame pass already found faces and all of them are
    # large (shorter box side >= large_face_fraction of the frame's shorter side): a close-up
    # or a single speaker, where the tiles cost 4 more detector runs (~20 ms) for nothing.
    # The price: a tiny face next to a large one is missed. "always" never skips.
    tile_policy: Literal["auto", "always"] = "auto"
    large_face_fraction: float = 0.2
    nms_iou: float = 0.3
    mesh_crop_scale: float = 1.8
    mesh_crop_size: int = 256
    max_faces: int = 0  # 0 = no limit; otherwise the first N after ordering
    order: FaceOrder = "large-small"
    fallback_max_faces: int = 4  # whole-frame FaceMesh when the detector finds nothing
    # Threads one frame's analysis may use for its tiles and meshes (each with its own
    # graphs); 1 runs everything on the calling thread.
    threads: int = min(2, os.cpu_count() or 1)


class _Graphs:
    """The mediapipe graphs of one thread (they are not safe to share between threads)."""

    def __init__(self, options: AnalyserOptions) -> None:
        solutions: Any = mp.solutions
        self.detector = BlazeFace(options.min_score)
        self.crop_mesh = solutions.face_mesh.FaceMesh(
            static_image_mode=True, refine_landmarks=True, max_num_faces=1
        )
        self._solutions = solutions
        self._fallback_max_faces = options.fallback_max_faces
        self._frame_mesh: Any = None

    @property
    def frame_mesh(self) -> Any:
        """Whole-frame FaceMesh, built on first use (most frames never need the fallback)."""
        if self._frame_mesh is None:
            self._frame_mesh = self._solutions.face_mesh.FaceMesh(
                static_image_mode=True,
                refine_landmarks=True,
                max_num_faces=self._fallback_max_faces,
            )
        return self._frame_mesh

    def close(self) -> None:
        for graph in (self.crop_mesh, self._frame_mesh):
            if graph is not None:
                graph.close()


#: Threads of an analyser that detect beside a followed video's frames (``aside``).
ASIDE_THREADS = 2


class FaceAnalyser:
    """Finds faces and their 478-point mesh. Thread-safe: each thread gets its own graphs.

    One analyser may serve every job of a process; it holds no per-job state. Call ``close()``
    once no thread uses it any more. Its graphs and threads belong to the process that made
    them: a forked child makes its own analyser.
    """

    def __init__(self, options: AnalyserOptions | None = None) -> None:
        self.options = options or AnalyserOptions()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all_graphs: list[_Graphs] = []
        self._pool: ThreadPoolExecutor | None = None
        self._aside: ThreadPoolExecutor | None = None

    def _graphs(self) -> _Graphs:
        graphs: _Graphs | None = getattr(self._local, "graphs", None)
        if graphs is None:
            graphs = _Graphs(self.options)
            self._local.graphs = graphs
            with self._lock:
                self._all_graphs.append(graphs)
        return graphs

    def close(self) -> None:
        """Release every thread's graphs (call when no thread is analysing)."""
        with self._lock:
            pools = [self._pool, self._aside]
            self._pool = self._aside = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True)
        with self._lock:
            for graphs in self._all_graphs:
                graphs.close()
            self._all_graphs.clear()
        self._local = threading.local()

    def each(self, work: Callable[[_Graphs, T], R], items: Sequence[T]) -> list[R]:
        """``work(graphs, item)`` for every item, in order, spread over the analyser's
        threads (each thread uses its own graphs)."""
        if self.options.threads <= 1 or len(items) <= 1:
            graphs = self._graphs()
            return [work(graphs, item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.options.threads, thread_name_prefix="face-analysis"
                )
            pool = self._pool
        return list(pool.map(lambda item: work(self._graphs(), item), items))

    def aside(self) -> ThreadPoolExecutor:
        """The analyser's ``tracker-detect`` threads (``TrackerOptions.detect_aside``): made
        on first use and kept, so each holds one set of graphs however many videos or
        streams use them."""
        with self._lock:
            if self._aside is None:
                self._aside = ThreadPoolExecutor(ASIDE_THREADS, thread_name_prefix="tracker-detect")
            return self._aside

    def analyse(self, frame: Frame, timings: dict[str, float] | None = None) -> list[Face]:
        """Every face of a BGR frame, filtered and ordered by the options. ``timings``, when
        given, receives the seconds of its two stages (``detect``, ``mesh``)."""
        started = time.perf_counter()
        graphs = self._graphs()
        pyramid = Pyramid(frame)
        found = detect_faces(graphs, pyramid, self.options, self.each)
        detections = nms(found, self.options.nms_iou)
        detected = time.perf_counter()
        meshed = self.each(lambda g, det: mesh_face(g, frame, det, self.options), detections)
        faces = [face for face in meshed if face is not None]
        if not detections:
            faces = mesh_whole_frame(graphs, pyramid.rgb(0), self.options)
        # Two detections of one face (tile seams) give two meshes on the same spot.
        faces = _dedupe(faces, self.options.nms_iou)
        faces = filter_faces(faces, self.options.min_size, self.options.min_score)
        faces = sort_faces(faces, self.options.order)
        if self.options.max_faces > 0:
            faces = faces[: self.options.max_faces]
        if timings is not None:
            timings["detect"] = timings.get("detect", 0.0) + detected - started
            timings["mesh"] = timings.get("mesh", 0.0) + time.perf_counter() - detected
        return faces


#: The tile grid's default (``AnalyserOptions.tiles`` None): the detector sees each tile as a
#: 192 px square, letterboxed, so a wide tile wastes the model's height. With 2×2 tiles a
#: 1920×1080 frame gives 1097×617 px tiles; the 6-face photo on that canvas lost its most
#: turned face (87 px wide at 1080p), which 3×2 tiles (768×617) find.
TILE_ROWS = 2
TILE_ASPECT = 1.25


def tile_grid(
    width: int, height: int, tiles: tuple[int, int] | None, overlap: float
) -> tuple[int, int]:
    """(columns, rows) of the tiles of a ``width × height`` frame (see ``AnalyserOptions``)."""
    if tiles is not None:
        return tiles
    short, long = sorted((width, height))
    side = short / (TILE_ROWS - (TILE_ROWS - 1) * overlap)  # a tile's size across
    # n tiles along the long side are long / (n - (n - 1) * overlap) long.
    along = max(TILE_ROWS, int(np.ceil((long / (TILE_ASPECT * side) - overlap) / (1 - overlap))))
    return (along, TILE_ROWS) if width >= height else (TILE_ROWS, along)


def _tile_windows(
    width: int, height: int, tiles: tuple[int, int] | None, overlap: float
) -> list[tuple[int, int, int, int]]:
    columns, rows = tile_grid(width, height, tiles, overlap)
    if columns <= 1 and rows <= 1:
        return []
    windows = []
    tile_w = int(np.ceil(width / (columns - (columns - 1) * overlap)))
    tile_h = int(np.ceil(height / (rows - (rows - 1) * overlap)))
    for row in range(rows):
        for column in range(columns):
            x0 = 0 if columns == 1 else round(column * (width - tile_w) / (columns - 1))
            y0 = 0 if rows == 1 else round(row * (height - tile_h) / (rows - 1))
            windows.append((x0, y0, min(width, x0 + tile_w), min(height, y0 + tile_h)))
    return windows


class Pyramid:
    """A BGR frame and its RGB halvings (INTER_AREA at exactly 2x: ~0.4 ms for 1080p), built
    on demand. The detector sees a 192 px letterboxed copy, so the whole frame and every tile
    are cut from the first level that is small enough: one cheap halving replaces a
    non-integer INTER_AREA resize of the full frame per detector run (~3 ms each) and the
    colour conversion of the whole 1080p frame."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self._levels: dict[int, Frame] = {}
        self._lock = threading.RLock()  # tiles are detected from several threads

    def rgb(self, level: int) -> Frame:
        """The frame halved ``level`` times (sides rounded up), in RGB."""
        with self._lock:
            return self._rgb(level)

    def _rgb(self, level: int) -> Frame:
        if level not in self._levels:
            if level == 0:
                image = cv2.cvtColor(self.frame, cv2.COLOR_BGR2RGB)
            else:
                # Halve the BGR frame first: the colour conversion then runs on 1/4 the pixels.
                above = self.frame if level == 1 else self._rgb(level - 1)
                height, width = above.shape[:2]
                size = ((width + 1) // 2, (height + 1) // 2)
                image = cv2.resize(above, size, interpolation=cv2.INTER_AREA)
                if level == 1:
                    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
            self._levels[level] = np.asarray(image, dtype=np.uint8)
        return self._levels[level]

    def detect(
        self, detector: BlazeFace, window: tuple[int, int, int, int], max_side: int
    ) -> list[Detection]:
        """Detections in a window (x0, y0, x1, y1) of the frame, boxes in frame pixels, on the
        first level where the window's long side is at most ``max_side``."""
        x0, y0, x1, y1 = window
        level = 0
        while max(x1 - x0, y1 - y0) > max_side * 2**level and min(x1 - x0, y1 - y0) >> level > 1:
            level += 1
        image = self.rgb(level)
        height, width = self.frame.shape[:2]
        sx, sy = image.shape[1] / width, image.shape[0] / height
        lx0, ly0 = int(x0 * sx), int(y0 * sy)
        lx1, ly1 = max(lx0 + 1, round(x1 * sx)), max(ly0 + 1, round(y1 * sy))
        found = detector.detect(image[ly0:ly1, lx0:lx1])  # a view: the warp reads it in place
        offset = np.array([lx0, ly0, lx0, ly0], dtype=np.float64)
        scale = np.array([1 / sx, 1 / sy, 1 / sx, 1 / sy])
        return [Detection((det.box + offset) * scale, det.score) for det in found]


Window = tuple[int, int, int, int]
#: How ``detect_faces`` runs the tiles: ``FaceAnalyser.each`` (several threads) or in turn.
EachFn = Callable[[Callable[[_Graphs, Window], list[Detection]], Sequence[Window]], list[Any]]


def detect_faces(
    graphs: _Graphs, pyramid: Pyramid, options: AnalyserOptions, each: EachFn | None = None
) -> list[Detection]:
    """Full-range detector on the whole frame and on each overlapping tile (boxes not merged).
    ``each`` runs the tiles (the analyser's threads); by default one after another."""
    height, width = pyramid.frame.shape[:2]
    found = pyramid.detect(graphs.detector, (0, 0, width, height), options.tile_max_side)
    large = options.large_face_fraction * min(height, width)
    if options.tile_policy == "auto" and found:
        if all(min(d.box[2] - d.box[0], d.box[3] - d.box[1]) >= large for d in found):
            return found
    windows = _tile_windows(width, height, options.tiles, options.tile_overlap)

    def tile(g: _Graphs, window: Window) -> list[Detection]:
        return pyramid.detect(g.detector, window, options.tile_max_side)

    per_tile = each(tile, windows) if each is not None else [tile(graphs, w) for w in windows]
    for detections in per_tile:
        found.extend(detections)
    return found


def box_iou(box: npt.ArrayLike, boxes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """IoU of one (4,) box with each row of an (N, 4) array."""
    a = np.asarray(box, dtype=np.float64)
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    inter_w = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    inter_h = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = inter_w * inter_h
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return np.asarray(inter / np.maximum(area_a + area_b - inter, 1e-9), dtype=np.float64)


def nms(detections: Sequence[Detection], iou: float) -> list[Detection]:
    """Greedy non-maximum suppression, best score first."""
    kept: list[Detection] = []
    for det in sorted(detections, key=lambda d: -d.score):
        if not kept or box_iou(det.box, [k.box for k in kept]).max() <= iou:
            kept.append(det)
    return kept


def square_crop(
    image: Frame, box: npt.NDArray[np.float64], scale: float, size: int
) -> tuple[Frame, float, float, float]:
    """A square crop of side ``scale × box`` around the box centre, padded where it leaves the
    frame, resized to ``size`` (the BGR or RGB image as it came). Returns (crop, x0, y0, side)
    in frame pixels. The analyser's mesh crops and the tracker's (``tracking.CropMesh``)."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    side = max(box[2] - box[0], box[3] - box[1]) * scale
    x0, y0 = cx - side / 2, cy - side / 2
    # One affine warp does crop + pad + resize in a single pass.
    k = size / side
    matrix = np.array([[k, 0, -x0 * k], [0, k, -y0 * k]], dtype=np.float64)
    crop = cv2.warpAffine(
        image,
        matrix,
        (size, size),
        # linear both ways: warpAffine has no area mode (INTER_AREA samples linearly,
        # the same bytes), so a large face's crop is sampled, not averaged
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
    )
    return np.asarray(crop, dtype=np.uint8), float(x0), float(y0), float(side)


def _landmarks(result_face: Any, x0: float, y0: float, width: float, height: float) -> FloatArray:
    points = np.array([(p.x, p.y, p.z) for p in result_face.landmark], dtype=np.float32)
    # mediapipe's z uses the scale of x (normalised by the image width).
    points *= np.array([width, height, width], dtype=np.float32)
    points[:, 0] += x0
    points[:, 1] += y0
    return points


def _agrees(landmarks: FloatArray, box: npt.NDArray[np.float64]) -> bool:
    """Does the mesh sit on the detected box? (centre within half a box, similar size)"""
    mesh_box = _mesh_box(landmarks)
    size = max(box[2] - box[0], box[3] - box[1])
    mesh_size = max(mesh_box[2] - mesh_box[0], mesh_box[3] - mesh_box[1])
    centre_shift = np.hypot(
        (mesh_box[0] + mesh_box[2] - box[0] - box[2]) / 2,
        (mesh_box[1] + mesh_box[3] - box[1] - box[3]) / 2,
    )
    return bool(centre_shift < 0.5 * size and 0.6 < mesh_size / max(size, 1e-6) < 2.5)


def _mesh_box(landmarks: FloatArray) -> npt.NDArray[np.float64]:
    xy = landmarks[:, :2].astype(np.float64)
    return np.concatenate([xy.min(axis=0), xy.max(axis=0)])


def mesh_face(
    graphs: _Graphs, frame: Frame, detection: Detection, options: AnalyserOptions
) -> Face | None:
    """The mesh on the detection's crop of a BGR frame, or None when it fails or lands off the
    box."""
    crop, x0, y0, side = square_crop(
        frame, detection.box, options.mesh_crop_scale, options.mesh_crop_size
    )
    # Cropped from the BGR frame: only the crop's pixels get converted.
    result = graphs.crop_mesh.process(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB))
    if not result.multi_face_landmarks:
        return None
    landmarks = _landmarks(result.multi_face_landmarks[0], x0, y0, side, side)
    if not _agrees(landmarks, detection.box):
        return None
    return build_face(landmarks, detection.score, detection.box)


def mesh_whole_frame(graphs: _Graphs, rgb: Frame, options: AnalyserOptions) -> list[Face]:
    """Fallback for tight crops the detector misses: FaceMesh's own detector on the frame.
    FaceMesh reports no score; its detector's threshold (0.5) is the floor every face passed."""
    result = graphs.frame_mesh.process(rgb)
    height, width = rgb.shape[:2]
    faces = []
    for found in result.multi_face_landmarks or ():
        landmarks = _landmarks(found, 0.0, 0.0, width, height)
        faces.append(build_face(landmarks, 0.5, _mesh_box(landmarks)))
    return faces


def build_face(landmarks: FloatArray, score: float, box: npt.ArrayLike) -> Face:
    """A Face from frame-pixel landmarks: 5 key points, pose and geometric embedding."""
    eye_left_image = landmarks[mesh.RIGHT_EYE, :2].mean(axis=0)  # subject's right eye
    eye_right_image = landmarks[mesh.LEFT_EYE, :2].mean(axis=0)
    keypoints5 = np.stack(
        [
            eye_left_image,
            eye_right_image,
            landmarks[mesh.NOSE_TIP, :2],
            landmarks[mesh.MOUTH_RIGHT, :2],
            landmarks[mesh.MOUTH_LEFT, :2],
        ]
    ).astype(np.float32)
    return Face(
        box=np.asarray(box, dtype=np.float32).reshape(4).copy(),
        score=float(score),
        keypoints5=keypoints5,
        landmarks=landmarks,
        pose=estimate_pose(landmarks),
        embedding=compute_embedding(landmarks),
    )


def _dedupe(faces: list[Face], iou: float) -> list[Face]:
    kept: list[Face] = []
    for face in sorted(faces, key=lambda f: -f.score):
        box = _mesh_box(face.landmarks)
        if not kept or box_iou(box, [_mesh_box(k.landmarks) for k in kept]).max() <= iou:
            kept.append(face)
    return kept


def filter_faces(
    faces: Iterable[Face], min_size: float = 0.0, min_score: float = 0.0
) -> list[Face]:
    """Faces whose box's shorter side is at least ``min_size`` px and score ``min_score``."""
    return [
        face
        for face in faces
        if min(face.width, face.height) >= min_size and face.score >= min_score
    ]


def sort_faces(faces: Iterable[Face], order: str) -> list[Face]:
    """Faces in FaceFusion's selector orders (stable for ties)."""
    keys = {
        "large-small": lambda f: -f.width * f.height,
        "small-large": lambda f: f.width * f.height,
        "left-right": lambda f: float(f.box[0]),
        "right-left": lambda f: -float(f.box[2]),
        "top-bottom": lambda f: float(f.box[1]),
        "bottom-top": lambda f: -float(f.box[3]),
        "best-worst": lambda f: -f.score,
        "worst-best": lambda f: f.score,
    }
    if order not in keys:
        raise InvalidOptions(f"unknown face order {order!r}; one of {', '.join(FACE_ORDERS)}")
    return sorted(faces, key=keys[order])
