"""Age modifier models (facefusion-contracts.md, "Other processors"): styleganex_age and fran.
Pure numpy around each forward pass so every step is testable.

- styleganex_age: ``target`` = ffhq_512 crop at 256, ``target_with_background`` =
  styleganex_384 crop at 384 of the key points scaled 0.875 about the nose, ``direction`` =
  interp(dir, [-100, 100], [2.5, -2.5]); the output (1024², i.e. the 384 crop at 1024/384)
  is colour-matched to the background crop and pasted back.
- fran: ffhq_512 crop at 1024 as ``target``, ``direction`` = [age/100, (age+dir)/100].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.networks.face_helper import create_box_mask
from facegate.engine.types import Frame

Array = npt.NDArray[np.float32]
FAIRFACE_AGE_MEANS = (1.0, 6.0, 14.5, 24.5, 34.5, 44.5, 54.5, 64.5, 85.0)  # bucket means


@dataclass(frozen=True)
class AgeModelSpec:
    """Crop template and sizes of one age model."""

    type: str
    template: str
    size: int  # the ``target`` crop
    background_template: str | None = None
    background_size: int = 0
    output_size: int = 0


AGE_MODELS: Mapping[str, AgeModelSpec] = MappingProxyType(
    {
        "styleganex_age": AgeModelSpec("styleganex", "ffhq_512", 256, "styleganex_384", 384, 1024),
        "fran": AgeModelSpec("fran", "ffhq_512", 1024, None, 0, 1024),
    }
)


def scale_keypoints5(keypoints5: npt.ArrayLike, scale: float) -> npt.NDArray[np.float64]:
    """The five points scaled about the nose tip (point 2)."""
    points = np.asarray(keypoints5, dtype=np.float64).reshape(5, 2)
    return np.asarray((points - points[2]) * scale + points[2], dtype=np.float64)


def prepare_crop_frame(crop: Frame) -> Array:
    """BGR uint8 -> RGB, ``(x/255 - 0.5)/0.5``, 1×3×H×W."""
    rgb = crop[:, :, ::-1] / 255.0
    return np.ascontiguousarray(((rgb - 0.5) / 0.5).transpose(2, 0, 1)[None], dtype=np.float32)


def normalize_crop_frame(output: Array) -> Frame:
    """3×H×W in [-1, 1] (clipped) -> ``(x+1)/2*255`` truncated, RGB -> BGR uint8."""
    frame = ((np.clip(output, -1, 1) + 1) / 2).transpose(1, 2, 0) * 255.0
    return np.ascontiguousarray(frame.astype(np.uint8)[:, :, ::-1])


def styleganex_direction(direction: float) -> Array:
    return np.array(np.interp(direction, [-100, 100], [2.5, -2.5]), dtype=np.float32)


def fran_direction(age: float, direction: float) -> Array:
    target = float(np.clip(age + direction, 0, 100))
    return np.array([age / 100, target / 100], dtype=np.float32)


def fix_color(raw: Frame, generated: Frame, size: tuple[int, int] = (48, 48)) -> Frame:
    """FaceFusion's colour fix: the low-frequency (48×48) colour difference between the
    input crop and the output, added back to the output except near its centre (the box
    mask at blur 1.0, clipped to 0.75, weights the border)."""
    small_raw = cv2.resize(raw.astype(np.float32) / 255, size, interpolation=cv2.INTER_AREA)
    small_gen = cv2.resize(generated.astype(np.float32) / 255, size, interpolation=cv2.INTER_AREA)
    height, width = generated.shape[:2]
    difference = cv2.resize(small_raw - small_gen, (width, height), interpolation=cv2.INTER_CUBIC)
    mask = create_box_mask((width, height), 1.0)[:, :, None]
    weight = 1 - mask.clip(0, 0.75)
    fixed = (generated.astype(np.float32) / 255 + difference * weight).clip(0, 1)
    return np.asarray(fixed * 255, dtype=np.float32).astype(np.uint8)


def forward_age(model: OnnxModel, feeds: dict[str, Array]) -> Array:
    """One inference; ``direction`` is reshaped to the rank the file declares."""
    shaped = dict(feeds)
    rank = len(model.input_shape("direction"))
    shaped["direction"] = feeds["direction"].reshape((1,) * max(rank - 1, 0) + (-1,))
    if rank == 0:
        shaped["direction"] = feeds["direction"].reshape(())
    return np.asarray(model.run(shaped)[0][0], dtype=np.float32)


def estimate_age(fairface: OnnxModel, crop224: Frame) -> float:
    """fairface on an arcface_112_v2 crop at 224: RGB/255, ImageNet mean/std; the age bucket's
    mean (third output)."""
    rgb = crop224[:, :, ::-1] / 255.0
    normed = (rgb - (0.485, 0.456, 0.406)) / (0.229, 0.224, 0.225)
    feed = np.ascontiguousarray(normed.transpose(2, 0, 1)[None], dtype=np.float32)
    bucket = int(np.asarray(fairface.run({"input": feed})[2]).ravel()[0])
    return FAIRFACE_AGE_MEANS[int(np.clip(bucket, 0, len(FAIRFACE_AGE_MEANS) - 1))]
