"""The glasses check's work per face (issue 28), counted, not timed: on a face without
glasses it reads the nose bridge and the rims only, and nothing the size of the face's
region; its decision is the one the whole band gives."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser
from facegate.engine.swap import glasses
from facegate.engine.swap.glasses import (
    BRIDGE_SHARE,
    RIM_SHARE,
    frame_evidence,
    frames_box,
    glasses_band,
)
from facegate.engine.types import Face, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")

GLASSES = ["man_frontal_glasses.jpg", "elderly_woman_glasses_frontal.jpg"]
BARE = ["woman_a_selfie_frontal_01.jpg", "man_frontal_beard_closeup.jpg"]


@pytest.fixture(scope="module")
def photos() -> dict[str, tuple[Frame, Face]]:
    """Each photo as a 1080p frame's region would hold it (long side 1080 px: eyes well over
    ``WORK_EYES`` apart, so the check works at its reduced size) and at 480 px."""
    analyser = FaceAnalyser()
    found = {}
    for name in GLASSES + BARE:
        photo = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
        for side in (1080, 480):
            scale = side / max(photo.shape[:2])
            frame = np.asarray(cv2.resize(photo, None, fx=scale, fy=scale), np.uint8)
            faces = analyser.analyse(frame)
            assert len(faces) == 1, name
            found[f"{name}@{side}"] = (frame, faces[0])
    analyser.close()
    return found


class _CountingCv2:
    """``cv2`` as the glasses module sees it, recording the pixels of every image handed to
    each function."""

    def __init__(self) -> None:
        self.pixels: dict[str, list[int]] = {}

    def __getattr__(self, name: str) -> Any:
        work = getattr(cv2, name)
        if not callable(work) or name.startswith("MORPH_") or name.isupper():
            return work

        def run(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], np.ndarray) and args[0].ndim >= 2:
                self.pixels.setdefault(name, []).append(args[0].shape[0] * args[0].shape[1])
            return work(*args, **kwargs)

        return run


def _band_pixels(frame: Frame, face: Face) -> tuple[int, int]:
    """The pixels of the glasses band's box with its margin, in the image and at the
    check's working size (what the line filter ran on before issue 28, glasses or not)."""
    _, _, w, h = cv2.boundingRect(glasses_band(face.landmarks, frame.shape[:2]))
    pad = max(2, round(0.1 * max(w, h)))
    w, h = w + 2 * pad, h + 2 * pad
    right = face.landmarks[glasses.mesh.RIGHT_EYE, :2].mean(axis=0)
    left = face.landmarks[glasses.mesh.LEFT_EYE, :2].mean(axis=0)
    eyes = float(np.linalg.norm(left - right))
    factor = min(1.0, glasses.WORK_EYES / eyes)
    return w * h, round(w * h * factor * factor)


@pytest.mark.parametrize("name", BARE)
@pytest.mark.parametrize("side", [1080, 480])
def test_a_bare_face_is_checked_on_the_bridge_and_rims_only(
    photos: dict[str, tuple[Frame, Face]], name: str, side: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame, face = photos[f"{name}@{side}"]
    crop, band = _band_pixels(frame, face)
    counting = _CountingCv2()
    monkeypatch.setattr(glasses, "cv2", counting)
    assert frames_box(frame, face.landmarks) is None
    # The line filter (two morphologies) ran on the bridge and rims' box, well under the
    # band's (the whole band's lines are looked for only where glasses are found).
    filtered = counting.pixels["morphologyEx"]
    assert len(filtered) == 2
    assert max(filtered) < 0.6 * band
    # No raster the size of the frame or the face's region: the band's box is found from
    # its hull (a region-sized band and its bounding-box scan cost ~1 ms a face at 1080p).
    drawn = [p for name, sizes in counting.pixels.items() if name != "resize" for p in sizes]
    assert max(drawn) < 1.5 * crop
    assert max(drawn) < frame.shape[0] * frame.shape[1] / 8


@pytest.mark.parametrize("name", GLASSES + BARE)
def test_the_decision_is_the_whole_images(photos: dict[str, tuple[Frame, Face]], name: str) -> None:
    """At 480 px the check works at the photo's own size: its decision from the box must be
    the one :func:`frame_evidence` gives over the whole image."""
    frame, face = photos[f"{name}@480"]
    bridge, rims = frame_evidence(frame, face.landmarks)
    whole = bridge >= BRIDGE_SHARE and rims >= RIM_SHARE
    assert (frames_box(frame, face.landmarks) is not None) == whole == (name in GLASSES)
