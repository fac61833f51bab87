"""The FaceFusion-format ONNX swappers as ``face_swapper`` backends (inswapper_128, simswap,
hyperswap, ghost, hififace, blendswap, uniface), selected by the processor's ``model`` option.

Importing this module registers every name in :data:`SWAPPERS`; a backend's factory raises
``ModelUnavailable`` when its files are not in the model store. Steps (FaceFusion's
``face_swapper.swap_face``): align the target to the model template at the pixel-boost size,
split it into model-size sub-images, run each, reassemble, box mask, paste back.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from facegate.engine.errors import InvalidOptions, NoFaceDetected
from facegate.engine.modelstore.hub import ModelHub, OnnxModel
from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.networks.face_helper import (
    create_box_mask,
    explode_pixel_boost,
    implode_pixel_boost,
    paste_back,
    warp_face_by_keypoints5,
)
from facegate.engine.networks.recognizer import (
    Embedding,
    calculate_embedding,
    forward_convert_embedding,
    l2_normalise,
)
from facegate.engine.networks.swap_models import (
    SWAPPERS,
    SwapperSpec,
    balance_source_embedding,
    converted_source,
    inswapper_source,
    normalize_crop_frame,
    prepare_crop_frame,
    read_emap,
)
from facegate.engine.types import Face, Frame

RECOGNIZER = "arcface_w600k_r50"


@dataclass(frozen=True)
class OnnxSwapModels:
    """The model versions one job uses, resolved for its tenant and tag policy: the swapper,
    the recognizer, the embedding converter (if any) and inswapper's EMAP."""

    model: OnnxModel
    recognizer: OnnxModel
    converter: OnnxModel | None
    emap: npt.NDArray[np.float32] | None

    @property
    def used(self) -> dict[str, str]:
        """Model name -> tag, for the job's record."""
        parts = [self.model, self.recognizer, *([self.converter] if self.converter else [])]
        return {m.version.name: m.version.tag for m in parts}


@dataclass(frozen=True)
class OnnxSource:
    """One source identity: averaged arcface embeddings, the source crop for the two
    models that take an image (blendswap, uniface), and the job's resolved models."""

    embedding: Embedding
    embedding_norm: Embedding
    source_image: npt.NDArray[np.float32] | None
    models: OnnxSwapModels

    @property
    def models_used(self) -> dict[str, str]:
        return self.models.used


def forward_swap(
    model: OnnxModel, source: npt.NDArray[np.float32], target: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """One swapper inference: inputs ``source`` and ``target``; the output is ``[0][0]``."""
    return np.asarray(model.run({"source": source, "target": target})[0][0], dtype=np.float32)


def prepare_source_image(frame: Frame, face: Face, spec: SwapperSpec) -> npt.NDArray[np.float32]:
    template, size = ("arcface_112_v2", 112) if spec.type == "blendswap" else ("ffhq_512", 256)
    crop, _ = warp_face_by_keypoints5(frame, face.keypoints5, template, (size, size))
    rgb = crop[:, :, ::-1] / 255.0
    return np.ascontiguousarray(rgb.transpose(2, 0, 1)[None], dtype=np.float32)


class OnnxSwapBackend:
    """A SwapBackend around one FaceFusion-format swapper model name (shared, read-only).

    The files are resolved per job (``prepare_source`` gets the job's ModelRequest), so one
    backend serves every tenant: a tenant's private model of this name, or its pinned tag,
    applies to its jobs only. Sessions are pooled by file in the ModelHub.
    """

    def __init__(self, name: str, hub: ModelHub) -> None:
        self.name = name
        self.spec = SWAPPERS[name]
        self.hub = hub
        self._emaps: dict[str, npt.NDArray[np.float32]] = {}  # model file -> its EMAP
        self._lock = threading.Lock()

    def load(self, request: ModelRequest | None = None) -> OnnxSwapModels:
        """The models of this swapper for one job (ModelUnavailable when one is missing)."""
        model = self.hub.onnx(self.name, request)
        recognizer = self.hub.onnx(RECOGNIZER, request)
        converter = self.hub.onnx(self.spec.converter, request) if self.spec.converter else None
        emap = None
        if self.spec.type == "inswapper":
            emap = self._emap(str(self.hub.store.verified_path(model.version)))
        return OnnxSwapModels(model, recognizer, converter, emap)

    def _emap(self, path: str) -> npt.NDArray[np.float32]:
        with self._lock:
            found = self._emaps.get(path)
        if found is None:
            found = read_emap(path)  # read once per file (a tenant's model is another file)
            with self._lock:
                self._emaps[path] = found
        return found

    # -- SwapBackend -----------------------------------------------------------------------
    def prepare_source(
        self,
        source_faces: Sequence[Face],
        source_frames: Sequence[Frame],
        options: Any,
        request: ModelRequest | None = None,
    ) -> object:
        if not source_faces:
            raise NoFaceDetected(f"{self.name}: no source face")
        models = self.load(request)
        pairs = [
            calculate_embedding(models.recognizer, frame, face.keypoints5)
            for face, frame in zip(source_faces, source_frames, strict=True)
        ]
        # FaceFusion's average face: the mean of the raw and of the normalised embeddings.
        raw = np.mean([p[0] for p in pairs], axis=0).astype(np.float32)
        norm = np.mean([p[1] for p in pairs], axis=0).astype(np.float32)
        image = None
        if self.spec.type in {"blendswap", "uniface"}:
            image = prepare_source_image(source_frames[0], source_faces[0], self.spec)
        return OnnxSource(raw, norm, image, models)

    def swap_face(
        self,
        frame: Frame,
        source_state: object,
        target_face: Face,
        options: Any,
        timings: dict[str, float] | None = None,  # one stage (the model's): none recorded
    ) -> Frame:
        assert isinstance(source_state, OnnxSource)
        size = self.spec.size
        boost = int(getattr(options, "pixel_boost_size", None) or size)
        if boost % size:
            raise InvalidOptions(f"{self.name}: pixel boost {boost} is not a multiple of {size}")
        crop, matrix = warp_face_by_keypoints5(
            frame, target_face.keypoints5, self.spec.template, (boost, boost)
        )
        source = self.source_input(source_state, frame, target_face, options)
        total = boost // size
        outputs = [
            normalize_crop_frame(
                forward_swap(source_state.models.model, source, prepare_crop_frame(sub, self.spec)),
                self.spec,
            )
            for sub in implode_pixel_boost(crop, total, size)
        ]
        swapped = explode_pixel_boost(outputs, total, size)
        padding = tuple(float(p) for p in getattr(options, "mask_padding", (0, 0, 0, 0)))
        mask = create_box_mask(
            (boost, boost),
            float(getattr(options, "mask_blur", 0.3)),
            padding,  # type: ignore[arg-type]
        )
        mask = mask * float(getattr(options, "blend", 1.0))
        return paste_back(frame, swapped, mask, matrix)

    # -- helpers ---------------------------------------------------------------------------
    def source_input(
        self, state: OnnxSource, frame: Frame, target_face: Face, options: Any
    ) -> npt.NDArray[np.float32]:
        if state.source_image is not None:
            return state.source_image
        models = state.models
        if self.spec.type == "inswapper":
            assert models.emap is not None
            embedding = inswapper_source(state.embedding, models.emap)
        elif self.spec.type == "hyperswap":
            embedding = state.embedding_norm.reshape(1, -1)
        else:
            assert models.converter is not None
            converted = forward_convert_embedding(models.converter, state.embedding)
            embedding = converted_source(converted, self.spec)
        weight = float(getattr(options, "weight", 0.5))
        if weight != 0.5:  # 0.5 maps to a zero mix: skip the target's recognizer pass
            target, _ = calculate_embedding(models.recognizer, frame, target_face.keypoints5)
            embedding = balance_source_embedding(embedding, target, weight, self.spec)
        return embedding


__all__ = ["OnnxSource", "OnnxSwapBackend", "OnnxSwapModels", "forward_swap", "l2_normalise"]
