"""The working scale of a large target face (``mesh_warp._working_scale``): whole steps where
the scale is one, so the shrink takes OpenCV's fast area path."""

from __future__ import annotations

import numpy as np

from facegate.engine import mesh
from facegate.engine.swap.mesh_warp import _working_scale, face_height


def face_of_height(height: float) -> np.ndarray:
    points = np.zeros((mesh.N_LANDMARKS, 3), np.float32)
    points[mesh.CHIN, 1] = height
    assert face_height(points) == height
    return points


def test_a_face_about_twice_the_source_is_worked_at_exactly_half_size() -> None:
    work = _working_scale((713, 608), face_of_height(567.0), 285.0)  # 1.99x the source
    assert work.step == 2
    assert work.full == (608, 712)  # the region trimmed to whole steps
    assert work.size == (304, 356)
    assert np.allclose(work.factors, 0.5)
    small = work.shrink(np.full((712, 608, 3), 7, np.uint8))
    assert small.shape == (356, 304, 3)


def test_between_whole_steps_the_step_is_taken_then_the_rest() -> None:
    work = _working_scale((901, 801), face_of_height(750.0), 300.0)  # 2.5x the source
    assert work.step == 2
    assert work.full == (800, 900)
    assert work.size == (320, 360)
    assert work.shrink(np.zeros((900, 800, 3), np.uint8)).shape == (360, 320, 3)


def test_a_face_near_the_source_size_is_worked_at_full_size() -> None:
    work = _working_scale((401, 301), face_of_height(300.0), 290.0)
    assert (work.step, work.full, work.size) == (1, (301, 401), (301, 401))
