"""The identity parts of mesh_warp on real meshes: the target's mesh moved towards the
source's proportions (reshape), the source's eyes in the mesh's eye holes (eyes) and the
face-only low-pass of the band split (color)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine import mesh
from facegate.engine.descriptor import canonical_landmarks
from facegate.engine.faces import FaceAnalyser
from facegate.engine.swap.color import low_pass
from facegate.engine.swap.eyes import agreeing_eyes, fill_eyes
from facegate.engine.swap.masks import keep_mask, polygon_mask
from facegate.engine.swap.outline import displaced, displacement_field
from facegate.engine.swap.reshape import reshaped_points, reshaped_target
from facegate.engine.types import FloatArray

SOURCE = "woman_astronaut_frontal.jpg"  # smiling, mouth open
TARGET = "man_frontal_glasses.jpg"
NARROW = "elderly_woman_glasses_frontal.jpg"  # a longer, narrower face than TARGET's


@pytest.fixture(scope="module")
def meshes() -> dict[str, FloatArray]:
    analyser = FaceAnalyser()
    found = {}
    for name in (SOURCE, TARGET, NARROW):
        frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
        assert frame is not None
        (face,) = analyser.analyse(frame)
        found[name] = face.landmarks
    return found


def proportions(points: FloatArray) -> FloatArray:
    """Nose length and mouth width over eye-corner spacing, in the frontal frame."""
    local = canonical_landmarks(points)
    eyes = float(np.linalg.norm(local[33, :2] - local[263, :2]))
    nose = float(np.linalg.norm(local[168, :2] - local[2, :2]))
    mouth = float(np.linalg.norm(local[mesh.MOUTH_RIGHT, :2] - local[mesh.MOUTH_LEFT, :2]))
    return np.array([nose / eyes, mouth / eyes], np.float32)


def test_strength_zero_and_same_face_leave_the_mesh_alone(meshes: dict[str, FloatArray]) -> None:
    target = meshes[TARGET]
    assert reshaped_points(meshes[SOURCE], target, 0.0) is target
    np.testing.assert_allclose(reshaped_points(target, target), target, atol=1e-3)


def test_inner_proportions_move_towards_the_source(meshes: dict[str, FloatArray]) -> None:
    source, target = meshes[SOURCE], meshes[TARGET]
    moved = reshaped_points(source, target)
    before = np.abs(proportions(target) - proportions(source))
    after = np.abs(proportions(moved) - proportions(source))
    assert (after < 0.5 * before + 0.01).all(), (before, after)


def test_outline_and_expression_stay_the_targets(meshes: dict[str, FloatArray]) -> None:
    source, target = meshes[SOURCE], meshes[TARGET]
    moved = reshaped_points(source, target)
    eye_gap = float(np.linalg.norm(target[33, :2] - target[263, :2]))
    # The face oval does not move: the swap meets the target's own jaw and hairline.
    oval_shift = np.linalg.norm(moved[mesh.FACE_OVAL, :2] - target[mesh.FACE_OVAL, :2], axis=1)
    assert oval_shift.max() < 0.01 * eye_gap

    # The source laughs (mouth open), the target's mouth is nearly closed: it stays so.
    def opening(points: FloatArray) -> float:
        return float(np.linalg.norm(points[13, :2] - points[14, :2]))

    assert opening(source) / eye_gap > 3 * opening(target) / eye_gap
    assert abs(opening(moved) - opening(target)) < 0.02 * eye_gap


def outline_proportions(points: FloatArray) -> FloatArray:
    """Jaw width and chin depth (nose tip → chin) over eye-corner spacing, frontal frame."""
    local = canonical_landmarks(points)
    eyes = float(np.linalg.norm(local[33, :2] - local[263, :2]))
    jaw = float(np.linalg.norm(local[172, :2] - local[397, :2]))
    chin = float(np.linalg.norm(local[4, :2] - local[mesh.CHIN, :2]))
    return np.array([jaw / eyes, chin / eyes], np.float32)


def test_with_outline_the_jaw_moves_towards_the_sources(meshes: dict[str, FloatArray]) -> None:
    source, target = meshes[NARROW], meshes[TARGET]
    moved = reshaped_points(source, target, 1.0, outline=1.0)
    before = np.abs(outline_proportions(target) - outline_proportions(source))
    after = np.abs(outline_proportions(moved) - outline_proportions(source))
    assert (before > 0.05).all()  # the two faces' outlines differ to begin with
    assert (after < 0.25 * before).all(), (before, after)
    # Without the outline's share, the oval stays the target's.
    kept = reshaped_points(source, target, 1.0)
    np.testing.assert_allclose(kept[mesh.FACE_OVAL], target[mesh.FACE_OVAL], atol=1e-3)
    # Above the trimmed forehead nothing moves: the hairline stays the target's.
    top = np.linalg.norm(moved[mesh.FOREHEAD_TOP, :2] - target[mesh.FOREHEAD_TOP, :2])
    assert top < 0.01 * float(np.linalg.norm(target[33, :2] - target[263, :2]))


def test_the_region_around_a_moved_outline_follows_it(meshes: dict[str, FloatArray]) -> None:
    frame = cv2.imread(str(FACES / TARGET), cv2.IMREAD_COLOR)
    assert frame is not None
    target = meshes[TARGET]
    moved = reshaped_points(meshes[NARROW], target, 1.0, outline=1.0)
    shape = (frame.shape[0], frame.shape[1])
    displacement = displacement_field(target, moved, shape, margin=40.0)
    assert displacement is not None
    field = displacement.field(shape)
    # At the oval's landmarks the field is their shift (the output there shows the input at
    # the landmark's old place), and nothing moves on the region's border.
    for index in mesh.FACE_OVAL:
        x, y = np.round(moved[index, :2]).astype(int)
        if 0 <= x < shape[1] and 0 <= y < shape[0]:
            shift = moved[index, :2] - target[index, :2]
            assert np.linalg.norm(field[y, x] - shift) < 1.0, index
    border = np.concatenate([field[0], field[-1], field[:, 0], field[:, -1]])
    assert np.abs(border).max() == 0.0
    out = displaced(np.asarray(frame, np.uint8), displacement)
    assert np.array_equal(out[0], frame[0])
    assert np.abs(out.astype(int) - frame.astype(int)).mean() > 0.1
    # At half the size (the working scale) the shifts are halved with it.
    half = displacement.field((shape[0] // 2, shape[1] // 2))
    assert abs(float(np.abs(half).max()) - 0.5 * float(np.abs(field).max())) < 0.5
    # The same mesh without the outline's shift: no field, nothing to warp.
    assert displacement_field(target, reshaped_points(meshes[NARROW], target), shape, 40.0) is None


def test_reshaped_target_moves_pixels_only_inside_the_mesh(
    meshes: dict[str, FloatArray],
) -> None:
    frame = cv2.imread(str(FACES / TARGET), cv2.IMREAD_COLOR)
    assert frame is not None
    target = meshes[TARGET]
    moved = reshaped_points(meshes[SOURCE], target)
    out = reshaped_target(np.asarray(frame, np.uint8), target, moved)
    oval = np.zeros(frame.shape[:2], np.uint8)
    cv2.fillPoly(oval, [np.round(target[mesh.FACE_OVAL, :2]).astype(np.int32)], (1,))
    outside = cv2.dilate(oval, np.ones((5, 5), np.uint8)) == 0
    assert np.array_equal(out[outside], frame[outside])
    assert np.abs(out.astype(int) - frame.astype(int))[oval > 0].mean() > 1.0


def test_face_only_low_pass_keeps_the_background_out() -> None:
    lab = np.zeros((120, 120, 3), np.float32)
    face = np.zeros((120, 120), np.float32)
    cv2.circle(face, (60, 60), 40, (1.0,), -1)
    lab[..., 0] = np.where(face > 0, 70.0, 10.0)  # a bright face on a dark background
    plain = low_pass(lab, 12.0)
    face_only = low_pass(lab, 12.0, face)
    edge = (58, 97)  # inside the face, 3 px from its border
    assert plain[edge][0] < 55.0  # the plain blur pulls the background in
    assert face_only[edge][0] > 67.0


def test_source_eyes_fill_the_mesh_holes_where_openings_agree(
    meshes: dict[str, FloatArray],
) -> None:
    source, target = meshes[SOURCE], meshes[TARGET]
    shape = (600, 400)
    assert agreeing_eyes(source, target) == [True, True]
    # The target's eyeballs are kept unless the source's eyes fill them.
    kept = keep_mask(source, target, shape)
    filled = keep_mask(source, target, shape, source_eyes=True)
    eye = polygon_mask(target, mesh.RIGHT_EYE, shape) > 0.5
    assert kept[eye].mean() > 0.5  # soft-edged: a narrow eye is mostly edge
    assert filled[eye].mean() < 0.05
    # A bright source: the hole inside the target's eye becomes the source's pixels.
    image = np.zeros((*shape, 3), np.float32)
    coverage = np.zeros(shape, bool)
    bright = np.full((700, 700, 3), 50.0, np.float32)
    fill_eyes([image], coverage, [bright], source, target, [True, False])
    assert coverage[eye].mean() > 0.9
    assert image[eye].mean() > 45.0
    assert not coverage[polygon_mask(target, mesh.LEFT_EYE, shape) > 0.5].any()
