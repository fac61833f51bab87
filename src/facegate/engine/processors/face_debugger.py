"""``face_debugger``: draws what the engine sees — boxes, the 5 key points, the mesh, and
the swap mask — for users checking a selection and for tests."""

from __future__ import annotations

from typing import ClassVar, Literal

import cv2
import numpy as np

from facegate.engine.mesh import TRIANGLES
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.swap.masks import face_mask, keep_mask
from facegate.engine.types import Face, Frame

DebugItem = Literal["box", "keypoints", "mesh", "mask", "score"]

_SELECTED = (0, 220, 0)  # BGR: faces the selector picked
_OTHER = (0, 160, 255)  # faces found but not selected
_KEYPOINT = (0, 0, 255)
_MESH = (200, 200, 200)
_MASK = (255, 0, 200)


class FaceDebuggerOptions(ProcessorOptions):
    """Which overlays to draw (``items``) and how strongly to tint the mask (0..1)."""

    items: tuple[DebugItem, ...] = ("box", "keypoints", "mask")
    mask_opacity: float = 0.4


class FaceDebugger(Processor[FaceDebuggerOptions]):
    """Draws every target face; selected faces in green, the others in orange."""

    name: ClassVar[str] = "face_debugger"
    options_type: ClassVar[type[ProcessorOptions]] = FaceDebuggerOptions

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, FaceDebuggerOptions)
        out = frame.copy()
        selected = {id(face) for _, face in ctx.selected}
        for face in ctx.target_faces:
            ctx.check_cancelled()
            draw_face(out, face, options, id(face) in selected)
        return out


def draw_face(frame: Frame, face: Face, options: FaceDebuggerOptions, selected: bool) -> None:
    """Draw the chosen overlays of one face onto ``frame`` in place."""
    colour = _SELECTED if selected else _OTHER
    scale = max(1, round(face.width / 150))
    if "mask" in options.items:
        _tint_mask(frame, face, options.mask_opacity)
    if "mesh" in options.items:
        polys = np.round(face.landmarks[:, :2][TRIANGLES] * 16).astype(np.int32)
        cv2.polylines(frame, list(polys), True, _MESH, 1, cv2.LINE_AA, 4)
    if "box" in options.items:
        x0, y0, x1, y1 = (round(float(v)) for v in face.box)
        cv2.rectangle(frame, (x0, y0), (x1, y1), colour, 2 * scale)
    if "keypoints" in options.items:
        for x, y in face.keypoints5:
            cv2.circle(frame, (round(float(x)), round(float(y))), 2 * scale, _KEYPOINT, -1)
    if "score" in options.items:
        x0, y0 = round(float(face.box[0])), round(float(face.box[1]))
        cv2.putText(
            frame,
            f"{face.score:.2f}",
            (x0, max(12, y0 - 4)),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.4 * scale,
            colour,
            scale,
            cv2.LINE_AA,
        )


def _tint_mask(frame: Frame, face: Face, opacity: float) -> None:
    """Tint the swap mask (default options: trimmed oval minus eyes and mouth)."""
    h, w = frame.shape[:2]
    points = face.landmarks
    mask = face_mask(points, (h, w), (0.0, 0.0, 0.0, 0.0), 0.3)
    mask *= 1.0 - keep_mask(points, points, (h, w))
    alpha = (mask * opacity)[..., None]
    tinted = frame + (np.array(_MASK, np.float32) - frame) * alpha
    frame[...] = np.clip(np.round(tinted), 0, 255).astype(np.uint8)
