"""Head pose and the geometric identity descriptor, both from the 478-point mesh alone.

No face-recognition model ships with the built-in engine, so identity is approximated by face
*shape*: the mesh is put in the face's own frontal frame (left-right axis from the mirrored
landmark pairs, vertical axis from forehead to nose base, depth completing the right-handed
frame), made symmetric (each point averaged with its mirrored partner), scaled by the
inter-ocular distance, and the 3D positions of rigid, expression-stable points (eye corners,
nose, forehead, upper face outline; not the mouth, jaw, lids or brows) form the vector, centred
on their mean and L2-normalised. ``face_distance`` is the Euclidean distance of two such
vectors (0 = same shape).

What it can and cannot tell apart, measured on shared/data/faces at 1080 px (printed by
``pytest tests/engine/test_faces.py -k descriptor -s``):

- the three photos of person A (selfie, blue wall, full body with a ~100 px face) are
  0.015-0.017 apart; a photo against a shifted/scaled copy of itself is < 0.005 apart;
- other people are 0.019-0.058 from person A (median 0.045 over all different pairs), so
  the median different pair is ~3x further than the same-person pairs;
- but the nearest strangers are as close as the same person: man with glasses vs person A
  0.019, the bearded man vs the man on stage 0.015. The default reference threshold
  (``selection.DEFAULT_REFERENCE_DISTANCE`` = 0.018) accepts every person-A pair and falsely
  matches that one pair of men;
- it is pose-sensitive beyond ~30 degrees: the profile man is 0.06-0.09 from everyone, and a
  face looking up (pitch ~25 degrees) 0.045-0.056. Expression matters less (mouth, lids and
  brows are left out) but a broad smile moves the cheeks.

So it tells apart clearly different face shapes (a child-like vs long face, wide vs narrow
nose and eye spacing) and keeps one person stable across photos at similar pose; it cannot
tell apart people of similar face shape, and it is no substitute for a learned embedding
(arcface) — when one is installed, ``Face.embedding`` should come from it instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.types import Face, FloatArray, frozen

# Rigid points of the subject's right half and of the midline (the left half is the mirror).
_RIGID_SIDE = frozen(
    np.array(
    [
        33, 133,  # eye corners
        98, 129, 48, 64, 102, 122, 196, 174,  # nostril wing, nose side
        108, 67, 109, 103, 54, 21, 162, 127, 234, 93,  # forehead, upper face outline
        116, 117, 118, 50, 205,  # cheekbone
    ],
    dtype=np.int32,
    )
)  # fmt: skip
_RIGID_MID = frozen(np.array([1, 2, 4, 5, 6, 9, 10, 151, 168, 195, 197], dtype=np.int32))
_EYE_RIGHT = mesh.RIGHT_EYE
_EYE_LEFT = mesh.LEFT_EYE
# Depth (the face's relief: nose length, brow ridge, cheekbones) carries most of the identity
# signal the mesh has: weighting it 4x took the same-person/other-person distance ratio from
# 2.3 to 3.0 on the test photos (x/y alone: 2.0; z alone: 3.0 but fewer points of evidence).
_AXIS_WEIGHTS = frozen(np.array([1.0, 1.0, 4.0]))
# Nose base: rigid (unlike the chin, which drops when the mouth opens).
_NOSE_BASE = 2


def face_frame(landmarks: FloatArray) -> npt.NDArray[np.float64]:
    """Rotation (3, 3) whose columns are the face's right, down and away-from-camera axes in
    frame coordinates (x right, y down, z away from the camera, as mediapipe's)."""
    points = landmarks.astype(np.float64)
    pairs = mesh.MIRROR_PAIRS
    across = (points[pairs[:, 1]] - points[pairs[:, 0]]).sum(axis=0)
    across /= np.linalg.norm(across) + 1e-12
    down = points[_NOSE_BASE] - points[mesh.FOREHEAD_TOP]
    down -= across * (down @ across)
    down /= np.linalg.norm(down) + 1e-12
    depth = np.cross(across, down)
    return np.stack([across, down, depth], axis=1)


def estimate_pose(landmarks: FloatArray) -> tuple[float, float, float]:
    """(yaw, pitch, roll) in degrees. yaw > 0: the face turns towards the image right;
    pitch > 0: it looks up; roll > 0: it leans clockwise in the image."""
    return frame_pose(face_frame(landmarks))


def frame_pose(rotation: npt.NDArray[np.float64]) -> tuple[float, float, float]:
    """(yaw, pitch, roll) in degrees of a :func:`face_frame` rotation."""
    forward = -rotation[:, 2]  # towards the camera on a frontal face: (0, 0, -1)
    yaw = np.degrees(np.arctan2(forward[0], -forward[2]))
    pitch = np.degrees(np.arctan2(-forward[1], np.hypot(forward[0], forward[2])))
    roll = np.degrees(np.arctan2(rotation[1, 0], rotation[0, 0]))
    return float(yaw), float(pitch), float(roll)


def canonical_landmarks(landmarks: FloatArray) -> npt.NDArray[np.float64]:
    """Landmarks in the face's frontal frame, centred, in units of inter-ocular distance, and
    symmetrised (each point averaged with its reflected partner)."""
    points = landmarks.astype(np.float64)
    rotation = face_frame(landmarks)
    eye_gap = np.linalg.norm(points[_EYE_LEFT].mean(axis=0) - points[_EYE_RIGHT].mean(axis=0))
    local = (points - points[_RIGID_MID].mean(axis=0)) @ rotation / max(eye_gap, 1e-9)
    reflected = local[mesh.MIRROR] * np.array([-1.0, 1.0, 1.0])
    return np.asarray((local + reflected) / 2.0, dtype=np.float64)


def compute_embedding(landmarks: FloatArray) -> FloatArray:
    """The geometric identity descriptor (see the module docstring), L2-normalised."""
    canonical = canonical_landmarks(landmarks)
    rigid = canonical[np.concatenate([_RIGID_SIDE, _RIGID_MID])]
    # Only the right half: the left half is its mirror image after symmetrisation.
    centred = (rigid - rigid.mean(axis=0)) * _AXIS_WEIGHTS
    vector = centred.ravel()
    return np.asarray(vector / (np.linalg.norm(vector) + 1e-12), dtype=np.float32)


def face_distance(a: Face | FloatArray, b: Face | FloatArray) -> float:
    """Euclidean distance of two descriptors (0 = identical shape)."""
    vector_a = a.embedding if isinstance(a, Face) else a
    vector_b = b.embedding if isinstance(b, Face) else b
    if vector_a is None or vector_b is None:
        raise ValueError("face has no embedding")
    return float(np.linalg.norm(np.asarray(vector_a) - np.asarray(vector_b)))


def average_embedding(faces: Iterable[Face | FloatArray]) -> FloatArray:
    """One identity from several photos of a person: the normalised mean of their descriptors."""
    vectors = [f.embedding if isinstance(f, Face) else f for f in faces]
    if not vectors or any(v is None for v in vectors):
        raise ValueError("average_embedding needs at least one face, each with an embedding")
    mean = np.mean(np.stack([np.asarray(v, dtype=np.float64) for v in vectors]), axis=0)
    return np.asarray(mean / (np.linalg.norm(mean) + 1e-12), dtype=np.float32)
