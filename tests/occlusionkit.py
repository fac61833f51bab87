"""Occluded targets made from the test photos, for the occlusion tests: a real hand (the
patch of the group photo around a player's hand holding cards, which the hand model finds
there) or a flat-coloured object, pasted over the lower right of a face."""

from __future__ import annotations

import cv2
import numpy as np
from tests.testdata import FACES

from facegate.engine import mesh
from facegate.engine.faces import FaceAnalyser
from facegate.engine.types import Face, Frame

HAND_PHOTO = "group_6_faces_insightface_t1.jpg"
HAND_BOX = (790, 330, 880, 415)  # the right-hand player's hand holding cards
UNCHANGED = 3  # levels per channel


def load(name: str) -> Frame:
    frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
    assert frame is not None, name
    return frame


def only_face(analyser: FaceAnalyser, frame: Frame) -> Face:
    faces = analyser.analyse(frame)
    assert len(faces) == 1
    return faces[0]


def paste(frame: Frame, face: Face, patch: Frame) -> tuple[Frame, np.ndarray]:
    """``frame`` with ``patch`` (scaled to half the face's height) over the lower right of
    the face, and the pasted pixels' mask."""
    lo, hi = face.landmarks[:, :2].min(axis=0), face.landmarks[:, :2].max(axis=0)
    height = float(hi[1] - lo[1])
    scale = 0.5 * height / patch.shape[0]
    w, h = round(patch.shape[1] * scale), round(patch.shape[0] * scale)
    left, top = round(lo[0] + 0.45 * (hi[0] - lo[0])), round(lo[1] + 0.55 * height)
    w, h = min(w, frame.shape[1] - left), min(h, frame.shape[0] - top)
    out, where = frame.copy(), np.zeros(frame.shape[:2], bool)
    out[top : top + h, left : left + w] = cv2.resize(patch, (w, h), interpolation=cv2.INTER_CUBIC)
    where[top : top + h, left : left + w] = True
    return out, where


def hand_patch() -> Frame:
    """The real hand, with what it holds and a little of its sleeve."""
    x0, y0, x1, y1 = HAND_BOX
    return np.ascontiguousarray(load(HAND_PHOTO)[y0:y1, x0:x1])


def in_face(face: Face, shape: tuple[int, ...]) -> np.ndarray:
    oval = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(oval, [np.round(face.landmarks[mesh.FACE_OVAL, :2]).astype(np.int32)], (1,))
    return oval.astype(bool)


def unchanged(out: Frame, before: Frame, where: np.ndarray, levels: int = UNCHANGED) -> float:
    """The fraction of ``where`` whose pixels differ by at most ``levels`` per channel."""
    same = np.abs(out.astype(np.int16) - before.astype(np.int16)).max(axis=2) <= levels
    return float(same[where].mean())
