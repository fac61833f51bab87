"""The independent recogniser (dlib's ResNet descriptor) on the real test photos, and the
identity a built-in swap carries, measured by it (a test-sized benchmarks/quality.py)."""

from __future__ import annotations

import itertools

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import (
    RESNET,
    SAME_PERSON_DISTANCE,
    SHAPE_PREDICTOR,
    FaceRecogniser,
    available,
    dlib_box,
    identity_distance,
    models_dir,
)
from facegate.engine.types import Face, FloatArray, Frame

PERSON_A = [
    "woman_a_selfie_frontal_01.jpg",
    "woman_a_frontal_blue_wall_02.jpg",
    "woman_a_fullbody_small_face_03.jpg",
]
OTHERS = [
    "man_frontal_glasses.jpg",
    "woman_b_frontal_dark_background.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "woman_astronaut_frontal.jpg",
]


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


@pytest.fixture(scope="module")
def recogniser() -> FaceRecogniser:
    return FaceRecogniser()


@pytest.fixture(scope="module")
def photos(analyser: FaceAnalyser) -> dict[str, tuple[Frame, Face]]:
    loaded = {}
    for name in PERSON_A + OTHERS:
        frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
        assert frame is not None, name
        faces = analyser.analyse(frame)
        assert len(faces) == 1, name
        loaded[name] = (np.asarray(frame, np.uint8), faces[0])
    return loaded


@pytest.fixture(scope="module")
def descriptors(
    photos: dict[str, tuple[Frame, Face]], recogniser: FaceRecogniser
) -> dict[str, FloatArray]:
    return {name: recogniser.describe(*photos[name]) for name in photos}


def test_the_models_come_from_the_installed_package() -> None:
    assert available()
    folder = models_dir()
    assert folder is not None
    assert (folder / SHAPE_PREDICTOR).is_file()
    assert (folder / RESNET).is_file()
    assert "5_face_landmarks" in SHAPE_PREDICTOR  # never the 68-point model (non-commercial)


def test_descriptor_is_128_d_and_stable(
    photos: dict[str, tuple[Frame, Face]], recogniser: FaceRecogniser
) -> None:
    frame, face = photos[PERSON_A[0]]
    first = recogniser.describe(frame, face)
    assert first.shape == (128,)
    assert first.dtype == np.float32
    assert identity_distance(first, recogniser.describe(frame, face)) < 1e-6


def test_person_a_is_one_person_and_nobody_else(descriptors: dict[str, FloatArray]) -> None:
    for a, b in itertools.combinations(PERSON_A, 2):
        assert identity_distance(descriptors[a], descriptors[b]) < SAME_PERSON_DISTANCE, (a, b)
    for a, b in itertools.product(PERSON_A, OTHERS):
        assert identity_distance(descriptors[a], descriptors[b]) > SAME_PERSON_DISTANCE, (a, b)
    for a, b in itertools.combinations(OTHERS, 2):
        assert identity_distance(descriptors[a], descriptors[b]) > SAME_PERSON_DISTANCE, (a, b)


def test_the_mesh_box_stands_in_for_dlibs_detector(
    photos: dict[str, tuple[Frame, Face]], recogniser: FaceRecogniser
) -> None:
    # Where dlib's detector misses a face, the box made from the mesh is used: it must give
    # nearly the same descriptor as the detector's box does.
    frame, face = photos[PERSON_A[1]]
    left, top, right, bottom = dlib_box(face)
    assert 0 <= left < right <= frame.shape[1]
    assert 0 <= top < bottom <= frame.shape[0]
    with_detector = recogniser.describe(frame, face)
    mesh_box_only = FaceRecogniser(detector=False)
    assert identity_distance(with_detector, mesh_box_only.describe(frame, face)) < 0.1
