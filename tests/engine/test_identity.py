"""The independent recogniser (dlib's ResNet descriptor) on the real test photos, and the
identity a built-in swap carries, measured by it (a test-sized benchmarks/quality.py: four
pairs, now and with the tuning from before issue 16)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import (
    DETECT_SIDE,
    RESNET,
    SAME_PERSON_DISTANCE,
    SHAPE_PREDICTOR,
    FaceRecogniser,
    IdentityDescriber,
    available,
    dlib_box,
    identity_distance,
    models_dir,
)
from facegate.engine.networks import dlib_resnet
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.selection import SelectorSpec
from facegate.engine.swap.mesh_warp import BEFORE_IDENTITY, MeshWarpBackend, Tuning
from facegate.engine.swap.options import FaceSwapperOptions
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


def test_the_onnx_resnet_gives_dlibs_own_descriptors(
    photos: dict[str, tuple[Frame, Face]], recogniser: FaceRecogniser
) -> None:
    # The ResNet runs on onnxruntime from the weights of dlib's file: on every photo the
    # descriptor equals dlib's compute_face_descriptor of the same chip (the same judge).
    import dlib

    folder = models_dir()
    assert folder is not None
    dlibs_own = dlib.face_recognition_model_v1(str(folder / RESNET))
    chips = [recogniser.chip(*photos[name]) for name in photos]
    ours = recogniser.descriptors(chips)
    assert ours.shape == (len(chips), 128)
    for chip, vector in zip(chips, ours, strict=True):
        expected = np.asarray(dlibs_own.compute_face_descriptor(chip), np.float32)
        assert float(np.abs(vector - expected).max()) < 1e-4


class SearchedSizes:
    """Stands in front of dlib's detector and records the size of every image it searches."""

    def __init__(self, detector: object) -> None:
        self.detector = detector
        self.sizes: list[tuple[int, int]] = []

    def __call__(self, image: Frame, upsample: int) -> object:
        self.sizes.append((image.shape[1], image.shape[0]))
        return self.detector(image, upsample)  # type: ignore[operator]


def close_up_1080(analyser: FaceAnalyser) -> tuple[Frame, Face]:
    """The bearded man's close-up fitted into 1920x1080: a face of ~550 px."""
    image = cv2.imread(str(FACES / "man_frontal_beard_closeup.jpg"), cv2.IMREAD_COLOR)
    assert image is not None
    scale = min(1920 / image.shape[1], 1080 / image.shape[0])
    frame = np.asarray(cv2.resize(image, None, fx=scale, fy=scale), np.uint8)
    (face,) = analyser.analyse(frame)
    return frame, face


def test_the_engines_recogniser_searches_a_large_face_at_a_bounded_size(
    analyser: FaceAnalyser,
    recogniser: FaceRecogniser,
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    # The quality report describes each swapped face twice; dlib's detector on the full-size
    # crop around a 1080p close-up took ~150 ms of each. The engine's recogniser searches a
    # copy where the face is DETECT_SIDE px: the pixels searched are bounded, whatever the
    # face's size, and the descriptor stays within 0.06 of the judge's (who searches at full
    # size; two photos of one person are up to 0.6 apart).
    frame, face = close_up_1080(analyser)
    left, _top, right, _bottom = dlib_box(face)
    assert right - left > 2 * DETECT_SIDE
    engines = IdentityDescriber().recogniser
    (detector,) = engines._detectors
    searched = SearchedSizes(detector)
    engines._detectors[:] = [searched]
    fast = engines.describe(frame, face)
    (size,) = searched.sizes
    assert max(size) <= 3 * DETECT_SIDE + 2  # the crop is three face boxes wide
    assert identity_distance(fast, recogniser.describe(frame, face)) < 0.06
    # A face up to DETECT_SIDE px is searched as it is: its descriptor is the judge's own.
    small, small_face = photos["woman_a_fullbody_small_face_03.jpg"]
    assert dlib_box(small_face)[2] - dlib_box(small_face)[0] <= DETECT_SIDE
    assert (
        identity_distance(
            engines.describe(small, small_face), recogniser.describe(small, small_face)
        )
        < 1e-6
    )


def test_a_file_that_is_not_dlibs_network_is_refused(tmp_path: Path) -> None:
    folder = models_dir()
    assert folder is not None
    data = (folder / RESNET).read_bytes()
    for broken in (data[: len(data) // 2], data + b"\x01\x02", b"\x01\x01\x04junk"):
        path = tmp_path / "net.dat"
        path.write_bytes(broken)
        with pytest.raises(dlib_resnet.FormatError):
            dlib_resnet.read(path)


#: Source → target pairs for the test-sized identity check (different people each).
REALISM_FIELDS = ("skin_mid", "feature_grow", "tone_match", "keep_glasses", "remove_source_glasses")
PAIRS = [
    ("man_frontal_glasses.jpg", "woman_a_selfie_frontal_01.jpg"),
    ("woman_b_frontal_dark_background.jpg", "woman_astronaut_frontal.jpg"),
    ("woman_a_selfie_frontal_01.jpg", "elderly_woman_glasses_frontal.jpg"),
    ("woman_astronaut_frontal.jpg", "man_frontal_glasses.jpg"),
]


def swap_distances(
    tuning: Tuning,
    photos: dict[str, tuple[Frame, Face]],
    descriptors: dict[str, FloatArray],
    analyser: FaceAnalyser,
    recogniser: FaceRecogniser,
) -> list[tuple[float, float]]:
    """(d(result, source), d(result, target)) per pair, the result still found as one face."""
    backend, options = MeshWarpBackend(tuning), FaceSwapperOptions()
    distances = []
    for source, target in PAIRS:
        state = backend.prepare_source([photos[source][1]], [photos[source][0]], options)
        frame, face = photos[target]
        result = backend.swap_face(frame.copy(), state, face, options)
        found = analyser.analyse(result)
        assert len(found) == 1, (source, target)
        vector = recogniser.describe(result, found[0])
        distances.append(
            (
                identity_distance(vector, descriptors[source]),
                identity_distance(vector, descriptors[target]),
            )
        )
    return distances


def test_the_swap_carries_the_source_identity(
    photos: dict[str, tuple[Frame, Face]],
    descriptors: dict[str, FloatArray],
    analyser: FaceAnalyser,
    recogniser: FaceRecogniser,
) -> None:
    now = swap_distances(Tuning(), photos, descriptors, analyser, recogniser)
    # Issue 16's levers alone: the tuning from before them with today's realism (issue 29:
    # the target's skin tone, its glasses kept, a source's painted out, which cost some
    # identity of their own on these glasses pairs: benchmarks/quality.py reports it).
    realism = {name: getattr(Tuning(), name) for name in REALISM_FIELDS}
    before_tuning = dataclasses.replace(BEFORE_IDENTITY, **realism)
    before = swap_distances(before_tuning, photos, descriptors, analyser, recogniser)
    print("\nd(result, source), d(result, target) now:", now, "before:", before)
    for (source, target), (to_source, to_target) in zip(PAIRS, now, strict=True):
        assert to_source < SAME_PERSON_DISTANCE, (source, target, to_source)
        assert to_source < to_target, (source, target, to_source, to_target)
    # The same pairs with the swap as it was: measurably less of the source.
    assert np.median([d for d, _ in now]) < np.median([d for d, _ in before]) - 0.05


#: Pairs that did not transfer while the blend mask's feather lay 1.5 sigmas inside the face
#: (d(result, source) 0.613 and 0.622 then; 0.580 and 0.593 with ``Tuning.mask_inset`` 0).
RIM_PAIRS = [
    ("woman_angled_looking_up.jpg", "man_frontal_beard_closeup.jpg"),
    ("elderly_woman_glasses_frontal.jpg", "woman_angled_looking_up.jpg"),
]


def test_the_face_rim_is_the_sources(analyser: FaceAnalyser, recogniser: FaceRecogniser) -> None:
    """The mask's feather is centred on the face's outline (the warp's coverage keeps what
    lies past it off): the cheeks' and jaw's rim is the source's, which carries these pairs."""
    backend, options = MeshWarpBackend(), FaceSwapperOptions()
    for source, target in RIM_PAIRS:
        (s_frame, s_face), (t_frame, t_face) = (
            (read(name), analyser.analyse(read(name))[0]) for name in (source, target)
        )
        state = backend.prepare_source([s_face], [s_frame], options)
        result = backend.swap_face(t_frame.copy(), state, t_face, options)
        found = analyser.analyse(result)
        assert len(found) == 1, (source, target)
        vector = recogniser.describe(result, found[0])
        to_source = identity_distance(vector, recogniser.describe(s_frame, s_face))
        to_target = identity_distance(vector, recogniser.describe(t_frame, t_face))
        assert to_source < SAME_PERSON_DISTANCE, (source, target, to_source)
        assert to_source < to_target, (source, target, to_source, to_target)


def read(name: str) -> Frame:
    frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
    assert frame is not None, name
    return np.asarray(frame, np.uint8)


def test_reference_mode_swaps_person_a_only_among_strangers(face_engine: EngineRuntime) -> None:
    # Person A's blue-wall photo beside a photo of three men, one image: with another photo
    # of A as the reference, only A's face changes (the recogniser's descriptor decides).
    person_a, group = read(PERSON_A[1]), read("group_3_men_expressions_glasses.jpg")
    height, split = max(person_a.shape[0], group.shape[0]), person_a.shape[1]
    scene = np.zeros((height, split + group.shape[1], 3), np.uint8)
    scene[: person_a.shape[0], :split] = person_a
    scene[: group.shape[0], split:] = group
    pipeline = face_engine.pipeline(PipelineSpec(selector=SelectorSpec(mode="reference")))
    result = pipeline.run_image(
        [read("woman_astronaut_frontal.jpg")], scene, reference=read(PERSON_A[0])
    )
    changed = np.abs(result.astype(int) - scene.astype(int)).max(axis=2) > 8
    assert changed[:, :split].sum() > 1000
    assert not changed[:, split:].any()
