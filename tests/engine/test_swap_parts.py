"""Unit tests of the mesh_warp parts on synthetic meshes (no photos, no detector)."""

from __future__ import annotations

import numpy as np

from facegate.engine import mesh
from facegate.engine.processors.base import JobContext
from facegate.engine.processors.face_debugger import FaceDebugger
from facegate.engine.runtime import EngineRuntime
from facegate.engine.swap.blend import feather_blend
from facegate.engine.swap.color import Shading, is_grayscale, match_lighting
from facegate.engine.swap.geometry import rasterise_ids, signed_areas, triangle_affines
from facegate.engine.swap.masks import face_mask, keep_mask, openness, trimmed_oval
from facegate.engine.swap.symmetry import (
    MIRROR_TRIANGLE,
    UNUSABLE,
    choose_mirrored,
    usable_triangles,
)
from facegate.engine.swap.warp import mesh_maps, warp_face
from facegate.engine.types import Face


def synthetic_face(size: float = 200.0, mouth_open: float = 0.0) -> np.ndarray:
    """A flat, symmetric 'face': landmarks on a disc, mirrored pairs at mirrored x.

    Built from the mesh's own mirror map so that left/right regions are consistent: each
    landmark sits at a deterministic pseudo-random spot, its mirror at the reflected spot.
    """
    rng = np.random.default_rng(0)
    points = np.zeros((mesh.N_LANDMARKS, 3), np.float32)
    for index in range(mesh.N_LANDMARKS):
        partner = int(mesh.MIRROR[index])
        if partner < index and partner >= 0:
            points[index] = points[partner] * np.array([-1, 1, 1], np.float32)
        elif partner == index:
            points[index] = (0.0, rng.uniform(-1, 1), 0.0)
        else:
            points[index] = (rng.uniform(0.1, 1), rng.uniform(-1, 1), 0.0)
    points[:, :2] = points[:, :2] * size / 2 + size
    return points


def test_affines_map_triangles_exactly() -> None:
    rng = np.random.default_rng(1)
    dst = rng.uniform(0, 100, (50, 3, 2)).astype(np.float32)
    src = rng.uniform(0, 100, (50, 3, 2)).astype(np.float32)
    affines = triangle_affines(dst, src)
    mapped = np.einsum("tij,tkj->tki", affines[:, :, :2], dst) + affines[:, None, :, 2]
    np.testing.assert_allclose(mapped, src, atol=1e-2)


def test_raster_draws_near_triangle_over_far() -> None:
    points = np.array([[0, 0, 5], [40, 0, 5], [0, 40, 5], [0, 0, -5], [40, 0, -5], [0, 40, -5]])
    triangles = np.array([[0, 2, 1], [3, 5, 4]], np.int32)
    ids = rasterise_ids(points.astype(np.float32), (50, 50), triangles)
    assert ids[5, 5] == 1  # the nearer (smaller z) triangle wins
    assert ids[45, 45] == -1


def test_signed_area_sign_flips_with_mirroring() -> None:
    points = np.zeros((mesh.N_LANDMARKS, 3), np.float32)
    points[:3, :2] = [[0, 0], [10, 0], [0, 10]]
    triangles = np.array([[0, 1, 2]], np.int32)
    flipped = points * np.array([-1, 1, 1], np.float32)
    assert signed_areas(points, triangles)[0] == -signed_areas(flipped, triangles)[0]


def test_mirror_triangles_are_an_involution() -> None:
    has = MIRROR_TRIANGLE >= 0
    assert has.sum() > 800
    back = MIRROR_TRIANGLE[MIRROR_TRIANGLE[has]]
    assert (back == np.nonzero(has)[0]).mean() > 0.98


def test_choose_mirrored_only_where_source_is_poor_and_target_sees_it() -> None:
    good = np.ones(len(mesh.TRIANGLES), np.float32)
    assert not choose_mirrored(good, good).any()
    tri = int(np.nonzero(MIRROR_TRIANGLE >= 0)[0][0])
    source = good.copy()
    source[tri] = 0.05
    assert choose_mirrored(source, good)[tri]
    target = good.copy()
    target[tri] = 0.1  # the target is turned the same way: keep the source's own texture
    assert not choose_mirrored(source, target)[tri]


def test_triangles_a_turned_source_does_not_show_stay_uncovered() -> None:
    # A triangle poor in the source and in its mirror (a profile's nose side) is not
    # textured when the warp is asked for a least quality; by default everything is.
    good = np.ones(len(mesh.TRIANGLES), np.float32)
    points = synthetic_face()
    image = np.full((400, 400, 3), 200, np.uint8)
    drawn = np.unique(warp_face(image, points, good, points, (400, 400)).ids)
    tri = int(next(t for t in drawn if t >= 0 and MIRROR_TRIANGLE[t] >= 0))
    source = good.copy()
    source[tri] = source[MIRROR_TRIANGLE[tri]] = 0.05
    mirrored = choose_mirrored(source, good)
    assert not usable_triangles(source, mirrored, UNUSABLE)[tri]
    assert usable_triangles(source, mirrored, UNUSABLE).sum() == len(good) - 2
    shown = warp_face(image, points, source, points, (400, 400))
    kept = warp_face(image, points, source, points, (400, 400), least_quality=UNUSABLE)
    assert (shown.ids == tri).any()
    assert not (kept.ids == tri).any()
    assert kept.coverage.sum() < shown.coverage.sum()
    assert (kept.coverage == (kept.ids >= 0)).all()


def test_pasting_a_warp_is_its_sample_where_covered() -> None:
    # The reshaped target is remapped straight into its background: covered pixels take the
    # warp's samples (the same as a sample onto a blank region), the others keep theirs.
    points = synthetic_face()
    moved = points.copy()
    moved[:, 0] += 3.0
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, (400, 400, 3), dtype=np.uint8)
    background = rng.integers(0, 256, (400, 400, 3), dtype=np.uint8)
    maps, _ = mesh_maps(points, None, moved, (400, 400))
    out = background.copy()
    maps.paste(image, out)
    covered = warp_face(image, points, None, moved, (400, 400)).coverage
    assert covered.sum() > 10_000
    assert np.array_equal(out[covered], maps.sample(image)[covered])
    assert np.array_equal(out[~covered], background[~covered])


def test_match_lighting_on_a_window_is_the_whole_cropped() -> None:
    # The swap matches the lighting only on the window where its mask is non-zero: with the
    # skin inside that window, the result there is the whole region's, to the bit.
    rng = np.random.default_rng(3)

    def lab() -> np.ndarray:
        return rng.normal(0.0, 5.0, (60, 80, 3)).astype(np.float32)

    base = lab() + np.array([60.0, 10.0, 15.0], np.float32)
    shading = Shading(high=lab(), base=base, mid=lab())
    detail, mid = lab(), lab()
    core = rng.uniform(0.0, 1.0, (60, 80)).astype(np.float32)
    skin = np.zeros((60, 80), np.float32)
    skin[20:40, 25:60] = 1.0
    whole = match_lighting(detail, shading, skin, False, (0.85, 1.5), mid, core)
    rows, cols = slice(15, 45), slice(20, 70)
    window = match_lighting(
        detail[rows, cols],
        shading.crop(rows, cols),
        skin[rows, cols],
        False,
        (0.85, 1.5),
        mid[rows, cols],
        core[rows, cols],
    )
    assert np.array_equal(window, whole[rows, cols])


def test_face_mask_trims_forehead_and_stays_in_oval() -> None:
    face = mesh_face_points()
    shape = (400, 400)
    mask = face_mask(face, shape, (0, 0, 0, 0), 0.3)
    top_of_mesh = int(face[mesh.FACE_OVAL, 1].min())
    brows = int(face[np.concatenate([mesh.LEFT_BROW, mesh.RIGHT_BROW]), 1].min())
    assert mask[: top_of_mesh + (brows - top_of_mesh) // 3].max() < 0.05
    assert trimmed_oval(face)[:, 1].min() > top_of_mesh
    padded = face_mask(face, shape, (0, 0, 30, 0), 0.0)
    chin = int(face[mesh.CHIN, 1])
    assert padded[chin - 20 :].max() == 0.0


def test_keep_mask_grows_to_lips_when_mouths_differ() -> None:
    closed = mesh_face_points()
    opened = closed.copy()
    opened[14, 1] += 40  # lower inner lip down: an open mouth
    shape = (400, 400)
    assert openness(opened)[0] > openness(closed)[0]
    same = keep_mask(closed, closed, shape)
    differ = keep_mask(opened, closed, shape)
    assert differ.sum() > same.sum()
    assert keep_mask(opened, closed, shape, expression=False).sum() == same.sum()


def test_is_grayscale() -> None:
    grey = np.repeat(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), 3, axis=2)
    assert is_grayscale(grey)
    colour = grey.copy()
    colour[..., 2] //= 2
    assert not is_grayscale(colour)


def test_feather_blend_bounds() -> None:
    target = np.full((8, 8, 3), 10, np.uint8)
    face = np.full((8, 8, 3), 200, np.uint8)
    mask = np.ones((8, 8), np.float32)
    assert np.array_equal(feather_blend(target, face, mask, 0.0), target)
    assert np.array_equal(feather_blend(target, face, mask, 1.0), face)


def test_debugger_draws_only_near_faces(face_engine: EngineRuntime) -> None:
    points = mesh_face_points()
    box = np.array([*points[:, :2].min(0), *points[:, :2].max(0)], np.float32)
    face = Face(box=box, score=0.9, keypoints5=points[[468, 473, 1, 61, 291], :2], landmarks=points)
    debugger = face_engine.registry.get("face_debugger")
    assert isinstance(debugger, FaceDebugger)
    frame = np.zeros((400, 400, 3), np.uint8)
    for items in (["box"], ["keypoints"], ["mesh"], ["mask"]):
        opts = debugger.validate_options({"items": items})
        ctx = JobContext(options={"face_debugger": opts}, target_faces=[face])
        out = debugger.process_frame(frame, ctx)
        assert out.any(), items
        assert not out[:, 390:].any()
    assert not frame.any()


def mesh_face_points() -> np.ndarray:
    """An upright frontal face: the symmetric synthetic mesh with its oval, brows, eyes and
    lips moved to where a real face has them (what the mask logic reads)."""
    points = synthetic_face()
    points[:, :2] = _layout() + 200.0
    return points


def _layout() -> np.ndarray:
    """Landmark (x, y) offsets of a frontal face: oval on an ellipse, brows, eyes, lips."""
    layout = np.zeros((mesh.N_LANDMARKS, 2))
    oval = mesh.FACE_OVAL
    angles = np.linspace(-np.pi / 2, 1.5 * np.pi, len(oval), endpoint=False)
    layout[oval] = np.c_[120 * np.cos(angles), 160 * np.sin(angles)]
    layout[mesh.FOREHEAD_TOP] = (0, -160)
    layout[mesh.CHIN] = (0, 160)
    for brow, x in ((mesh.LEFT_BROW, 50), (mesh.RIGHT_BROW, -50)):
        layout[brow] = np.c_[np.linspace(x - 30, x + 30, len(brow)), np.full(len(brow), -60)]
    for eye, x in ((mesh.LEFT_EYE, 50), (mesh.RIGHT_EYE, -50)):
        a = np.linspace(0, 2 * np.pi, len(eye), endpoint=False)
        layout[eye] = np.c_[x + 25 * np.cos(a), -30 + 8 * np.sin(a)]
    for lips, r in ((mesh.LIPS_OUTER, 15), (mesh.LIPS_INNER, 5)):
        a = np.linspace(0, 2 * np.pi, len(lips), endpoint=False)
        layout[lips] = np.c_[45 * np.cos(a), 80 + r * np.sin(a)]
    layout[13], layout[14], layout[61], layout[291] = (0, 78), (0, 82), (-45, 80), (45, 80)
    layout[[159, 145, 33, 133]] = [(-50, -36), (-50, -24), (-75, -30), (-25, -30)]
    layout[[386, 374, 362, 263]] = [(50, -36), (50, -24), (25, -30), (75, -30)]
    return layout
