"""Identity embeddings for the learned swappers: arcface_w600k_r50 and the ``crossface_*``
converters (facefusion-contracts.md, "Recognizer" and "Embedding converters")."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.networks.face_helper import warp_face_by_keypoints5
from facegate.engine.types import Frame

Embedding = npt.NDArray[np.float32]


def prepare_arcface_crop(frame: Frame, keypoints5: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """arcface_112_v2 crop at 112², ``x/127.5 - 1``, BGR -> RGB, NCHW."""
    crop, _ = warp_face_by_keypoints5(frame, keypoints5, "arcface_112_v2", (112, 112))
    scaled = crop.astype(np.float64) / 127.5 - 1
    return np.ascontiguousarray(scaled[:, :, ::-1].transpose(2, 0, 1)[None], dtype=np.float32)


def forward_arcface_w600k_r50(model: OnnxModel, crop: npt.NDArray[np.float32]) -> Embedding:
    return np.asarray(model.run({"input": crop})[0], dtype=np.float32)


def calculate_embedding(
    model: OnnxModel, frame: Frame, keypoints5: npt.ArrayLike
) -> tuple[Embedding, Embedding]:
    """The raw 512-d embedding and its L2-normalised copy."""
    raw = forward_arcface_w600k_r50(model, prepare_arcface_crop(frame, keypoints5)).ravel()
    return raw, l2_normalise(raw)


def forward_convert_embedding(model: OnnxModel, embedding: Embedding) -> Embedding:
    """A ``crossface_*`` converter: arcface embedding -> the swapper's identity space."""
    feed: dict[str, Any] = {"input": embedding.reshape(-1, 512).astype(np.float32)}
    return np.asarray(model.run(feed)[0], dtype=np.float32).ravel()


def l2_normalise(vector: Embedding) -> Embedding:
    return np.asarray(vector / np.linalg.norm(vector), dtype=np.float32)
