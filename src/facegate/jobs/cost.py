"""A job's estimated cost, from what its submission knows (the processors, the target's
size and frame count): CPU seconds on one core and peak memory.

The scheduler reads both: a worker's short-job lane takes only jobs estimated at most
``FACEGATE_SHORT_LANE_SECONDS``, so a one-face image is never stuck behind a long video
(docs/scheduling.md); a worker claims jobs only while their estimated peaks fit its memory
budget. Estimates are rates measured on the reference machine (2 x86 cores, the built-in
models; ``benchmarks/noisy_neighbour.py`` prints the measured figure beside each estimate),
not promises: they decide where a job waits, never whether its result is right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from facegate.errors import MemoryBudgetExceeded

#: Work a job costs whatever its size: inputs fetched, sources analysed, result encoded and
#: signed, the moderation of the inputs and output.
FIXED_SECONDS = 0.15
#: CPU seconds per megapixel of target, per processor, for one image (detection and the
#: face mesh included with the first face processor).
IMAGE_SECONDS_PER_MEGAPIXEL: Mapping[str, float] = {
    "face_swapper": 0.12,
    "face_enhancer": 0.25,
    "face_debugger": 0.1,
    "age_modifier": 0.5,
    "expression_restorer": 0.5,
}
#: The same per video frame: faces are tracked between detections, and decoding, encoding
#: and the sampled moderation come on top (``VIDEO_FRAME_SECONDS_PER_MEGAPIXEL``).
VIDEO_SECONDS_PER_MEGAPIXEL: Mapping[str, float] = {
    "face_swapper": 0.03,
    "face_enhancer": 0.12,
    "face_debugger": 0.03,
    "age_modifier": 0.3,
    "expression_restorer": 0.3,
}
VIDEO_FRAME_SECONDS_PER_MEGAPIXEL = 0.02
#: frame_enhancer by model: seconds per input megapixel (Real-ESRGAN on ncnn, tiled); an
#: operator's ONNX model is taken as costly as the heaviest built-in one.
FRAME_ENHANCER_SECONDS_PER_MEGAPIXEL: Mapping[str, float] = {
    "realesr_animevideov3_x2": 8.0,
    "realesr_animevideov3_x4": 12.0,
    "real_esrgan_x4plus": 200.0,
}
UNKNOWN_MODEL_SECONDS_PER_MEGAPIXEL = 200.0
DEFAULT_FRAME_ENHANCER = "realesr_animevideov3_x2"

#: Peak memory: the process's share for one job (models are shared and loaded once), and
#: the working copies of a frame a pipeline holds at once (decoded, float, blended, encoded).
BASE_MEMORY_BYTES = 256 * 2**20
FRAME_COPIES = 12
#: A video run holds its bounded queues of frames (reader, analysis, render, encoder).
VIDEO_FRAMES_IN_FLIGHT = 24


@dataclass(frozen=True)
class TargetShape:
    """What the submission learnt of its target: pixels per frame and frames (1 for an
    image)."""

    width: int
    height: int
    frames: int = 1

    @property
    def megapixels(self) -> float:
        return self.width * self.height / 1e6


@dataclass(frozen=True)
class JobCost:
    """Estimated CPU seconds (one core) and peak bytes of one job."""

    seconds: float
    memory_bytes: int


def estimate_cost(
    processors: Sequence[str],
    processor_options: Mapping[str, Mapping[str, Any]],
    target: TargetShape,
    *,
    video: bool,
) -> JobCost:
    """The cost of running ``processors`` on ``target``."""
    rates = VIDEO_SECONDS_PER_MEGAPIXEL if video else IMAGE_SECONDS_PER_MEGAPIXEL
    per_megapixel = VIDEO_FRAME_SECONDS_PER_MEGAPIXEL if video else 0.0
    scale = 1
    for name in processors:
        if name == "frame_enhancer":
            model = str(processor_options.get(name, {}).get("model", DEFAULT_FRAME_ENHANCER))
            per_megapixel += FRAME_ENHANCER_SECONDS_PER_MEGAPIXEL.get(
                model, UNKNOWN_MODEL_SECONDS_PER_MEGAPIXEL
            )
            scale = max(scale, _model_scale(model))
        else:
            per_megapixel += rates.get(name, max(rates.values()))
    seconds = FIXED_SECONDS + per_megapixel * target.megapixels * target.frames
    frame_bytes = target.width * target.height * 3
    held = VIDEO_FRAMES_IN_FLIGHT if video else FRAME_COPIES
    memory = BASE_MEMORY_BYTES + frame_bytes * held + frame_bytes * scale * scale * 4
    return JobCost(seconds=round(seconds, 3), memory_bytes=int(memory))


def _model_scale(model: str) -> int:
    """The upscale factor a frame enhancer's name announces (``_x4``), else 4."""
    for factor in (8, 4, 3, 2):
        if model.endswith(f"_x{factor}") or f"_x{factor}" in model:
            return factor
    return 4


def check_memory_budget(memory_bytes: int, budget_bytes: int | None, *, what: str) -> None:
    """``MemoryBudgetExceeded`` (422 ``memory-budget-exceeded``) when a job estimated at
    ``memory_bytes`` is over ``budget_bytes`` (None: no budget); ``what`` says whose budget
    it is, for the detail."""
    if budget_bytes is None or memory_bytes <= budget_bytes:
        return
    raise MemoryBudgetExceeded(
        f"this job needs an estimated {_mib(memory_bytes)} of memory at its peak, over "
        f"{what} of {_mib(budget_bytes)} (worker_memory_bytes); a smaller target or a "
        "lighter model fits",
        estimated_bytes=memory_bytes,
        budget_bytes=budget_bytes,
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"
