"""The mesh's mirror table is the optimal assignment it stands for (``engine.mesh``)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from facegate.engine import mesh


def test_mirror_table_is_the_optimal_assignment_of_the_flat_layout() -> None:
    layout = np.asarray(mesh._LAYOUT)
    reflected = layout * np.array([-1.0, 1.0])
    cost = np.linalg.norm(reflected[:, None, :] - layout[None, :, :], axis=2)
    _, partner = linear_sum_assignment(cost)
    assert np.array_equal(mesh.MIRROR[: len(partner)], partner)


def test_mirror_is_an_involution_that_pairs_the_irises() -> None:
    assert np.array_equal(mesh.MIRROR[mesh.MIRROR], np.arange(mesh.N_LANDMARKS))
    assert mesh.MIRROR[mesh.RIGHT_IRIS_CENTER] == mesh.LEFT_IRIS_CENTER
