"""Face enhancer models (facefusion-contracts.md, "Face enhancers") and the built-in
restorer that runs a Real-ESRGAN ncnn net on the aligned face crop."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.types import Frame


@dataclass(frozen=True)
class FaceEnhancerSpec:
    """Template and crop size of one face enhancer model."""

    template: str
    size: int


_FFHQ_512 = FaceEnhancerSpec("ffhq_512", 512)
FACE_ENHANCERS: Mapping[str, FaceEnhancerSpec] = MappingProxyType(
    {
        "gfpgan_1.2": _FFHQ_512,
        "gfpgan_1.3": _FFHQ_512,
        "gfpgan_1.4": _FFHQ_512,
        "codeformer": _FFHQ_512,
        "restoreformer_plus_plus": _FFHQ_512,
        "gpen_bfr_256": FaceEnhancerSpec("arcface_128", 256),
        "gpen_bfr_512": _FFHQ_512,
        "gpen_bfr_1024": FaceEnhancerSpec("ffhq_512", 1024),
        "gpen_bfr_2048": FaceEnhancerSpec("ffhq_512", 2048),
    }
)


def prepare_crop_frame(crop: Frame) -> npt.NDArray[np.float32]:
    """BGR uint8 -> RGB, ``(x/255 - 0.5)/0.5``, 1×3×S×S."""
    rgb = crop[:, :, ::-1] / 255.0
    return np.ascontiguousarray(((rgb - 0.5) / 0.5).transpose(2, 0, 1)[None], dtype=np.float32)


def normalize_crop_frame(output: npt.NDArray[np.float32]) -> Frame:
    """3×S×S in [-1, 1] (clipped) -> ``(x+1)/2*255`` rounded, RGB -> BGR uint8."""
    frame = ((np.clip(output, -1, 1) + 1) / 2).transpose(1, 2, 0)
    return np.ascontiguousarray((frame * 255.0).round().astype(np.uint8)[:, :, ::-1])


def forward_face_enhancer(
    model: OnnxModel, crop: npt.NDArray[np.float32], weight: float
) -> npt.NDArray[np.float32]:
    """Feeds ``input`` and, when the model has it (codeformer), ``weight`` as float64 [w]."""
    feeds: dict[str, npt.NDArray[np.generic]] = {"input": crop}
    if "weight" in model.input_names:
        feeds["weight"] = np.array([weight], dtype=np.float64)
    return np.asarray(model.run(feeds)[0][0], dtype=np.float32)


def blend_paste_frame(frame: Frame, pasted: Frame, blend: float) -> Frame:
    """``out = frame*(1-b) + pasted*b`` with ``b = blend/100``."""
    keep = 1 - blend / 100
    return np.asarray(cv2.addWeighted(frame, keep, pasted, 1 - keep, 0), dtype=np.uint8)
