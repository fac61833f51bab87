"""A source's fringe (``swap.hair``): hair over its forehead is not pasted onto a target."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from tests.testdata import FACES

from facegate.engine import mesh
from facegate.engine.faces import FaceAnalyser
from facegate.engine.swap.hair import BROW_MARGIN, source_fringe
from facegate.engine.swap.masks import face_axes, trimmed_oval
from facegate.engine.swap.mesh_warp import MeshWarpBackend, Tuning
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.swap.reshape import reshaped_points
from facegate.engine.types import Face, FloatArray, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")

FRINGED = ["woman_astronaut_frontal.jpg", "woman_angled_looking_up.jpg"]
BARE = [
    "woman_a_frontal_blue_wall_02.jpg",
    "woman_a_selfie_frontal_01.jpg",
    "elderly_woman_glasses_frontal.jpg",
]
TARGETS = ["woman_a_frontal_blue_wall_02.jpg", "man_frontal_glasses.jpg"]


@pytest.fixture(scope="module")
def photos() -> dict[str, tuple[Frame, Face]]:
    analyser = FaceAnalyser()
    found = {}
    for name in sorted(set(FRINGED + BARE + TARGETS)):
        frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
        faces = analyser.analyse(frame)
        assert len(faces) == 1, name
        found[name] = (frame, faces[0])
    return found


def forehead(points: FloatArray, shape: tuple[int, int]) -> npt.NDArray[np.bool_]:
    """The mask's forehead above the brows (inside the trimmed oval, its edge left out)."""
    oval = np.zeros(shape, np.uint8)
    cv2.fillPoly(oval, [np.round(trimmed_oval(points)).astype(np.int32)], (1,))
    oval = cv2.erode(oval, np.ones((5, 5), np.uint8))
    _, up = face_axes(points)
    chin = points[mesh.CHIN, :2]
    brows = points[np.concatenate([mesh.LEFT_BROW, mesh.RIGHT_BROW]), :2]
    eyes = np.linalg.norm(points[mesh.LEFT_EYE, :2].mean(0) - points[mesh.RIGHT_EYE, :2].mean(0))
    level = float(((brows - chin) @ up).max()) + BROW_MARGIN * float(eyes)
    rows, cols = np.mgrid[0 : shape[0], 0 : shape[1]]
    height = (cols - chin[0]) * up[0] + (rows - chin[1]) * up[1]
    return np.asarray((oval > 0) & (height > level), np.bool_)


def darkest(frame: Frame, region: npt.NDArray[np.bool_]) -> float:
    """The 5th percentile of L* (0-100) over ``region``: a dark band shows here."""
    lab = cv2.cvtColor(frame.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)
    return float(np.percentile(lab[..., 0][region], 5))


def test_a_fringe_is_found_on_the_fringed_foreheads_only(
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    for name in FRINGED:
        frame, face = photos[name]
        fringe = source_fringe(frame, face.landmarks)
        assert fringe is not None, name
        # on the forehead, nothing as low as the eyes
        points = face.landmarks
        _, up = face_axes(points)
        chin = points[mesh.CHIN, :2]
        eyes = points[np.concatenate([mesh.LEFT_EYE, mesh.RIGHT_EYE]), :2].mean(axis=0)
        rows, cols = np.nonzero(fringe > 0.5)
        heights = (cols - chin[0]) * up[0] + (rows - chin[1]) * up[1]
        assert rows.size > 0, name
        assert heights.min() > float((eyes - chin) @ up), name
    for name in BARE:
        frame, face = photos[name]
        assert source_fringe(frame, face.landmarks) is None, name


@pytest.mark.parametrize("source", FRINGED)
@pytest.mark.parametrize("target", TARGETS)
def test_a_sources_fringe_is_not_pasted_over_the_targets_forehead(
    photos: dict[str, tuple[Frame, Face]], source: str, target: str
) -> None:
    """The darkest of the result's forehead above the brows is the target's own forehead's,
    within 5 L*; with the fringe taken as the source's face (the old swap) it was 9-19 L*
    darker: a band of hair across every target's forehead."""
    backend, options = MeshWarpBackend(Tuning()), FaceSwapperOptions()
    state = backend.prepare_source([photos[source][1]], [photos[source][0]], options)
    frame, face = photos[target]
    out = backend.swap_face(frame.copy(), state, face, options)
    aimed = reshaped_points(
        photos[source][1].landmarks, face.landmarks, backend.tuning.reshape, backend.tuning.outline
    )
    shape = (frame.shape[0], frame.shape[1])
    own = darkest(frame, forehead(face.landmarks, shape))
    assert darkest(out, forehead(aimed, shape)) > own - 5.0
