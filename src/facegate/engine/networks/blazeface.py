"""The built-in face detector: mediapipe's full-range BlazeFace, run by LiteRT.

The model file is mediapipe's own (``face_detection_full_range_sparse.tflite``, the built-in
model ``mediapipe_face_detection_full_range``); the graph around it is written here as
mediapipe's ``FaceDetectionFullRange`` subgraph runs it, so the detections are the same
(tests/engine/networks/test_blazeface.py compares them on every test photo and tile):

- the image letterboxed into the 192×192 input by one perspective warp (``INTER_LINEAR``,
  black border; the square around the image has its corners mapped to the tensor's, as
  mediapipe's ``ImageToTensor`` maps them), values in [-1, 1];
- 2304 anchors (one 48×48 layer, stride 4, fixed size); boxes decoded from the 16 values
  of each (x, y, w, h first), scores through a sigmoid;
- scores below 0.6 dropped (the subgraph's own threshold: the Python solution's
  ``min_detection_confidence`` never reached it, so 0.6 is what the analyser always had);
- weighted non-maximum suppression (IoU 0.3): each kept box is the score-weighted mean of
  the boxes it suppresses.

Why not mediapipe's graph: the same model costs ~1.2 ms less CPU a run this way (its graph's
packets, image frame and calculators around a ~3.4 ms inference), and a frame's analysis
runs it up to seven times (the whole frame and six tiles; issue 28).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from ai_edge_litert.interpreter import Interpreter

from facegate.engine.modelstore.builtins import builtin_file
from facegate.engine.types import Frame, frozen

MODEL = "mediapipe_face_detection_full_range"
SIZE = 192
STRIDE = 4
#: mediapipe's FaceDetectionFullRange subgraph drops scores below this whatever the solution
#: asks (measured: no detection under 0.6 ever came out of it).
MIN_SCORE = 0.6
#: Boxes overlapping the best remaining one by more than this are merged into it.
SUPPRESSION_IOU = 0.3

_CELLS = SIZE // STRIDE
# anchor centres in [0, 1], row by row (mediapipe's SsdAnchorsCalculator: one layer, stride 4,
# fixed-size anchors)
_ANCHOR_X = frozen(np.tile((np.arange(_CELLS, dtype=np.float32) + 0.5) / _CELLS, _CELLS))
_ANCHOR_Y = frozen(np.repeat((np.arange(_CELLS, dtype=np.float32) + 0.5) / _CELLS, _CELLS))
#: The tensor's corners in the order of ``cv2.boxPoints``: bottom-left, top-left, top-right,
#: bottom-right.
_TENSOR_CORNERS = frozen(np.array([[0, SIZE], [0, 0], [SIZE, 0], [SIZE, SIZE]], np.float32))


@dataclass(frozen=True)
class Detection:
    box: npt.NDArray[np.float64]  # x0, y0, x1, y1 in the image's pixels
    score: float


class BlazeFace:
    """One interpreter (not thread-safe: one per thread, as the analyser's graphs are)."""

    def __init__(self, min_score: float = MIN_SCORE) -> None:
        self.min_score = max(min_score, MIN_SCORE)
        # sigmoid(x) >= s  <=>  x >= logit(s): only the few anchors kept are decoded
        score = self.min_score
        self._least_logit = math.inf if score >= 1.0 else math.log(score / (1.0 - score))
        self._interpreter = Interpreter(model_path=str(builtin_file(MODEL)), num_threads=1)
        self._interpreter.allocate_tensors()
        self._input = self._interpreter.get_input_details()[0]["index"]
        outputs = {int(o["shape"][-1]): o["index"] for o in self._interpreter.get_output_details()}
        self._boxes, self._scores = outputs[16], outputs[1]
        self._tensor = np.empty((1, SIZE, SIZE, 3), np.float32)

    def detect(self, rgb: Frame) -> list[Detection]:
        """The faces of an RGB image, best first."""
        height, width = rgb.shape[:2]
        side = max(height, width)
        scale = SIZE / side
        left, top = (side - width) / 2 * scale, (side - height) / 2 * scale
        # mediapipe's ImageToTensor: the square around the image, its corners onto the
        # tensor's, by a perspective warp (an affine one of the same matrix rounds its
        # samples differently: scores 0.004 apart)
        corners = cv2.boxPoints(((width / 2, height / 2), (side, side), 0.0))
        projection = cv2.getPerspectiveTransform(corners, _TENSOR_CORNERS)
        letterboxed = cv2.warpPerspective(
            rgb, projection, (SIZE, SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )
        np.multiply(letterboxed, np.float32(1 / 127.5), out=self._tensor[0])
        self._tensor -= np.float32(1.0)
        self._interpreter.set_tensor(self._input, self._tensor)
        self._interpreter.invoke()
        logits = self._interpreter.get_tensor(self._scores)[0, :, 0]
        kept = np.flatnonzero(logits >= self._least_logit)
        if not len(kept):
            return []
        raw = self._interpreter.get_tensor(self._boxes)[0, kept, :4].astype(np.float64)
        scores = 1.0 / (1.0 + np.exp(-logits[kept].astype(np.float64)))
        x = raw[:, 0] / SIZE + _ANCHOR_X[kept]
        y = raw[:, 1] / SIZE + _ANCHOR_Y[kept]
        half_w, half_h = raw[:, 2] / (2 * SIZE), raw[:, 3] / (2 * SIZE)
        boxes = np.stack([x - half_w, y - half_h, x + half_w, y + half_h], axis=1) * SIZE
        boxes -= np.array([left, top, left, top])
        boxes /= scale
        return weighted_nms(boxes, scores, SUPPRESSION_IOU)


def weighted_nms(
    boxes: npt.NDArray[np.float64], scores: npt.NDArray[np.float64], iou: float
) -> list[Detection]:
    """mediapipe's weighted non-maximum suppression: the best remaining box takes every box
    overlapping it by more than ``iou`` (itself included), and becomes their score-weighted
    mean with its own score."""
    order = np.argsort(-scores, kind="stable")
    boxes, scores = boxes[order], scores[order]
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    remaining = np.arange(len(scores))
    found = []
    while len(remaining):
        best = boxes[remaining[0]]
        rest = boxes[remaining]
        width = np.minimum(best[2], rest[:, 2]) - np.maximum(best[0], rest[:, 0])
        height = np.minimum(best[3], rest[:, 3]) - np.maximum(best[1], rest[:, 1])
        overlap = np.clip(width, 0.0, None) * np.clip(height, 0.0, None)
        union = areas[remaining[0]] + areas[remaining] - overlap
        similar = overlap > iou * union
        group = remaining[similar]
        if not len(group):  # a degenerate box overlaps nothing, not even itself
            group = remaining[:1]
            similar = np.arange(len(remaining)) == 0
        weights = scores[group]
        box = (boxes[group] * weights[:, None]).sum(axis=0) / weights.sum()
        found.append(Detection(box, float(scores[remaining[0]])))
        remaining = remaining[~similar]
    return found
