"""A job's estimated cost, from what its submission knows (the processors, the target's
size and frame count): CPU seconds on one core and peak memory.

The scheduler reads both: a worker's short-job lane takes only jobs estimated at most
``FACEGATE_SHORT_LANE_SECONDS``, so a one-face image is never stuck behind a long video
(docs/scheduling.md); a worker claims jobs only while their estimated peaks fit its memory
budget (docs/scheduling-memory.md). Estimates are rates measured on the reference machine
(2 x86 cores, the built-in models; ``benchmarks/noisy_neighbour.py`` prints the measured
figure beside each estimate), not promises: they decide where a job waits, never whether
its result is right.

The memory model (:func:`estimate_memory`) was calibrated with ``benchmarks/memory_bench.py``:
each job run through the worker's path (``EngineRunner``) in a fresh process whose models
a small job of the same processors had loaded; the figure is the process's peak
(``VmHWM``: native memory included) minus its resident set before the job, in MiB, with
the estimate beside it::

    image swap 1920x1080                 77    est. 135  (1.8x)
    image swap 3840x2160                216    est. 349  (1.6x)
    enhance animevideov3_x2 1080p -> 4K 321    est. 453  (1.4x)
    enhance animevideov3_x2 4K -> 8K    762    est. 1236 (1.6x)
    enhance x4plus 240x135 -> 960x540   330    est. 653  (2.0x)
    enhance x4plus 480x270 -> 1080p     361    est. 692  (1.9x)
    video swap 720p, 4 s                286    est. 393  (1.4x)
    video swap 1080p, 4 s               426    est. 604  (1.4x)

Read off them: an image job holds ~8 copies of its frame (12 estimated); an enhancer's
result ~6 copies (8 estimated); x4plus's tile costs the same from 240x135 to 480x270 input
(the tiling bounds it: 96² tiles, ~64 KiB per tile pixel); a video ~170 MiB plus ~43 frames
(160 MiB plus 64 estimated). The FaceFusion-format ONNX enhancers were not measured here (no
such model is installed): they are taken at the RRDB rate of x4plus per tile pixel, at most
4 GiB a tile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from facegate.engine.networks.frame_enhance import FRAME_ENHANCERS
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

#: Peak memory (calibration: the module docstring). What a job holds whatever its size:
#: its inputs' bytes, the sources' analysis, the encoder's and the moderation's buffers.
#: Models are not counted: a process loads each once and shares it between its jobs.
BASE_MEMORY_BYTES = 64 * 2**20
#: Copies of the target frame an image job holds at once (decoded, analysed, swapped,
#: blended, watermarked, encoded).
FRAME_COPIES = 12
#: A video run holds its bounded queues of frames (reader, analysis, render, encoder) and
#: the codecs' own (the decoder's references, the H.264 encoder's lookahead) on top of
#: their contexts.
VIDEO_FRAMES_IN_FLIGHT = 64
VIDEO_BASE_BYTES = 160 * 2**20
#: Copies of the result frame a frame enhancer's scale makes (the enhanced frame, its
#: bicubic twin for the blend, the blend, the watermarked copy, the encoder's buffers).
OUTPUT_COPIES = 8
#: A frame enhancer's network needs this much per pixel of one tile (the tiling bounds it,
#: whatever the frame): Real-ESRGAN's RRDB nets (x4plus and the FaceFusion-format ONNX
#: ones) ~60 KB, the compact animevideov3 nets ~1 KB (measured, with a margin).
RRDB_BYTES_PER_TILE_PIXEL = 64 * 2**10
COMPACT_BYTES_PER_TILE_PIXEL = 2 * 2**10
#: What one tile may cost at most: the rate above was measured on ncnn's x4plus up to 256²
#: tiles (~4 GB); onnxruntime's planner reuses buffers, so a larger tile (ultra_sharp's
#: 1024²) is not taken at 16 times that.
MAX_TILE_BYTES = 4 * 2**30
#: The compact nets (the rest are RRDB-sized); each enhancer's tile and scale are the
#: engine's own (facegate.engine.networks.frame_enhance.FRAME_ENHANCERS); an operator's
#: model is taken as a 256² RRDB one at ×4.
COMPACT_ENHANCERS = frozenset({"realesr_animevideov3_x2", "realesr_animevideov3_x4"})
UNKNOWN_ENHANCER_TILE = 256
UNKNOWN_ENHANCER_SCALE = 4


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
    for name in processors:
        if name == "frame_enhancer":
            per_megapixel += FRAME_ENHANCER_SECONDS_PER_MEGAPIXEL.get(
                _enhancer_model(processor_options), UNKNOWN_MODEL_SECONDS_PER_MEGAPIXEL
            )
        else:
            per_megapixel += rates.get(name, max(rates.values()))
    seconds = FIXED_SECONDS + per_megapixel * target.megapixels * target.frames
    return JobCost(
        seconds=round(seconds, 3),
        memory_bytes=estimate_memory(processors, processor_options, target, video=video),
    )


def estimate_memory(
    processors: Sequence[str],
    processor_options: Mapping[str, Mapping[str, Any]],
    target: TargetShape,
    *,
    video: bool,
) -> int:
    """The peak bytes of running ``processors`` on ``target``: the frame's working copies
    (or a video's frames in flight), and with a frame enhancer its scaled result's copies
    and one tile of its network (the tiling bounds that share whatever the frame)."""
    frame_bytes = target.width * target.height * 3
    if video:
        memory = BASE_MEMORY_BYTES + VIDEO_BASE_BYTES + frame_bytes * VIDEO_FRAMES_IN_FLIGHT
    else:
        memory = BASE_MEMORY_BYTES + frame_bytes * FRAME_COPIES
    if "frame_enhancer" in processors:
        model = _enhancer_model(processor_options)
        known = FRAME_ENHANCERS.get(model)
        scale = known.scale if known is not None else UNKNOWN_ENHANCER_SCALE
        tile = known.size[0] if known is not None else UNKNOWN_ENHANCER_TILE
        per_pixel = (
            COMPACT_BYTES_PER_TILE_PIXEL
            if model in COMPACT_ENHANCERS
            else RRDB_BYTES_PER_TILE_PIXEL
        )
        tile_bytes = min(tile * tile * per_pixel, MAX_TILE_BYTES)
        memory += frame_bytes * scale * scale * OUTPUT_COPIES + tile_bytes
    return int(memory)


def _enhancer_model(processor_options: Mapping[str, Mapping[str, Any]]) -> str:
    return str(processor_options.get("frame_enhancer", {}).get("model", DEFAULT_FRAME_ENHANCER))


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
