"""The memory model of facegate.jobs.cost: the frame enhancers' tiles are those the engine
runs, a tile's share does not grow with the input, and the figures stay in the measured
range (benchmarks/memory_bench.py)."""

from __future__ import annotations

import pytest

from facegate.engine.networks.frame_enhance import FRAME_ENHANCERS
from facegate.jobs.cost import (
    BASE_MEMORY_BYTES,
    COMPACT_ENHANCERS,
    MAX_TILE_BYTES,
    TargetShape,
    estimate_memory,
)

MIB = 2**20


def enhance(model: str, width: int, height: int) -> int:
    options = {"frame_enhancer": {"model": model}}
    return estimate_memory(["frame_enhancer"], options, TargetShape(width, height), video=False)


def test_the_tiles_are_the_engines() -> None:
    assert COMPACT_ENHANCERS <= set(FRAME_ENHANCERS)
    for name, spec in FRAME_ENHANCERS.items():
        tile, scale = spec.size[0], spec.scale
        result = 960 * 540 * 3 * scale * scale * 8
        assert enhance(name, 960, 540) - 960 * 540 * 3 * 12 - result - BASE_MEMORY_BYTES == min(
            tile * tile * (2 if name in COMPACT_ENHANCERS else 64) * 2**10, MAX_TILE_BYTES
        ), name


@pytest.mark.parametrize("model", ["real_esrgan_x4plus", "realesr_animevideov3_x2", "operator_x4"])
def test_only_the_result_grows_with_the_input(model: str) -> None:
    """What an enhance job needs beyond its frames' copies is one tile, whatever the input:
    the estimate grows exactly by the frames' bytes from 540p to 4K."""
    small, large = enhance(model, 960, 540), enhance(model, 3840, 2160)
    scale = 2 if model.endswith("_x2") else 4
    per_pixel = 3 * (12 + scale * scale * 8)  # input copies + the scaled result's
    assert large - small == (3840 * 2160 - 960 * 540) * per_pixel
    assert small - 960 * 540 * per_pixel - BASE_MEMORY_BYTES <= MAX_TILE_BYTES


def test_the_estimates_cover_the_measured_peaks() -> None:
    """benchmarks/memory_bench.py on the reference machine (MiB of a job's peak beyond the
    warmed worker); the estimate is above each, by less than 3x."""
    measured = {
        ("face_swapper", 1920, 1080, None): 77,
        ("face_swapper", 3840, 2160, None): 216,
        ("frame_enhancer", 1920, 1080, "realesr_animevideov3_x2"): 321,
        ("frame_enhancer", 240, 135, "real_esrgan_x4plus"): 330,
        ("frame_enhancer", 480, 270, "real_esrgan_x4plus"): 361,
        ("frame_enhancer", 3840, 2160, "realesr_animevideov3_x2"): 762,
    }
    for (processor, width, height, model), peak in measured.items():
        options = {processor: {"model": model}} if model else {}
        estimate = estimate_memory([processor], options, TargetShape(width, height), video=False)
        assert peak * MIB < estimate < 3 * peak * MIB, (processor, width, model, estimate / MIB)
    for (width, height), peak in {(1280, 720): 286, (1920, 1080): 426}.items():
        shape = TargetShape(width, height, 120)
        estimate = estimate_memory(["face_swapper"], {}, shape, video=True)
        assert peak * MIB < estimate < 3 * peak * MIB, (width, estimate / MIB)
