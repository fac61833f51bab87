"""``mask_types`` ``occlusion``: hands and objects in front of the target face stay in front.

The occluded targets are made from the test photos (tests/occlusionkit.py): a real hand and
flat-coloured objects. benchmarks/occlusion_bench.py measures the same over every
single-face photo.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.occlusionkit import hand_patch, in_face, load, only_face, paste, unchanged
from tests.testdata import FACES

from facegate.engine.errors import InvalidOptions
from facegate.engine.faces import FaceAnalyser
from facegate.engine.processors.base import JobContext
from facegate.engine.processors.face_swapper import FaceSwapper
from facegate.engine.swap.occlusion import OcclusionDetector, search_box
from facegate.engine.types import Face, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")


@pytest.fixture(scope="module")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


def swap(
    swapper: FaceSwapper, source: tuple[Frame, Face], frame: Frame, face: Face, **options: Any
) -> Frame:
    ctx = JobContext(
        options={"face_swapper": swapper.validate_options(options)},
        source_faces=[source[1]],
        source_frames=[source[0]],
        selected=[(0, face)],
    )
    swapper.prepare(ctx)
    return swapper.process_frame(frame, ctx)


def occluded_swaps(
    analyser: FaceAnalyser, swapper: FaceSwapper, source: str, target: str, patch: Frame
) -> tuple[Frame, Face, np.ndarray, Frame, Frame]:
    """The occluded target, its face, the occluder inside the face, and its swaps with
    ``mask_types`` ["box"] and ["box", "occlusion"]."""
    src = load(source)
    clean = load(target)
    occluded, where = paste(clean, only_face(analyser, clean), patch)
    face = only_face(analyser, occluded)  # the mesh of the occluded face, as a job gets it
    source_face = (src, only_face(analyser, src))
    # The outline is kept with occlusion (the region around the face does not move): the
    # swap without it is compared at the same geometry.
    box = swap(swapper, source_face, occluded, face, mask_types=["box"], keep_outline=True)
    kept = swap(swapper, source_face, occluded, face, mask_types=["box", "occlusion"])
    return occluded, face, where & in_face(face, occluded.shape), box, kept


def test_a_real_hand_in_front_of_the_face_stays_in_front(
    swapper: FaceSwapper, analyser: FaceAnalyser
) -> None:
    occluded, face, hand, box, kept = occluded_swaps(
        analyser, swapper, "man_frontal_glasses.jpg", "woman_a_selfie_frontal_01.jpg", hand_patch()
    )
    assert hand.sum() > 2000
    # The hand model finds it (a hand is skin-coloured: the colour cue alone would not).
    x0, y0, x1, y1 = search_box(face, occluded.shape, 0.5)
    assert OcclusionDetector().find_hands(np.ascontiguousarray(occluded[y0:y1, x0:x1]))
    assert unchanged(box, occluded, hand) < 0.2  # without it the swap paints over the hand
    assert unchanged(kept, occluded, hand) > 0.9
    # The rest of the face is still swapped.
    rest = in_face(face, occluded.shape) & ~hand
    assert unchanged(kept, box, rest) > 0.9
    # ...and changed by it: under half of it left as it was. (The source wears glasses: where
    # they were painted out the target's own skin shows, and the skin keeps the target's tone,
    # so less of the face differs from the target than the 0.3 this held before issue 29.)
    assert unchanged(kept, occluded, rest) < 0.5


@pytest.mark.parametrize(
    ("target", "colour"),
    [
        ("man_frontal_beard_closeup.jpg", (200, 120, 40)),
        ("woman_b_frontal_dark_background.jpg", (20, 20, 20)),
    ],
)
def test_an_object_in_front_of_the_face_stays_in_front(
    swapper: FaceSwapper, analyser: FaceAnalyser, target: str, colour: tuple[int, int, int]
) -> None:
    patch = np.full((40, 60, 3), colour, np.uint8)  # a flat-coloured object
    occluded, face, thing, box, kept = occluded_swaps(
        analyser, swapper, "woman_a_selfie_frontal_01.jpg", target, patch
    )
    assert unchanged(box, occluded, thing) < 0.2
    assert unchanged(kept, occluded, thing) > 0.9
    rest = in_face(face, occluded.shape) & ~thing
    assert unchanged(kept, occluded, rest) < 0.3


@pytest.mark.parametrize(
    "name",
    [
        "woman_a_selfie_frontal_01.jpg",
        "man_frontal_glasses.jpg",
        "elderly_woman_glasses_frontal.jpg",
    ],
)
def test_a_clean_face_has_no_occluder(analyser: FaceAnalyser, name: str) -> None:
    frame = load(name)
    face = only_face(analyser, frame)
    found = OcclusionDetector().mask(frame, face)
    x0, y0, x1, y1 = found.box
    share = float((found.mask > 0.5)[in_face(face, frame.shape)[y0:y1, x0:x1]].mean())
    assert share < 0.02


@pytest.mark.parametrize(
    "raw",
    [
        {"mask_types": ["occlusion"]},
        {"mask_types": ["box", "box"]},
        {"mask_types": ["box", "region"]},
        {"mask_types": []},
    ],
)
def test_mask_types_are_checked(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptions, match="mask_types"):
        FaceSwapper.validate_options(raw)


def test_occlusion_is_off_by_default() -> None:
    options = FaceSwapper.validate_options({})
    assert options.mask_types == ("box",)
    assert not options.occlusion
    assert FaceSwapper.validate_options({"mask_types": ["box", "occlusion"]}).occlusion
