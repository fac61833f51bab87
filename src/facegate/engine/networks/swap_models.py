"""FaceFusion-format swapper models as data, and the numpy around their forward pass
(facefusion-contracts.md, "Face swapper"). Everything here is pure so each step is testable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import numpy.typing as npt

from facegate.engine.networks.recognizer import Embedding, l2_normalise

SwapperType = Literal[
    "inswapper", "hyperswap", "simswap", "ghost", "hififace", "blendswap", "uniface"
]
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class SwapperSpec:
    """How one swapper model is fed: template, size, normalisation, source converter."""

    type: SwapperType
    template: str
    size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    converter: str | None = None  # the crossface_* model that maps arcface embeddings

    @property
    def denormalises(self) -> bool:
        """Whether the output is mapped back with ×std+mean before the 0..1 clip."""
        return self.type in {"ghost", "hififace", "hyperswap", "uniface"}


_HALF = (0.5, 0.5, 0.5)
_ZERO = (0.0, 0.0, 0.0)
_ONE = (1.0, 1.0, 1.0)
SWAPPERS: Mapping[str, SwapperSpec] = MappingProxyType(
    {
        "inswapper_128": SwapperSpec("inswapper", "arcface_128", 128, _ZERO, _ONE),
        "inswapper_128_fp16": SwapperSpec("inswapper", "arcface_128", 128, _ZERO, _ONE),
        "hyperswap_1a_256": SwapperSpec("hyperswap", "arcface_128", 256, _HALF, _HALF),
        "hyperswap_1b_256": SwapperSpec("hyperswap", "arcface_128", 256, _HALF, _HALF),
        "hyperswap_1c_256": SwapperSpec("hyperswap", "arcface_128", 256, _HALF, _HALF),
        "simswap_256": SwapperSpec(
            "simswap", "arcface_112_v1", 256, IMAGENET_MEAN, IMAGENET_STD, "crossface_simswap"
        ),
        "simswap_unofficial_512": SwapperSpec(
            "simswap", "arcface_112_v1", 512, _ZERO, _ONE, "crossface_simswap"
        ),
        "ghost_1_256": SwapperSpec("ghost", "arcface_112_v1", 256, _HALF, _HALF, "crossface_ghost"),
        "ghost_2_256": SwapperSpec("ghost", "arcface_112_v1", 256, _HALF, _HALF, "crossface_ghost"),
        "ghost_3_256": SwapperSpec("ghost", "arcface_112_v1", 256, _HALF, _HALF, "crossface_ghost"),
        "hififace_unofficial_256": SwapperSpec(
            "hififace", "mtcnn_512", 256, _HALF, _HALF, "crossface_hififace"
        ),
        "blendswap_256": SwapperSpec("blendswap", "ffhq_512", 256, _ZERO, _ONE),
        "uniface_256": SwapperSpec("uniface", "ffhq_512", 256, _HALF, _HALF),
    }
)


def prepare_crop_frame(crop: npt.NDArray[np.uint8], spec: SwapperSpec) -> npt.NDArray[np.float32]:
    """BGR uint8 crop -> RGB, /255, (x-mean)/std, 1×3×S×S float32."""
    rgb = crop[:, :, ::-1] / 255.0
    normed = (rgb - np.array(spec.mean)) / np.array(spec.std)
    return np.ascontiguousarray(normed.transpose(2, 0, 1)[None], dtype=np.float32)


def normalize_crop_frame(
    output: npt.NDArray[np.float32], spec: SwapperSpec
) -> npt.NDArray[np.float32]:
    """The model's 3×S×S RGB output -> BGR crop in 0..255, float (as FaceFusion, which only
    rounds down to uint8 once the crop is pasted back)."""
    frame = output.transpose(1, 2, 0).astype(np.float64)
    if spec.denormalises:
        frame = frame * np.array(spec.std) + np.array(spec.mean)
    return np.ascontiguousarray(frame.clip(0, 1)[:, :, ::-1] * 255, dtype=np.float32)


def read_emap(model_path: str) -> npt.NDArray[np.float32]:
    """inswapper's EMAP: the last initializer of the ONNX graph (FaceFusion's
    ``get_static_model_initializer``)."""
    import onnx  # optional: only inswapper's load reads its graph (the registry is data)
    from onnx import numpy_helper  # optional: as above

    graph = onnx.load(model_path).graph
    return np.asarray(numpy_helper.to_array(graph.initializer[-1]), dtype=np.float32)


def inswapper_source(embedding: Embedding, emap: npt.NDArray[np.float32]) -> Embedding:
    """``(emb_raw · EMAP) / ‖emb_raw‖``, 1×512."""
    raw = embedding.reshape(1, -1).astype(np.float64)
    return np.asarray(raw @ emap / np.linalg.norm(raw), dtype=np.float32)


def balance_source_embedding(
    source: Embedding, target: Embedding, weight: float, spec: SwapperSpec
) -> Embedding:
    """FaceFusion's ``face_swapper_weight``: 0.5 keeps the source, lower/higher mixes."""
    mix = float(np.interp(weight, [0, 1], [0.35, -0.35]))
    if spec.type in {"hififace", "hyperswap", "inswapper", "simswap"}:
        target = l2_normalise(target)
    mixed = source.reshape(1, -1) * (1 - mix) + target.reshape(1, -1) * mix
    return np.asarray(mixed, dtype=np.float32)


def converted_source(converted: Embedding, spec: SwapperSpec) -> Embedding:
    """After a crossface converter: ghost keeps it raw, the others L2-normalise it."""
    if spec.type == "ghost":
        return converted.reshape(1, -1)
    return l2_normalise(converted).reshape(1, -1)
