"""LivePortrait parts as FaceFusion's expression_restorer uses them (facefusion-contracts.md,
"Other processors"): feature_extractor, motion_extractor, generator; arcface_128 crop at 512,
fed at 256, RGB/255. Pure numpy around each forward pass so every step is testable."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.types import Frame

FEATURE_EXTRACTOR = "live_portrait_feature_extractor"
MOTION_EXTRACTOR = "live_portrait_motion_extractor"
GENERATOR = "live_portrait_generator"
PARTS = (FEATURE_EXTRACTOR, MOTION_EXTRACTOR, GENERATOR)
TEMPLATE = "arcface_128"
CROP_SIZE = 512
FEED_SIZE = 256
UPPER_FACE = (1, 2, 6, 10, 11, 12, 13, 15, 16)
LOWER_FACE = (3, 7, 14, 17, 18, 19, 20)
Array = npt.NDArray[np.float32]


def prepare_crop_frame(crop: Frame) -> Array:
    """512² BGR crop -> 256² (INTER_AREA), RGB, /255, 1×3×256×256."""
    small = cv2.resize(crop, (FEED_SIZE, FEED_SIZE), interpolation=cv2.INTER_AREA)
    rgb = small[:, :, ::-1] / 255.0
    return np.ascontiguousarray(rgb.transpose(2, 0, 1)[None], dtype=np.float32)


def normalize_crop_frame(output: Array) -> Frame:
    """3×H×W RGB in 0..1 (clipped) -> BGR uint8 (truncated, as FaceFusion)."""
    frame = output.transpose(1, 2, 0).clip(0, 1) * 255.0
    return np.ascontiguousarray(frame.astype(np.uint8)[:, :, ::-1])


def create_rotation(pitch: float, yaw: float, roll: float) -> npt.NDArray[np.float64]:
    """scipy's ``Rotation.from_euler('xyz', [pitch, yaw, roll], degrees=True)`` (extrinsic:
    R = Rz(roll) · Ry(yaw) · Rx(pitch))."""
    x, y, z = np.radians([pitch, yaw, roll])
    rx = np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(z), -np.sin(z), 0], [np.sin(z), np.cos(z), 0], [0, 0, 1]])
    return np.asarray(rz @ ry @ rx, dtype=np.float64)


@dataclass(frozen=True)
class Motion:
    """The motion extractor's outputs for one crop."""

    pitch: float
    yaw: float
    roll: float
    scale: Array
    translation: Array
    expression: Array  # 1×21×3
    motion_points: Array  # 1×21×3


def forward_extract_motion(model: OnnxModel, crop: Array) -> Motion:
    out = model.run({"input": crop})
    pitch, yaw, roll = (float(np.asarray(v).ravel()[0]) for v in out[:3])
    scale, translation, expression, points = (np.asarray(v, np.float32) for v in out[3:7])
    return Motion(
        pitch, yaw, roll, scale, translation, expression.reshape(1, 21, 3), points.reshape(1, 21, 3)
    )


def restore_expression(
    source: Motion, target: Motion, factor: float, areas: tuple[str, ...]
) -> Array:
    """The expression to drive the target crop with: the source's (the original frame's) in
    the chosen areas, blended by ``factor`` (0..1.2); every other coefficient is the target's."""
    keep = np.array(source.expression, dtype=np.float32)
    chosen = set(
        (UPPER_FACE if "upper-face" in areas else ())
        + (LOWER_FACE if "lower-face" in areas else ())
    )
    others = [i for i in range(21) if i not in chosen]
    keep[:, others] = target.expression[:, others]
    return np.asarray(keep * factor + target.expression * (1 - factor), dtype=np.float32)


def motion_points(motion: Motion, expression: Array) -> Array:
    """``scale · (points · Rᵀ + expression) + translation`` with the target's head pose."""
    rotation = create_rotation(motion.pitch, motion.yaw, motion.roll)
    scale = float(np.asarray(motion.scale).ravel()[0])
    translation = np.asarray(motion.translation, np.float64).reshape(1, 1, -1)[:, :, :3]
    moved = scale * (motion.motion_points @ rotation.T + expression) + translation
    return np.asarray(moved, dtype=np.float32)


def forward_generate(
    model: OnnxModel, feature_volume: Array, source: Array, target: Array
) -> Array:
    feeds = {"feature_volume": feature_volume, "source": source, "target": target}
    return np.asarray(model.run(feeds)[0][0], dtype=np.float32)
