"""The built-in detector (mediapipe's full-range BlazeFace run by LiteRT) gives what
mediapipe's own FaceDetection graph gives, on every test photo and every tile the analyser
cuts from it (tests/engine/test_faces.py checks the faces found end to end)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.engine.test_faces import EXPECTED, PROFILE, load_1080

from facegate.engine.faces import Pyramid, _tile_windows
from facegate.engine.mediapipe_import import mp
from facegate.engine.networks.blazeface import MIN_SCORE, BlazeFace, weighted_nms
from facegate.engine.types import Frame


def reference(graph: object, rgb: Frame) -> list[tuple[np.ndarray, float]]:
    """Boxes (pixels of ``rgb``) and scores from mediapipe's FaceDetection graph."""
    height, width = rgb.shape[:2]
    found = []
    for detection in graph.process(rgb).detections or ():  # type: ignore[attr-defined]
        rel = detection.location_data.relative_bounding_box
        box = np.array([rel.xmin, rel.ymin, rel.xmin + rel.width, rel.ymin + rel.height])
        found.append((box * np.array([width, height, width, height]), float(detection.score[0])))
    return found


@pytest.fixture(scope="module")
def graph() -> object:
    solutions: object = mp.solutions
    detection = solutions.face_detection  # type: ignore[attr-defined]
    made = detection.FaceDetection(model_selection=1, min_detection_confidence=0.5)
    yield made
    made.close()


@pytest.mark.parametrize("name", [*EXPECTED, PROFILE])
def test_the_same_detections_as_mediapipes_graph(graph: object, name: str) -> None:
    detector = BlazeFace()
    frame = load_1080(name)
    height, width = frame.shape[:2]
    pyramid = Pyramid(frame)
    windows = [(0, 0, width, height), *_tile_windows(width, height, None, 0.25)]
    compared = 0
    for x0, y0, x1, y1 in windows:
        # the level the analyser detects on (Pyramid.detect, tiles shrunk to 640 px)
        level = 0
        while max(x1 - x0, y1 - y0) > 640 * 2**level:
            level += 1
        image = pyramid.rgb(level)
        sx, sy = image.shape[1] / width, image.shape[0] / height
        rgb = np.ascontiguousarray(
            image[int(y0 * sy) : round(y1 * sy), int(x0 * sx) : round(x1 * sx)]
        )
        expected = reference(graph, rgb)
        got = detector.detect(rgb)
        assert len(got) == len(expected), (name, (x0, y0, x1, y1))
        for box, score in expected:
            nearest = min(got, key=lambda det: float(np.abs(det.box - box).sum()))
            size = box[2] - box[0]
            assert np.abs(nearest.box - box).max() < 0.01 * size, (name, box, nearest.box)
            assert nearest.score == pytest.approx(score, abs=1e-3)
            compared += 1
    if EXPECTED.get(name):
        assert compared >= EXPECTED[name]


def test_nothing_under_the_graphs_threshold_and_best_first() -> None:
    detector = BlazeFace(min_score=0.1)  # the graph never went below its own 0.6
    assert detector.min_score == MIN_SCORE
    found = detector.detect(load_1080("group_8_small_faces_office.jpg")[:, :, ::-1].copy())
    scores = [det.score for det in found]
    assert scores == sorted(scores, reverse=True)
    assert min(scores) >= MIN_SCORE


def test_a_threshold_of_one_finds_nothing() -> None:
    frame = load_1080("woman_a_selfie_frontal_01.jpg")[:, :, ::-1].copy()
    assert BlazeFace().detect(frame)
    assert BlazeFace(min_score=1.0).detect(frame) == []


def test_weighted_nms_merges_overlapping_boxes_by_score() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], np.float64)
    scores = np.array([0.9, 0.6, 0.8])
    found = weighted_nms(boxes, scores, 0.3)
    assert [det.score for det in found] == [0.9, 0.8]
    assert found[0].box == pytest.approx([0.4, 0, 10.4, 10])  # (0*0.9 + 1*0.6) / 1.5
    assert found[1].box == pytest.approx([50, 50, 60, 60])
