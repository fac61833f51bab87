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

The recogniser costs one ResNet pass per face and image (~8 ms on a CPU core, plus dlib's
detector and aligner on a crop around the face): a video reports its sampled frames only,
never every frame. A report is made in two parts: ``measure_face`` reads the result and the
target (no source), ``judge`` adds the source's descriptor, which an image job makes
meanwhile on another thread (``Pipeline.run_image``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

import cv2
import numpy as np

from facegate.engine.descriptor import face_frame, frame_pose
from facegate.engine.errors import WeakSwap
from facegate.engine.identity import SAME_PERSON_DISTANCE, FaceRecogniser, identity_distance
from facegate.engine.tone import tone_delta_e
from facegate.engine.types import Face, FloatArray, Frame

Verdict = Literal["transferred", "weak", "not transferred"]
#: What a tenant's policy does with a face whose verdict is not ``transferred``: keep the
#: swap (flagged in the report), leave the face as it was in the target, or fail the job.
WeakSwapAction = Literal["keep", "untouched", "fail"]
#: ``restore_face``: the margin around a face's box put back, as a fraction of its size.
RESTORE_MARGIN = 0.35
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
    # What was done with it (``WeakSwapAction``): "kept" (a transferred face, or a weak one
    # kept under the default policy) or "untouched" (the target's face put back).
    action: Literal["kept", "untouched"] = "kept"

    @property
    def weak(self) -> bool:
        return self.verdict != "transferred"

    def describe(self) -> str:
        """One line naming the face and its figures (a failed job's detail)."""
        return (
            f"face {self.face + 1} at ({self.box[0]:.0f}, {self.box[1]:.0f}) was {self.verdict}: "
            f"recogniser distance {self.d_source:.3f} to the source (the same person under "
            f"{SAME_PERSON_DISTANCE}), {self.d_target:.3f} to the original face; "
            f"yaw {self.yaw:.0f}°"
        )

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


@dataclass(frozen=True)
class FaceMeasure:
    """What a report reads off the result and the target alone (no source): the result's
    descriptor, its distance to the original face, the tone and the pose. ``judge`` adds
    the source's descriptor, which may be made meanwhile (``Pipeline.run_image``)."""

    face: Face
    index: int
    swapped: FloatArray  # the result's descriptor
    d_target: float
    tone: float  # nan: the face too small to measure
    yaw: float
    pitch: float


def measure_face(
    recogniser: FaceRecogniser, target: Frame, result: Frame, face: Face, index: int = 0
) -> FaceMeasure:
    """The source-free part of the report of ``face`` (found in ``target``) as swapped in
    ``result`` (the same size, the face where it was: the swap keeps the target's pose)."""
    # One box search for both chips (the swap keeps the face where it was), on the result:
    # d(result, source), the headline figure, reads the result as the judge does.
    swapped, original = recogniser.descriptors(recogniser.chips_at([result, target], face))
    yaw, pitch = face_pose(face)
    return FaceMeasure(
        face=face,
        index=index,
        swapped=swapped,
        d_target=identity_distance(swapped, original),
        tone=tone_delta_e(result, target, face.landmarks),
        yaw=yaw,
        pitch=pitch,
    )


def judge(measure: FaceMeasure, source_embedding: FloatArray) -> FaceReport:
    """The report of a measured face against the source's descriptor."""
    d_source = identity_distance(measure.swapped, source_embedding)
    x0, y0, x1, y1 = (float(v) for v in np.asarray(measure.face.box, np.float64)[:4])
    return FaceReport(
        face=measure.index,
        box=(x0, y0, x1, y1),
        d_source=round(d_source, 4),
        d_target=round(measure.d_target, 4),
        tone=None if np.isnan(measure.tone) else round(measure.tone, 2),
        yaw=round(measure.yaw, 1),
        pitch=round(measure.pitch, 1),
        verdict=verdict(d_source, measure.d_target),
    )


def restore_face(result: Frame, target: Frame, box: tuple[float, float, float, float]) -> None:
    """Put the face at ``box`` of ``target`` back into ``result`` (in place), feathered: the
    box grown by ``RESTORE_MARGIN`` of its size on each side (the swap's region, with its
    outline warp, lies within it), the feather over the outer half of that margin."""
    x0f, y0f, x1f, y1f = box
    pad = np.array([x1f - x0f, y1f - y0f]) * RESTORE_MARGIN
    x0, y0 = max(0, int(x0f - pad[0])), max(0, int(y0f - pad[1]))
    x1 = min(result.shape[1], int(np.ceil(x1f + pad[0])))
    y1 = min(result.shape[0], int(np.ceil(y1f + pad[1])))
    if x1 - x0 < 2 or y1 - y0 < 2:
        return
    mask = np.zeros((y1 - y0, x1 - x0), np.float32)
    inner = np.round(pad / 2).astype(int)
    mask[inner[1] : mask.shape[0] - inner[1], inner[0] : mask.shape[1] - inner[0]] = 1.0
    mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), max(1.0, float(pad.min()) / 6)), np.float32)
    alpha = mask[..., None]
    region = result[y0:y1, x0:x1].astype(np.float32)
    original = target[y0:y1, x0:x1].astype(np.float32)
    blended = region * (1 - alpha) + original * alpha + 0.5
    result[y0:y1, x0:x1] = np.clip(blended, 0, 255).astype(np.uint8)


def apply_weak_swap_policy(
    action: str, reports: list[FaceReport], target: Frame, result: Frame
) -> list[FaceReport]:
    """A tenant's ``WeakSwapAction`` on the faces of ``result`` that are not transferred:
    ``keep`` leaves them (the reports flag them), ``untouched`` puts the target's face back
    (``restore_face``; the report says so), ``fail`` raises ``WeakSwap`` naming each."""
    weak = [report for report in reports if report.weak]
    if not weak or action == "keep":
        return reports
    if action == "fail":
        raise WeakSwap("; ".join(report.describe() for report in weak))
    for report in weak:
        restore_face(result, target, report.box)
    return [replace(r, action="untouched") if r.weak else r for r in reports]
