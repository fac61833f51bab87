"""Skin tone of a swap (``engine.tone``): the swapped cheeks keep the target's own tone."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine import mesh
from facegate.engine.faces import FaceAnalyser
from facegate.engine.swap.color import is_grayscale
from facegate.engine.swap.masks import polygon_mask
from facegate.engine.swap.mesh_warp import MeshWarpBackend, Tuning
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.swap.reshape import reshaped_points
from facegate.engine.tone import MIN_PIXELS, cheek_area, cheek_lab, cheek_patches, tone_delta_e
from facegate.engine.types import Face, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")

#: Small copies (longer side) keep the module fast; the faces are still 100-250 px tall.
SIDE = 480
LIGHT = "woman_a_frontal_blue_wall_02.jpg"  # pale skin, cool daylight
WARM = "woman_b_frontal_dark_background.jpg"  # darker skin, warm light, cheek highlights
BEARD = "man_frontal_beard_closeup.jpg"
#: Pairs whose cheeks differ most (CIE76 7-19 with the swap before issue 29).
PAIRS = [(LIGHT, WARM), (WARM, LIGHT), (BEARD, LIGHT)]


def small(frame: Frame) -> Frame:
    scale = SIDE / max(frame.shape[:2])
    return np.asarray(cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA))


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


@pytest.fixture(scope="module")
def photos(analyser: FaceAnalyser) -> dict[str, tuple[Frame, Face]]:
    found = {}
    for name in (LIGHT, WARM, BEARD):
        frame = small(cv2.imread(str(FACES / name), cv2.IMREAD_COLOR))
        faces = analyser.analyse(frame)
        assert len(faces) == 1, name
        found[name] = (frame, faces[0])
    return found


def swap(
    photos: dict[str, tuple[Frame, Face]],
    source: tuple[Frame, Face],
    target: str,
    tuning: Tuning | None = None,
    **options: object,
) -> Frame:
    backend = MeshWarpBackend(tuning or Tuning())
    opts = FaceSwapperOptions.model_validate(options)
    state = backend.prepare_source([source[1]], [source[0]], opts)
    frame, face = photos[target]
    return backend.swap_face(frame.copy(), state, face, opts)


def test_the_cheek_patches_lie_on_the_skin_of_the_cheeks(
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    frame, face = photos[LIGHT]
    shape = (frame.shape[0], frame.shape[1])
    patches = cheek_patches(face.landmarks, shape)
    oval = polygon_mask(face.landmarks, mesh.FACE_OVAL, shape) > 0.5
    features = np.zeros(shape, bool)
    for part in (mesh.LEFT_EYE, mesh.RIGHT_EYE, mesh.NOSE, mesh.LIPS_OUTER):
        hull = cv2.convexHull(np.round(face.landmarks[part, :2]).astype(np.int32))
        drawn = np.zeros(shape, np.uint8)
        cv2.fillConvexPoly(drawn, hull, (1,))
        features |= drawn > 0
    assert patches.sum() > 50
    assert (patches & ~oval).sum() == 0
    assert (patches & features).sum() < 0.05 * patches.sum()
    # Two patches, one each side of the nose.
    count, _ = cv2.connectedComponents(patches.astype(np.uint8))
    assert count - 1 == 2


def test_the_cheek_area_holds_the_patches_and_stays_inside_the_face(
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    """Where the swap matches the tone at the finer scale (``Tuning.cheek_radius``)."""
    frame, face = photos[LIGHT]
    shape = (frame.shape[0], frame.shape[1])
    area = cheek_area(face.landmarks, shape, Tuning().cheek_radius)
    patches = cheek_patches(face.landmarks, shape)
    oval = polygon_mask(face.landmarks, mesh.FACE_OVAL, shape) > 0.5
    assert area[patches].min() > 0.5
    assert area[~oval].max() < 0.05
    assert (area > 0.5).sum() < 0.25 * oval.sum()  # the cheeks, not the whole face


def test_the_figure_is_the_cie76_distance_of_the_cheeks(
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    frame, face = photos[LIGHT]
    assert tone_delta_e(frame, frame, face.landmarks) == 0.0
    tinted = cv2.add(frame, np.full_like(frame, (0, 0, 30)))  # redder
    own, shifted = cheek_lab(frame, face.landmarks), cheek_lab(tinted, face.landmarks)
    assert own is not None
    assert shifted is not None
    expected = float(np.linalg.norm(shifted - own))
    assert tone_delta_e(tinted, frame, face.landmarks) == pytest.approx(expected)
    assert 5.0 < expected < 40.0
    tiny = np.zeros((4, 4, 3), np.uint8)  # patches off the frame: no figure
    assert np.isnan(tone_delta_e(tiny, tiny, face.landmarks))


def test_the_cheeks_colour_is_read_where_the_patches_lie_even_at_the_frames_edge(
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    # cheek_lab reads a window around the patches only (a 1080p report: ~11 -> ~1 ms); its
    # figure is the mean over the whole-frame mask's pixels, also for a face cut by an edge.
    frame, face = photos[WARM]
    height, width = frame.shape[:2]
    for dx, dy in ((0, 0), (-0.45 * width, 0), (0, 0.55 * height), (0.5 * width, -0.4 * height)):
        landmarks = face.landmarks.copy()
        landmarks[:, 0] += dx
        landmarks[:, 1] += dy
        patches = cheek_patches(landmarks, (height, width))
        found = cheek_lab(frame, landmarks)
        if patches.sum() < MIN_PIXELS:
            assert found is None
            continue
        lab = cv2.cvtColor(frame.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)
        assert found is not None
        np.testing.assert_allclose(found, lab[patches].mean(axis=0), atol=1e-3)


def test_the_swapped_cheeks_keep_the_targets_tone(photos: dict[str, tuple[Frame, Face]]) -> None:
    """On the three pairs whose skin differs most (among the worst of benchmarks/quality.py's
    104, where the median is 2.5): each result's cheeks a CIE76 ΔE of at most 8, the issue's
    worst pair (5.2, 5.7, 6.5 measured at this size); without the finer match on the cheeks
    (``Tuning.cheek_tone_sigma`` 0) 7.6, 7.1, 8.1; with one tone offset for the whole face
    and all of the source's mid band on the skin (``skin_shading`` ``source``) 15.0, 12.8,
    12.9."""
    ours, coarse, theirs = [], [], []
    for source, target in PAIRS:
        frame, face = photos[target]
        # The result's cheeks where the swap put them (its mesh moves towards the source's).
        tuning = Tuning()
        aimed = reshaped_points(
            photos[source][1].landmarks, face.landmarks, tuning.reshape, tuning.outline
        )
        out = swap(photos, photos[source], target)
        ours.append(tone_delta_e(out, frame, face.landmarks, aimed))
        broad = swap(photos, photos[source], target, Tuning(cheek_tone_sigma=0.0))
        coarse.append(tone_delta_e(broad, frame, face.landmarks, aimed))
        one_offset = Tuning(tone_sigma=0.0, cheek_tone_sigma=0.0)
        carried = swap(photos, photos[source], target, one_offset, skin_shading="source")
        theirs.append(tone_delta_e(carried, frame, face.landmarks, aimed))
    assert max(ours) <= 8.0, ours
    for tone, broader, carried in zip(ours, coarse, theirs, strict=True):
        assert tone <= broader - 0.5, (ours, coarse)  # the cheeks' own match counts
        assert tone <= 0.75 * carried, (ours, theirs)  # the figure sees the source's cheeks


def test_a_grey_target_stays_grey(photos: dict[str, tuple[Frame, Face]]) -> None:
    frame, face = photos[WARM]
    grey = cv2.cvtColor(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    photos = {**photos, "grey": (grey, face)}
    out = swap(photos, photos[LIGHT], "grey")
    assert is_grayscale(out)


@pytest.mark.parametrize("kind", ["grey", "low resolution"])
def test_a_poor_source_gives_a_face_in_the_targets_colour(
    photos: dict[str, tuple[Frame, Face]], analyser: FaceAnalyser, kind: str
) -> None:
    frame, _ = photos[LIGHT]
    if kind == "grey":
        poor = cv2.cvtColor(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    else:  # a face ~40 px tall
        poor = cv2.resize(frame, None, fx=0.25, fy=0.25, interpolation=cv2.INTER_AREA)
    faces = analyser.analyse(poor)
    assert len(faces) == 1
    target, face = photos[WARM]
    out = swap(photos, (np.asarray(poor), faces[0]), WARM)
    swapped, own = cheek_lab(out, face.landmarks), cheek_lab(target, face.landmarks)
    assert swapped is not None
    assert own is not None
    # The target's warm chroma (a*, b*), not a pale or greyish face.
    assert float(np.linalg.norm(swapped[1:] - own[1:])) <= 4.0, (swapped, own)
    assert tone_delta_e(out, target, face.landmarks) <= 6.0
