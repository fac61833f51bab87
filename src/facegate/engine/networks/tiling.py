"""Tiling for frame enhancers, as FaceFusion's ``vision.create_tile_frames`` /
``merge_tile_frames``: ``size = (tile, pad, overlap)``; the frame is padded by ``pad`` on
every side and by ``overlap`` plus a remainder, tiles step by ``tile - 2*overlap``, and each
upscaled tile loses ``overlap*scale`` on every side before the pieces are stitched (no
feathering). Beyond the result itself, memory is bounded by one tile whatever the frame
size (``enhance_tiled`` and ``enhance_fitted`` write each tile into the result as it comes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np

from facegate.engine.types import Frame

TileSize = tuple[int, int, int]  # (tile, pad, overlap)
PadMode = Literal["constant", "reflect"]


def create_tile_frames(
    frame: Frame, size: TileSize, mode: PadMode = "constant"
) -> tuple[list[Frame], int, int]:
    """Tiles of ``size[0]``² (row-major), and the padded width and height."""
    tile, pad, overlap = size
    step = tile - 2 * overlap
    if step <= 0:
        raise ValueError(f"tile {tile} is too small for an overlap of {overlap}")
    # FaceFusion pads with zeros; the built-in enhancers reflect instead, so a
    # convolutional model does not darken the frame's edges.
    padded = np.pad(frame, ((pad, pad), (pad, pad), (0, 0)), mode=mode)
    bottom = overlap + step - padded.shape[0] % step
    right = overlap + step - padded.shape[1] % step
    padded = np.pad(padded, ((overlap, bottom), (overlap, right), (0, 0)), mode=mode)
    height, width = padded.shape[:2]
    tiles = [
        padded[top - overlap : top + step + overlap, left - overlap : left + step + overlap]
        for top in range(overlap, height - overlap, step)
        for left in range(overlap, width - overlap, step)
    ]
    return tiles, width, height


def merge_tile_frames(
    tiles: list[Frame], width: int, height: int, pad_width: int, pad_height: int, size: TileSize
) -> Frame:
    """Stitch processed tiles (all scaled alike; ``size`` already scaled) into ``width×height``."""
    _, pad, overlap = size
    merged = np.zeros((pad_height, pad_width, 3), dtype=np.uint8)
    step = tiles[0].shape[1] - 2 * overlap
    # FaceFusion uses pad_width // step, which over-counts once 2*overlap >= step (never with
    # its presets); the padded width is exactly 2*overlap + columns*step.
    per_row = (pad_width - 2 * overlap) // step
    for index, tile in enumerate(tiles):
        inner = tile[overlap:-overlap, overlap:-overlap] if overlap else tile
        top = (index // per_row) * inner.shape[0]
        left = (index % per_row) * inner.shape[1]
        merged[top : top + inner.shape[0], left : left + inner.shape[1]] = inner
    return merged[pad : pad + height, pad : pad + width]


def enhance_tiled(
    frame: Frame,
    size: TileSize,
    scale: int,
    run_tile: Callable[[Frame], Frame],
    mode: PadMode = "constant",
    on_tile: Callable[[], None] | None = None,
) -> Frame:
    """Upscale ``frame`` by ``scale`` through ``run_tile`` (BGR uint8 tile -> scaled tile).

    Each upscaled tile goes into the result as soon as it is made (what
    :func:`merge_tile_frames` does with the whole list), so the peak is the result plus one
    tile's working memory, whatever the frame's size."""
    height, width = frame.shape[:2]
    tiles, pad_width, pad_height = create_tile_frames(frame, size, mode)
    _, pad, overlap = size
    per_row = (pad_width - 2 * overlap) // (size[0] - 2 * overlap)
    inner = (size[0] - 2 * overlap) * scale
    cut = overlap * scale
    merged = np.zeros((pad_height * scale, pad_width * scale, 3), dtype=np.uint8)
    for index, tile in enumerate(tiles):
        if on_tile is not None:
            on_tile()  # e.g. a cancellation check between tiles
        done = run_tile(tile)
        top, left = (index // per_row) * inner, (index % per_row) * inner
        merged[top : top + inner, left : left + inner] = done[cut : cut + inner, cut : cut + inner]
    edge = pad * scale
    return merged[edge : edge + height * scale, edge : edge + width * scale]


def fitted_spans(length: int, tile: int, overlap: int) -> list[tuple[int, int]]:
    """Split ``length`` into the fewest equal spans whose tiles (span + 2*overlap) fit in
    ``tile``; the last span takes the remainder (never longer than the others)."""
    step = tile - 2 * overlap
    if step <= 0:
        raise ValueError(f"tile {tile} is too small for an overlap of {overlap}")
    count = -(-length // step)
    span = -(-length // count)
    return [(start, min(start + span, length)) for start in range(0, length, span)]


def enhance_fitted(
    frame: Frame,
    tile: int,
    overlap: int,
    scale: int,
    run_tile: Callable[[Frame], Frame],
    on_tile: Callable[[], None] | None = None,
) -> Frame:
    """Like ``enhance_tiled`` for fully convolutional models that take any input size (the
    built-in ncnn nets): tiles are shrunk to cover the frame exactly instead of padding it up
    to whole fixed tiles. A 128² face crop is then one 144² tile, not one 192² tile (2.25×
    the pixels), and a frame one pixel wider than a tile step no longer costs a whole extra
    row and column. Borders are reflected by ``overlap``; each tile's output loses
    ``overlap*scale`` on every side, so no seam is visible (no feathering needed).
    """
    height, width = frame.shape[:2]
    padded = np.pad(frame, ((overlap, overlap), (overlap, overlap), (0, 0)), mode="reflect")
    out = np.empty((height * scale, width * scale, 3), dtype=np.uint8)
    cut = overlap * scale
    for top, bottom in fitted_spans(height, tile, overlap):
        for left, right in fitted_spans(width, tile, overlap):
            if on_tile is not None:
                on_tile()  # e.g. a cancellation check between tiles
            done = run_tile(padded[top : bottom + 2 * overlap, left : right + 2 * overlap])
            inner = done[cut : cut + (bottom - top) * scale, cut : cut + (right - left) * scale]
            out[top * scale : bottom * scale, left * scale : right * scale] = inner
    return out
