"""Core data types shared by every engine module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Frame = npt.NDArray[np.uint8]
"""A BGR uint8 image, shape (H, W, 3) (OpenCV convention, as FaceFusion)."""

FloatArray = npt.NDArray[np.float32]
ArrayT = TypeVar("ArrayT", bound=np.ndarray)  # type: ignore[type-arg]


def frozen(array: ArrayT) -> ArrayT:
    """``array`` made read-only: the engine's module-level tables are constants."""
    array.setflags(write=False)
    return array


@dataclass(eq=False)
class Face:
    """One detected face, all coordinates in pixels of the frame it was found in.

    keypoints5 follow FaceFusion's order (image-left eye, image-right eye, nose tip,
    image-left mouth corner, image-right mouth corner), so the same alignment templates
    (facefusion-contracts.md) apply. landmarks are mediapipe's 478-point mesh (x, y, z);
    z is relative depth in the same pixel scale as x. pose is (yaw, pitch, roll) in degrees.
    embedding is an identity descriptor: the geometric one from `engine.descriptor` as
    analysed, replaced by the recogniser's (dlib's ResNet, `engine.identity.IdentityDescriber`,
    which keeps the geometric one in ``extra``) where the pipeline needs identity (reference
    selection).
    track_id is set by video tracking and stays with one person across frames.
    """

    box: FloatArray  # (4,) x1, y1, x2, y2
    score: float
    keypoints5: FloatArray  # (5, 2)
    landmarks: FloatArray  # (478, 3)
    pose: tuple[float, float, float] = (0.0, 0.0, 0.0)
    embedding: FloatArray | None = None
    track_id: int | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def width(self) -> float:
        return float(self.box[2] - self.box[0])

    @property
    def height(self) -> float:
        return float(self.box[3] - self.box[1])

    @property
    def inter_ocular(self) -> float:
        """Distance between the two eye key points (the scale used for landmark errors)."""
        return float(np.linalg.norm(self.keypoints5[1] - self.keypoints5[0]))
