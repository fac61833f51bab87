"""An invisible watermark in the pixels: the dwtDctSvd method of the ``invisible-watermark``
package, vectorised, applied on a fixed-size canonical copy of the frame so that it survives
resizing.

dwtDctSvd: a Haar DWT of the U channel, 4x4 blocks of its approximation, each block's first
singular value quantised to carry one bit (``s0 = (s0 // step + 1/4 + bit/2) * step``). It is
robust to JPEG and brightness but tied to the block grid, so rescaling the picture loses it.
Here the frame is reduced to ``CANONICAL`` x ``CANONICAL``, marked there, and only the
difference is scaled back up and added to the full frame: any copy, at any size, reduces to
the same canonical grid. A 10 % crop is found again by :func:`candidate_views`.

The package runs Python loops over the blocks (an SVD and a DCT each: ~0.2 s a frame here,
more than the face swap itself); the same rule is applied here to all 1024 blocks at once
with a batched SVD. The block DCT the package applies first is orthonormal, so it changes
neither the singular values nor the result; it is skipped. ``tests/provenance`` checks that
the package's own reader decodes these marks bit for bit.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import numpy.typing as npt
import pywt

from facegate.engine.types import Frame

CANONICAL = 256  # side of the canonical square the mark lives in
STRENGTH = 48  # dwtDctSvd's quantisation step (its default is 36; 48 reads through JPEG 70)
CHANNEL = 1  # of OpenCV's YUV: 0 luma, 1 U (the package's default)
MIN_SIDE = 64  # frames smaller than this on a side are not marked (nothing to hold it)
BLOCKS = (CANONICAL // 2 // 4) ** 2  # 4x4 blocks of the canonical copy's Haar approximation
_INTERLEAVE_SEED = 0x46_47_57_4D  # fixed forever: marks already issued depend on it
#: brightness gains and crop paddings tried when reading (the transforms a copy goes through)
_GAINS = (1 / 1.1, 1 / 0.9)
_CROP = 0.10
_U_TO_B, _U_TO_G = 2.032, -0.395  # OpenCV's YUV->BGR coefficients of U

Bits = npt.NDArray[np.uint8]
Scores = npt.NDArray[np.float64]


def package_module(name: str) -> ModuleType:
    """A module of the invisible-watermark package itself (``dwtDctSvd``, ``maxDct``; a
    development dependency): the reference the equivalence test and
    ``benchmarks/provenance_bench.py`` compare with. Loaded from its file, because the
    package's ``__init__`` imports torch (for its RivaGAN method), which is not installed."""
    spec = importlib.util.find_spec("imwatermark")  # finds the package, runs no __init__
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("invisible-watermark is not installed (requirements/dev.txt)")
    path = Path(next(iter(spec.submodule_search_locations))) / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"imwatermark_{name}", path)
    assert module_spec is not None
    assert module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _block_bits(length: int) -> npt.NDArray[np.intp]:
    """Which payload bit each 4x4 block of the canonical DWT carries.

    The package gives block ``k`` bit ``k % length``, in raster order, which puts each bit
    in a few columns: a crop or a border then wipes out whole bits. A fixed pseudo-random
    interleaving spreads every bit over the whole picture instead, so damage to one region
    costs every bit a little rather than some bits everything."""
    order = np.random.default_rng(_INTERLEAVE_SEED).permutation(BLOCKS)
    return order % length


def _blocks(plane: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The 4x4 blocks of a square plane in the package's order (row by row): (n, 4, 4)."""
    side = plane.shape[0] // 4
    return plane[: side * 4, : side * 4].reshape(side, 4, side, 4).swapaxes(1, 2).reshape(-1, 4, 4)


def _unblocks(blocks: npt.NDArray[np.float64], side: int) -> npt.NDArray[np.float64]:
    return blocks.reshape(side, side, 4, 4).swapaxes(1, 2).reshape(side * 4, side * 4)


def _chroma_change(small: Frame, bits: Bits) -> npt.NDArray[np.float32]:
    """How the U channel of the canonical copy changes to carry ``bits``."""
    u = cv2.cvtColor(small, cv2.COLOR_BGR2YUV)[:, :, CHANNEL].astype(np.float64)
    approximation, details = pywt.dwt2(u, "haar")
    blocks = _blocks(approximation)
    left, singular, right = np.linalg.svd(blocks)
    wanted = np.array([int(bits[i]) for i in _block_bits(len(bits))], dtype=np.float64)
    first = singular[:, 0]
    target = (first // STRENGTH + 0.25 + 0.5 * wanted) * STRENGTH
    # Only the first singular value moves: the block gains (target - s0) * u0 v0^T.
    shift = (target - first)[:, None, None] * left[:, :, :1] @ right[:, :1, :]
    marked = _unblocks(blocks + shift, approximation.shape[0] // 4)
    change: npt.NDArray[np.float32] = (pywt.idwt2((marked, details), "haar") - u).astype(np.float32)
    return change


def markable(frame: Frame) -> bool:
    height, width = frame.shape[:2]
    return min(height, width) >= MIN_SIDE


def canonical_copy(frame: Frame) -> Frame:
    """The frame at ``CANONICAL`` x ``CANONICAL``, where the mark is written and read.

    An area average, but in two steps for large frames: a bilinear reduction to twice the
    canonical size, then an exact 2x2 area average. OpenCV's area resize at an arbitrary
    ratio costs ~70x the bilinear one on a 1080p frame; the bilinear step's aliasing is
    averaged out by the 2x2 step and is the same for the writer and the reader."""
    height, width = frame.shape[:2]
    if min(height, width) > 2 * CANONICAL:
        frame = np.asarray(
            cv2.resize(frame, (2 * CANONICAL, 2 * CANONICAL), interpolation=cv2.INTER_LINEAR),
            np.uint8,
        )
    small = cv2.resize(frame, (CANONICAL, CANONICAL), interpolation=cv2.INTER_AREA)
    return np.asarray(small, dtype=np.uint8)


@dataclass(frozen=True)
class Delta:
    """What adding the mark changes in a frame, as two saturating 8-bit images (what goes
    up, what goes down): applying it is one add and one subtract, the cheapest per-frame
    work there is for a video."""

    up: Frame
    down: Frame

    @property
    def shape(self) -> tuple[int, ...]:
        return self.up.shape


def watermark_delta(frame: Frame, bits: Bits) -> Delta:
    """What adding the mark changes in ``frame``: the canonical copy's chroma change as B
    and G changes (OpenCV's YUV->BGR is linear: U moves B by 2.032 and G by -0.395 per
    unit), scaled back to the frame's size. Adding it to a similar frame (the next frames
    of a video) marks that frame too."""
    height, width = frame.shape[:2]
    change = _chroma_change(canonical_copy(frame), bits)
    canonical = np.asarray(
        cv2.merge([change * _U_TO_B, change * _U_TO_G, np.zeros_like(change)]), np.float32
    )

    def full(part: npt.NDArray[np.float32]) -> Frame:
        small = np.rint(np.clip(part, 0, 255)).astype(np.uint8)
        return np.asarray(
            cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR), np.uint8
        )

    return Delta(up=full(canonical), down=full(-canonical))


def apply_delta(frame: Frame, delta: Delta, in_place: bool = False) -> Frame:
    """``frame + delta``, saturated to 0..255: a new frame, or ``frame`` itself changed
    (``in_place``: the same bytes, no frame-sized allocation)."""
    if in_place:
        cv2.add(frame, delta.up, dst=frame)
        cv2.subtract(frame, delta.down, dst=frame)
        return frame
    return np.asarray(cv2.subtract(cv2.add(frame, delta.up), delta.down), dtype=np.uint8)


def embed_watermark(frame: Frame, bits: Bits) -> Frame:
    """``frame`` carrying ``bits`` (unchanged when too small to hold a mark)."""
    if not markable(frame):
        return frame
    return apply_delta(frame, watermark_delta(frame, bits))


def watermark_scores(frame: Frame, length: int) -> Scores:
    """Per bit, how strongly the frame's blocks say 1 (0..1; ~0.5: no mark).

    The package's reader, made soft: it takes each block's first singular value modulo the
    step and votes 1 above half a step; here each block gives the probability-like
    ``(1 - cos 2pi(r - 1/4)) / 2`` of its remainder ``r`` (0 at the bit-0 position, 1 at the
    bit-1 one, 1/2 half-way), so a block near the boundary counts for little."""
    yuv = cv2.cvtColor(canonical_copy(frame), cv2.COLOR_BGR2YUV)
    approximation, _ = pywt.dwt2(yuv[:, :, CHANNEL].astype(np.float64), "haar")
    first = np.linalg.svd(_blocks(approximation), compute_uv=False)[:, 0]
    remainder = (first % STRENGTH) / STRENGTH
    per_block = (1 - np.cos(2 * np.pi * (remainder - 0.25))) / 2
    sums = np.bincount(_block_bits(length), weights=per_block, minlength=length)
    counts = np.bincount(_block_bits(length), minlength=length)
    scores: Scores = sums / np.maximum(counts, 1)
    return scores


def candidate_views(frame: Frame) -> Iterator[Frame]:
    """The frame as received, then as it was before the transforms a shared copy commonly
    goes through and the canonical grid does not absorb: brightness changed by ±10 %, and
    a crop of up to 10 % (padded back by reflection, centred or from one corner)."""
    yield frame
    for gain in _GAINS:
        yield cv2.convertScaleAbs(frame, alpha=gain).astype(np.uint8, copy=False)
    height, width = frame.shape[:2]
    pad_y = round(height / (1 - _CROP) * _CROP)
    pad_x = round(width / (1 - _CROP) * _CROP)
    half_y, half_x = pad_y // 2, pad_x // 2
    for top, bottom, left, right in (
        (half_y, half_y, half_x, half_x),  # centred crop
        (pad_y, 0, pad_x, 0),  # the top-left corner cut away
        (0, pad_y, 0, pad_x),  # the bottom-right corner cut away
    ):
        padded = cv2.copyMakeBorder(frame, top, bottom, left, right, cv2.BORDER_REFLECT)
        yield padded.astype(np.uint8, copy=False)


class VideoWatermark:
    """Marks the frames of one video, in frame order (``FrameStages.finish``).

    The canonical embed runs on one frame in ``REFRESH_FRAMES``; the frames in between get
    the same change added (consecutive frames are nearly the same picture), so a video pays
    one embed per refresh plus one add per frame, and every frame carries the mark.
    ``in_place``: the frames are handed over (``process_video``'s, which nothing reads after
    their ``finish``), so the mark is added into them rather than into a new frame."""

    REFRESH_FRAMES = 12

    def __init__(self, bits: Bits, in_place: bool = False) -> None:
        self.bits = bits
        self.in_place = in_place
        self._delta: Delta | None = None
        self._since = 0

    def __call__(self, frame: Frame, index: int) -> Frame:
        if not markable(frame):
            return frame
        stale = self._delta is None or self._delta.shape != frame.shape
        if stale or self._since >= self.REFRESH_FRAMES:
            self._delta = watermark_delta(frame, self.bits)
            self._since = 0
        self._since += 1
        assert self._delta is not None
        return apply_delta(frame, self._delta, self.in_place)
