"""Face analysis on the real test photos (shared/data/faces), each upscaled to 1080 px long side."""

from __future__ import annotations

import itertools
import os
import threading

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine import mesh
from facegate.engine.descriptor import face_frame
from facegate.engine.faces import AnalyserOptions, FaceAnalyser, face_distance, tile_grid
from facegate.engine.types import Face, Frame

EXPECTED = {
    "group_2_women_laughing_angled.jpg": 2,
    "group_3_men_expressions_glasses.jpg": 3,
    "group_4_sitting_on_grass.jpg": 4,
    "group_6_faces_insightface_t1.jpg": 6,
    "group_7_elderly_family.jpg": 7,
    "group_8_small_faces_office.jpg": 8,
    "no_face_cat.png": 0,
    "no_face_landscape_mountains.jpg": 0,
    "elderly_woman_glasses_frontal.jpg": 1,
    "man_frontal_beard_closeup.jpg": 1,
    "man_frontal_glasses.jpg": 1,
    "small_face_man_on_stage.jpg": 1,
    "woman_a_frontal_blue_wall_02.jpg": 1,
    "woman_a_fullbody_small_face_03.jpg": 1,
    "woman_a_selfie_frontal_01.jpg": 1,
    "woman_angled_looking_up.jpg": 1,
    "woman_astronaut_frontal.jpg": 1,
    "woman_b_frontal_dark_background.jpg": 1,
}
PROFILE = "man_profile_grayscale_occluded.png"
FRONTAL = [
    "elderly_woman_glasses_frontal.jpg",
    "man_frontal_glasses.jpg",
    "woman_a_frontal_blue_wall_02.jpg",
    "woman_a_selfie_frontal_01.jpg",
    "woman_astronaut_frontal.jpg",
    "woman_b_frontal_dark_background.jpg",
]
PERSON_A = [name for name in EXPECTED if name.startswith("woman_a_")]


def load_1080(name: str) -> Frame:
    image = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
    assert image is not None, name
    height, width = image.shape[:2]
    scale = 1080 / max(height, width)
    size = (round(width * scale), round(height * scale))
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_CUBIC), dtype=np.uint8)


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser(AnalyserOptions())


@pytest.fixture(scope="module")
def photos() -> dict[str, Frame]:
    return {name: load_1080(name) for name in [*EXPECTED, PROFILE]}


@pytest.fixture(scope="module")
def analysed(analyser: FaceAnalyser, photos: dict[str, Frame]) -> dict[str, list[Face]]:
    return {name: analyser.analyse(frame) for name, frame in photos.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_face_found_and_no_false_positive(analysed: dict[str, list[Face]], name: str) -> None:
    assert len(analysed[name]) == EXPECTED[name]


@pytest.mark.parametrize("name", [n for n, count in EXPECTED.items() if count > 1])
def test_every_face_found_on_a_1080p_video_frame(analyser: FaceAnalyser, name: str) -> None:
    # The group photos letterboxed into a 1920×1080 frame, as a video's frame shows them: the
    # tiles are wide there (2×2 tiles are 1097×617 px; the detector sees a 192 px square).
    image = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
    height, width = image.shape[:2]
    scale = min(1920 / width, 1080 / height)
    size = (round(width * scale), round(height * scale))
    frame = np.zeros((1080, 1920, 3), np.uint8)
    x, y = (1920 - size[0]) // 2, (1080 - size[1]) // 2
    frame[y : y + size[1], x : x + size[0]] = cv2.resize(image, size, interpolation=cv2.INTER_CUBIC)
    assert len(analyser.analyse(frame)) == EXPECTED[name]


def test_the_tile_grid_keeps_tiles_about_square() -> None:
    assert tile_grid(1920, 1080, None, 0.25) == (3, 2)  # 768×617 px tiles
    assert tile_grid(1080, 1920, None, 0.25) == (2, 3)
    assert tile_grid(1000, 1000, None, 0.25) == (2, 2)
    assert tile_grid(1920, 1080, (2, 2), 0.25) == (2, 2)  # as configured


def test_profile_occluded_camera_man_is_the_documented_hard_case(
    analysed: dict[str, list[Face]],
) -> None:
    # Found at 1080 px with the default set-up; the mesh then reads a strongly turned head.
    found = analysed[PROFILE]
    assert len(found) <= 1
    if found:
        assert abs(found[0].pose[0]) > 30


def test_group_faces_do_not_overlap(analysed: dict[str, list[Face]]) -> None:
    for name, faces in analysed.items():
        for a, b in itertools.combinations(faces, 2):
            ax, ay = a.keypoints5[2]
            assert not (b.box[0] <= ax <= b.box[2] and b.box[1] <= ay <= b.box[3]), name


def test_face_fields_are_consistent(analysed: dict[str, list[Face]]) -> None:
    for faces in analysed.values():
        for face in faces:
            assert face.landmarks.shape == (478, 3)
            assert face.keypoints5.shape == (5, 2)
            assert face.embedding is not None
            assert face.embedding.shape[0] > 0
            assert np.linalg.norm(face.embedding) == pytest.approx(1.0, abs=1e-4)
            x1, y1, x2, y2 = face.box
            nose_x, nose_y = face.keypoints5[2]
            assert x1 < nose_x < x2
            assert y1 < nose_y < y2


@pytest.mark.parametrize("name", FRONTAL)
def test_frontal_keypoints_pose_and_mesh_orientation(
    analysed: dict[str, list[Face]], name: str
) -> None:
    (face,) = analysed[name]
    left_eye, right_eye, nose, mouth_left, mouth_right = face.keypoints5
    assert left_eye[0] < nose[0] < right_eye[0]
    assert mouth_left[0] < mouth_right[0]
    assert max(left_eye[1], right_eye[1]) < nose[1] < min(mouth_left[1], mouth_right[1])
    yaw, pitch, roll = face.pose
    assert abs(yaw) < 12
    assert abs(pitch) < 12
    assert abs(roll) < 12
    # TRIANGLES are oriented so a camera-facing triangle has a positive signed area.
    p = face.landmarks[:, :2][mesh.TRIANGLES]
    d1, d2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    cross = d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0]
    assert (cross > 0).mean() > 0.95


@pytest.mark.parametrize("name", FRONTAL)
def test_mirror_map_matches_the_real_face(analysed: dict[str, list[Face]], name: str) -> None:
    (face,) = analysed[name]
    points = face.landmarks.astype(np.float64)
    # In the face's own frame, not symmetrised (that would hide errors): reflect x and
    # compare each point with its mirror partner.
    local = (points - points.mean(axis=0)) @ face_frame(face.landmarks) / face.inter_ocular
    reflected = local[mesh.MIRROR] * np.array([-1.0, 1.0, 1.0])
    error = np.linalg.norm((local - reflected)[:, :2], axis=1)
    assert np.median(error) < 0.08
    shuffled = local[np.roll(mesh.MIRROR, 1)] * np.array([-1.0, 1.0, 1.0])
    assert np.median(np.linalg.norm((local - shuffled)[:, :2], axis=1)) > 5 * np.median(error)


def test_pose_changes_sign_on_a_mirrored_image(
    analyser: FaceAnalyser, photos: dict[str, Frame], analysed: dict[str, list[Face]]
) -> None:
    name = "woman_angled_looking_up.jpg"
    (face,) = analysed[name]
    (flipped,) = analyser.analyse(np.ascontiguousarray(photos[name][:, ::-1]))
    assert flipped.pose[0] == pytest.approx(-face.pose[0], abs=4)
    assert flipped.pose[1] == pytest.approx(face.pose[1], abs=4)
    assert flipped.pose[2] == pytest.approx(-face.pose[2], abs=4)
    assert face.pose[1] > 10  # the head is tilted back: looking up


def test_landmarks_follow_a_shifted_and_scaled_copy(
    analyser: FaceAnalyser, photos: dict[str, Frame], analysed: dict[str, list[Face]]
) -> None:
    name = "woman_a_frontal_blue_wall_02.jpg"
    (face,) = analysed[name]
    frame = photos[name]
    for scale, shift in ((1.0, (61.0, -37.0)), (0.7, (25.0, 40.0)), (1.3, (-80.0, -20.0))):
        matrix = np.array([[scale, 0, shift[0]], [0, scale, shift[1]]])
        size = (round(frame.shape[1] * scale), round(frame.shape[0] * scale))
        moved = cv2.warpAffine(frame, matrix, size, borderMode=cv2.BORDER_REPLICATE)
        (again,) = analyser.analyse(moved)
        expected = face.landmarks[:, :2] * scale + np.array(shift)
        error = np.linalg.norm(again.landmarks[:, :2] - expected, axis=1) / (
            face.inter_ocular * scale
        )
        assert np.median(error) < 0.03, (scale, shift, np.median(error))
        assert face_distance(face, again) < 0.012


def test_tight_crop_found_by_the_whole_frame_fallback(
    analyser: FaceAnalyser, photos: dict[str, Frame], analysed: dict[str, list[Face]]
) -> None:
    name = "woman_b_frontal_dark_background.jpg"
    (face,) = analysed[name]
    x1, y1, x2, y2 = face.box.astype(int)
    crop = np.ascontiguousarray(photos[name][y1:y2, x1:x2])
    tight = cv2.resize(crop, (112, 112), interpolation=cv2.INTER_AREA)
    found = analyser.analyse(tight)
    assert len(found) == 1
    assert 0 < found[0].keypoints5[2][0] < 112


def test_descriptor_separates_person_a_on_average(analysed: dict[str, list[Face]]) -> None:
    singles = [n for n in [*EXPECTED, PROFILE] if len(analysed[n]) == 1]
    faces = {n: analysed[n][0] for n in singles}
    matrix = np.array([[face_distance(faces[a], faces[b]) for b in singles] for a in singles])
    print(
        "\n"
        + "\n".join(
            f"{n[:24]:24s} " + " ".join(f"{d:.3f}" for d in row)
            for n, row in zip(singles, matrix, strict=True)
        )
    )
    same = [face_distance(faces[a], faces[b]) for a, b in itertools.combinations(PERSON_A, 2)]
    other = [
        face_distance(faces[a], faces[b]) for a in PERSON_A for b in singles if b not in PERSON_A
    ]
    assert max(same) < np.median(other)
    assert np.mean(same) * 2 < np.median(other)


def test_analyser_is_shareable_between_threads(
    analyser: FaceAnalyser, photos: dict[str, Frame], analysed: dict[str, list[Face]]
) -> None:
    names = ["group_3_men_expressions_glasses.jpg", "man_frontal_glasses.jpg"]
    results: dict[str, list[Face]] = {}

    def work(name: str) -> None:
        results[name] = analyser.analyse(photos[name])

    threads = [threading.Thread(target=work, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in names:
        assert len(results[name]) == len(analysed[name])
        for a, b in zip(results[name], analysed[name], strict=True):
            np.testing.assert_allclose(a.landmarks, b.landmarks, atol=1e-3)


def test_one_thread_finds_the_same_faces_as_the_default_two(
    analyser: FaceAnalyser, photos: dict[str, Frame], analysed: dict[str, list[Face]]
) -> None:
    # Tiles and meshes run on the analyser's threads; in turn they must give the same faces.
    assert analyser.options.threads == min(2, os.cpu_count() or 1)
    serial = FaceAnalyser(AnalyserOptions(threads=1))
    try:
        for name in ["group_6_faces_insightface_t1.jpg", "group_8_small_faces_office.jpg"]:
            faces = serial.analyse(photos[name])
            assert len(faces) == len(analysed[name])
            for a, b in zip(faces, analysed[name], strict=True):
                np.testing.assert_allclose(a.landmarks, b.landmarks, atol=1e-3)
    finally:
        serial.close()


def test_options_filter_and_limit(analyser: FaceAnalyser, photos: dict[str, Frame]) -> None:
    frame = photos["group_8_small_faces_office.jpg"]
    limited = FaceAnalyser(AnalyserOptions(max_faces=3, order="left-right", min_size=40))
    try:
        faces = limited.analyse(frame)
    finally:
        limited.close()
    assert len(faces) == 3
    assert all(min(f.width, f.height) >= 40 for f in faces)
    assert [f.box[0] for f in faces] == sorted(f.box[0] for f in faces)


def test_mesh_constants() -> None:
    assert mesh.TRIANGLES.shape == (852, 3)
    assert mesh.TRIANGLES.dtype == np.int32
    assert len({tuple(sorted(t)) for t in mesh.TRIANGLES.tolist()}) == 852
    assert not {(49, 64, 129), (279, 294, 358)} & {tuple(sorted(t)) for t in mesh.TRIANGLES}
    assert mesh.MIRROR.shape == (478,)
    np.testing.assert_array_equal(mesh.MIRROR[mesh.MIRROR], np.arange(478))
    assert mesh.MIRROR[1] == 1  # nose tip on the midline
    assert mesh.MIRROR[33] == 263  # outer eye corners
    assert mesh.MIRROR[61] == 291  # mouth corners
    assert mesh.MIRROR[468] == 473  # iris centres
    for right, left in (
        (mesh.RIGHT_EYE, mesh.LEFT_EYE),
        (mesh.RIGHT_BROW, mesh.LEFT_BROW),
        (mesh.RIGHT_IRIS, mesh.LEFT_IRIS),
        (mesh.FACE_OVAL, mesh.FACE_OVAL),
        (mesh.LIPS_INNER, mesh.LIPS_INNER),
        (mesh.LIPS_OUTER, mesh.LIPS_OUTER),
    ):
        assert sorted(mesh.MIRROR[right].tolist()) == sorted(left.tolist())
    assert (len(mesh.LEFT_EYE), len(mesh.LIPS_OUTER), len(mesh.LIPS_INNER)) == (16, 20, 20)
    assert (len(mesh.FACE_OVAL), len(mesh.LEFT_BROW)) == (36, 10)
    assert mesh.MIRROR_PAIRS.shape == (225, 2)
    assert len(mesh.MIDLINE) == 478 - 2 * 225
    with pytest.raises(ValueError, match="read-only"):
        mesh.TRIANGLES[0, 0] = 1
    with pytest.raises(ValueError, match="read-only"):
        mesh.MIRROR[0] = 1


def test_eye_contour_is_a_polygon_on_the_real_eye(analysed: dict[str, list[Face]]) -> None:
    (face,) = analysed["man_frontal_glasses.jpg"]
    contour = face.landmarks[mesh.LEFT_EYE, :2].astype(np.float32)
    iris = tuple(float(v) for v in face.landmarks[mesh.LEFT_IRIS_CENTER, :2])
    assert cv2.pointPolygonTest(contour, iris, False) > 0
    # a simple (non self-crossing) polygon: its area equals its convex hull's up to the lids' bend
    assert cv2.contourArea(contour) > 0.8 * cv2.contourArea(cv2.convexHull(contour))
