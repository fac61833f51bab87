"""The quality report of one swapped face: how well the swap carried the source's identity.

Per swapped face of a result, measured with the recogniser the swap never uses
(``engine.identity``, dlib's ResNet descriptor): the distance of the result to the source
(``d_source``) and to the original target face (``d_target``); the skin tone's CIE76 ΔE
against the target's own cheeks (``engine.tone``); the target's pose (yaw and pitch, degrees);
and a verdict:

- ``transferred``: the result is the source's person to the recogniser (``d_source`` under
  ``SAME_PERSON_DISTANCE``, 0.6) and nearer the source than the original target face;
- ``not transferred``: not the source's person (``d_source`` at least 0.6) and no nearer the
  source than the original target face (the target's person still, or no one's);
- ``weak``: in between: nearer the source but not under 0.6 from it, or under 0.6 from the
  source but no nearer it than the target (either could be read).

The recogniser costs one ResNet pass per face and image (tens of milliseconds on a CPU core):
a video reports its sampled frames only, never every frame.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from facegate.engine.descriptor import face_frame, frame_pose
from facegate.engine.identity import SAME_PERSON_DISTANCE, FaceRecogniser, identity_distance
from facegate.engine.tone import tone_delta_e
from facegate.engine.types import Face, FloatArray, Frame

Verdict = Literal["transferred", "weak", "not transferred"]
VERDICTS: tuple[Verdict, ...] = ("transferred", "weak", "not transferred")


@dataclass(frozen=True)
class FaceReport:
    """The quality figures of one swapped face (see the module); JSON-ready via ``as_dict``."""

    face: int  # index of the face among the result's swapped faces
    box: tuple[float, float, float, float]  # the target face's box (x0, y0, x1, y1), pixels
    d_source: float
    d_target: float
    tone: float | None  # CIE76 ΔE of the cheeks; None: the face too small to measure
    yaw: float
    pitch: float
    verdict: Verdict

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def verdict(d_source: float, d_target: float) -> Verdict:
    """The verdict of a result ``d_source`` from the source and ``d_target`` from the
    original target face (see the module)."""
    if d_source < SAME_PERSON_DISTANCE and d_source < d_target:
        return "transferred"
    if d_source >= SAME_PERSON_DISTANCE and d_target <= d_source:
        return "not transferred"
    return "weak"


def face_pose(face: Face) -> tuple[float, float]:
    """(yaw, pitch) of ``face`` in degrees, from its mesh."""
    yaw, pitch, _ = frame_pose(face_frame(face.landmarks))
    return float(yaw), float(pitch)


def report_face(
    recogniser: FaceRecogniser,
    source_embedding: FloatArray,
    target: Frame,
    result: Frame,
    face: Face,
    index: int = 0,
) -> FaceReport:
    """The report of ``face`` (found in ``target``) as swapped in ``result`` (the same size,
    the face where it was: the swap keeps the target's pose)."""
    swapped = recogniser.describe(result, face)
    d_source = identity_distance(swapped, source_embedding)
    d_target = identity_distance(swapped, recogniser.describe(target, face))
    tone = tone_delta_e(result, target, face.landmarks)
    yaw, pitch = face_pose(face)
    x0, y0, x1, y1 = (float(v) for v in np.asarray(face.box, np.float64)[:4])
    return FaceReport(
        face=index,
        box=(x0, y0, x1, y1),
        d_source=round(d_source, 4),
        d_target=round(d_target, 4),
        tone=None if np.isnan(tone) else round(tone, 2),
        yaw=round(yaw, 1),
        pitch=round(pitch, 1),
        verdict=verdict(d_source, d_target),
    )
