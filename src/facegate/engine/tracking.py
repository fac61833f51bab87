"""Face tracking for video: detect on keyframes, follow landmarks in between, smooth them.

Full detection (``FaceAnalyser.analyse``: tiled detector + mesh) runs every ``detect_every``
frames, more often while no face is tracked, and at once when a track is lost. Between
keyframes each face is followed by running the mesh on a square crop around its landmarks in
the previous frame: the crop moves with the face, so the mesh sees the face in the same place
and size every frame (ENGINE-NOTES: this missed 0 of 90 frames where mediapipe's own tracking
missed 9), and costs one mesh pass per face instead of a detection over the frame.

Each track has its own mesh graph in mediapipe's tracking mode (``static_image_mode=False``):
fed that track's consecutive crops, it places its region from the previous landmarks and skips
its own face detector, which static mode runs inside every crop (benchmarks/video_bench.py:
the mesh stage is ~1.5x cheaper). The crop is 192 px, the mesh model's own input size, so it
is not resized twice. Our crop placement and re-detection on keyframes and on loss stay the
safety net, so mediapipe's tracking misses (ENGINE-NOTES) cost a keyframe, not a lost face.

Landmarks are smoothed with a One-Euro filter per track (Casiez et al., CHI 2012): a low-pass
whose cut-off rises with speed, so a still face does not jitter and a moving one does not lag.
The filter's speed is the whole face's (mean over landmarks), so the mesh moves as one piece.

Each track keeps its ``track_id`` for as long as it is followed, and a face re-found right after
a loss near where it was lost gets its old id back, so selection follows the same person.
A tracker holds per-video state: use one per video, from one thread.
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.faces import FaceAnalyser, box_iou, build_face, square_crop
from facegate.engine.mediapipe_import import mp
from facegate.engine.types import Face, FloatArray, Frame

Box = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TrackerOptions:
    """Tuning of detection cadence, the tracking crop and the One-Euro smoothing."""

    fps: float = 30.0
    detect_every: int = 15
    detect_every_empty: int = 5
    crop_scale: float = 1.5  # of the mesh box (which already reaches the hairline)
    crop_size: int = 192  # the mesh model's input size: no second resize inside mediapipe
    #: one mediapipe graph per track in its tracking mode (False: static mode, every crop
    #: runs mediapipe's detector too; kept for benchmarks and as a fallback switch)
    mesh_tracking: bool = True
    min_cutoff: float = 0.8  # Hz: smoothing of a still face
    beta: float = 0.04  # cut-off added per px/s of speed
    d_cutoff: float = 1.0  # Hz: smoothing of the speed estimate
    match_iou: float = 0.3
    reacquire_frames: int = 15  # a lost id may be given back this many frames later
    max_tracks: int = 8
    #: detection runs on the process's tracker-detect threads (their analyser graphs serve
    #: every tracker, not one set per calling thread); a keyframe's detection while every
    #: face is followed does not hold up its frame: its new faces join a few frames later
    #: (a live stream). With no face followed, or one lost, the frame waits for it, as before
    detect_aside: bool = False


class OneEuroFilter:
    """One-Euro filter over an array of points, with one speed for the whole array."""

    def __init__(self, options: TrackerOptions, first: FloatArray) -> None:
        self.options = options
        self.value = first.astype(np.float64)
        self.speed = 0.0

    @staticmethod
    def _alpha(cutoff: float, rate: float) -> float:
        tau = 1.0 / (2 * math.pi * cutoff)
        return 1.0 / (1.0 + tau * rate)

    def __call__(self, sample: FloatArray) -> FloatArray:
        rate = self.options.fps
        step = sample.astype(np.float64) - self.value
        raw_speed = float(np.linalg.norm(step[:, :2], axis=1).mean()) * rate
        a_d = self._alpha(self.options.d_cutoff, rate)
        self.speed += a_d * (raw_speed - self.speed)
        cutoff = self.options.min_cutoff + self.options.beta * self.speed
        self.value = self.value + self._alpha(cutoff, rate) * step
        return self.value.astype(np.float32)


@dataclass
class _Track:
    track_id: int
    raw: FloatArray  # unsmoothed landmarks: the next crop is placed from these (no lag)
    smoother: OneEuroFilter
    score: float
    lost_at: int | None = None
    face: Face | None = field(default=None, repr=False)
    mesh: CropMesh | None = field(default=None, repr=False)

    def drop_mesh(self) -> None:
        if self.mesh is not None:
            self.mesh.close()
            self.mesh = None


def mesh_box(landmarks: FloatArray) -> Box:
    xy = landmarks[:, :2].astype(np.float64)
    return np.concatenate([xy.min(axis=0), xy.max(axis=0)])


class CropMesh:
    """The 478-point mesh on a square crop of a BGR frame (mediapipe, one graph per instance).

    ``tracking``: mediapipe's tracking mode; feed it one face's consecutive crops only."""

    def __init__(self, crop_size: int, tracking: bool = False) -> None:
        solutions: Any = mp.solutions
        self.graph = solutions.face_mesh.FaceMesh(
            static_image_mode=not tracking, refine_landmarks=True, max_num_faces=1
        )
        self.crop_size = crop_size

    def close(self) -> None:
        self.graph.close()

    def run(self, frame: Frame, box: Box, scale: float) -> FloatArray | None:
        """Landmarks in frame pixels of the face inside ``box`` × ``scale``, or None."""
        # Crop, pad and resize in one warp of the BGR frame; only the crop is converted to RGB.
        crop, x0, y0, side = square_crop(frame, box, scale, self.crop_size)
        result = self.graph.process(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB))
        if not result.multi_face_landmarks:
            return None
        points = np.array(
            [(p.x, p.y, p.z) for p in result.multi_face_landmarks[0].landmark], dtype=np.float32
        )
        points *= np.float32(side)
        points[:, 0] += np.float32(x0)
        points[:, 1] += np.float32(y0)
        return points


def _plausible(new: FloatArray, old: FloatArray) -> bool:
    """The mesh stayed on the same face: centre near, size similar (else it jumped or failed)."""
    a, b = mesh_box(new), mesh_box(old)
    size_a, size_b = max(a[2] - a[0], a[3] - a[1]), max(b[2] - b[0], b[3] - b[1])
    shift = math.hypot((a[0] + a[2] - b[0] - b[2]) / 2, (a[1] + a[3] - b[1] - b[3]) / 2)
    return bool(shift < 0.35 * size_b and 0.7 < size_a / max(size_b, 1e-6) < 1.4)


class FaceTracker:
    """Follows the faces of one video, frame by frame (call ``update`` in frame order)."""

    def __init__(self, analyser: FaceAnalyser, options: TrackerOptions | None = None) -> None:
        self.analyser = analyser
        self.options = options or TrackerOptions()
        # Static mode: one graph serves every track (it keeps no state between crops).
        self.mesh = None if self.options.mesh_tracking else CropMesh(self.options.crop_size)
        self.tracks: list[_Track] = []
        self.lost: list[_Track] = []
        self._next_id = 0
        self._last_detection: int | None = None
        self._pending: Future[list[Face]] | None = None
        #: counters for benchmarks and tests: full detections and tracked mesh passes
        self.detections = 0
        self.tracked = 0

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self.mesh is not None:
            self.mesh.close()
        for track in self.tracks + self.lost:
            track.drop_mesh()

    def _mesh_of(self, track: _Track) -> CropMesh:
        if self.mesh is not None:
            return self.mesh
        if track.mesh is None:
            track.mesh = CropMesh(self.options.crop_size, tracking=True)
        return track.mesh

    def update(self, frame: Frame, index: int) -> list[Face]:
        """The faces of frame ``index``, each with its ``track_id`` and smoothed landmarks."""
        lost_now = self._follow(frame, index)
        if self.options.detect_aside and self.tracks and not lost_now:
            self._detect_aside(frame, index)
        elif self._detection_due(index) or lost_now:
            self._pending = None  # detected now: an aside one still running is outdated
            self._detect(frame, index)
        return [track.face for track in self.tracks if track.face is not None]

    def _detect_aside(self, frame: Frame, index: int) -> None:
        """Take in the faces of a finished aside detection; start one when it is due."""
        pending = self._pending
        if pending is not None and pending.done():
            self._pending = None
            self._adopt(pending.result())
        if self._pending is None and self._detection_due(index):
            self._last_detection = index
            self.detections += 1
            self._pending = self.analyser.aside().submit(self.analyser.analyse, frame.copy())

    def _detection_due(self, index: int) -> bool:
        if self._last_detection is None:
            return True
        every = self.options.detect_every if self.tracks else self.options.detect_every_empty
        return index - self._last_detection >= every

    def _follow(self, frame: Frame, index: int) -> bool:
        kept: list[_Track] = []
        for track in self.tracks:
            mesh = self._mesh_of(track)
            landmarks = mesh.run(frame, mesh_box(track.raw), self.options.crop_scale)
            self.tracked += 1
            if landmarks is None or not _plausible(landmarks, track.raw):
                track.lost_at = index
                track.drop_mesh()  # its graph's state is of a face it no longer sees
                self.lost.append(track)
                continue
            track.raw = landmarks
            self._publish(track, landmarks)
            kept.append(track)
        lost_now = len(kept) < len(self.tracks)
        self.tracks = kept
        self.lost = [
            t for t in self.lost if index - (t.lost_at or 0) <= self.options.reacquire_frames
        ]
        return lost_now

    def _detect(self, frame: Frame, index: int) -> None:
        self._last_detection = index
        self.detections += 1
        if self.options.detect_aside:
            self._adopt(self.analyser.aside().submit(self.analyser.analyse, frame).result())
        else:
            self._adopt(self.analyser.analyse(frame))

    def _adopt(self, faces: list[Face]) -> None:
        """Start a track for each detected face not followed already."""
        current = [mesh_box(t.raw) for t in self.tracks]
        for face in faces:
            box = mesh_box(face.landmarks)
            if current and box_iou(box, current).max() > self.options.match_iou:
                continue  # already followed: keep the tracked (steadier) landmarks
            if len(self.tracks) >= self.options.max_tracks:
                break
            track = self._revive(box) or self._new_track(face)
            track.raw, track.score, track.lost_at = face.landmarks, face.score, None
            track.smoother = OneEuroFilter(self.options, face.landmarks)
            self._publish(track, face.landmarks)
            self.tracks.append(track)
            current.append(box)

    def _revive(self, box: Box) -> _Track | None:
        """A recently lost track near ``box`` (the same person re-found) keeps its id."""
        for track in self.lost:
            if box_iou(box, [mesh_box(track.raw)]).max() > self.options.match_iou / 2:
                self.lost.remove(track)
                return track
        return None

    def _new_track(self, face: Face) -> _Track:
        track = _Track(
            self._next_id, face.landmarks, OneEuroFilter(self.options, face.landmarks), face.score
        )
        self._next_id += 1
        return track

    def _publish(self, track: _Track, landmarks: FloatArray) -> None:
        smooth = track.smoother(landmarks)
        face = build_face(smooth, track.score, mesh_box(smooth))
        track.face = replace(face, track_id=track.track_id)
