"""``face_enhancer``: restores each selected face and blends it back.

Models: FaceFusion-format ONNX (gfpgan_1.2-1.4, codeformer with its ``weight`` input,
restoreformer_plus_plus, gpen_bfr_256..2048) from the model store, or, built in and offline,
a Real-ESRGAN ncnn net run on the aligned ffhq_512 face crop at ``512/scale`` px, whose
``scale``× output is the 512 px restored crop (``real_esrgan_x4plus``,
``realesr_animevideov3_x4``). Box mask (blur ``mask_blur``), paste-back, then blend.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from facegate.engine.errors import ModelUnavailable
from facegate.engine.networks.face_enhance import (
    FACE_ENHANCERS,
    FaceEnhancerSpec,
    blend_paste_frame,
    forward_face_enhancer,
    normalize_crop_frame,
    prepare_crop_frame,
)
from facegate.engine.networks.face_helper import (
    create_box_mask,
    paste_back,
    warp_face_by_keypoints5,
)
from facegate.engine.networks.frame_enhance import FRAME_ENHANCERS, forward_ncnn_realesrgan
from facegate.engine.networks.tiling import enhance_fitted
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.types import Face, Frame

BUILTIN_DEFAULT = "realesr_animevideov3_x4"
BUILTIN_CROP = 512  # the restored crop size of the built-in path (ffhq_512 template)


class FaceEnhancerOptions(ProcessorOptions):
    """``blend`` 0..100 (FaceFusion's default 80); ``weight`` 0..1 is codeformer's fidelity
    input; ``mask_blur`` softens the box mask edge."""

    model: str = BUILTIN_DEFAULT
    blend: int = Field(default=80, ge=0, le=100)
    weight: float = Field(default=0.5, ge=0.0, le=1.0)
    mask_blur: float = Field(default=0.3, ge=0.0, le=1.0)


def target_faces(ctx: JobContext) -> list[Face]:
    """The selected target faces (each once), else every face found in the frame."""
    chosen: list[Face] = []
    for _, face in ctx.selected:
        if all(face is not other for other in chosen):
            chosen.append(face)
    return chosen or list(ctx.target_faces)


class FaceEnhancer(Processor[FaceEnhancerOptions]):
    """Restores faces with a face restoration model."""

    name: ClassVar[str] = "face_enhancer"
    options_type: ClassVar[type[ProcessorOptions]] = FaceEnhancerOptions

    def check_models(self) -> None:
        self.hub.store.verify(self.hub.resolve(BUILTIN_DEFAULT))

    def prepare(self, ctx: JobContext) -> None:
        options = ctx.options_for(self.name, FaceEnhancerOptions)
        version = self.hub.resolve(options.model, ctx.model_request)
        builtin = FRAME_ENHANCERS.get(version.name)
        if builtin is not None and builtin.runtime == "ncnn":
            net, _ = self.hub.ncnn(version.name, ctx.model_request)
            state: dict[str, Any] = {"ncnn": net, "scale": builtin.scale, "tile": builtin.size}
        elif version.kind == "face_enhancer":
            spec = FACE_ENHANCERS.get(version.name) or FaceEnhancerSpec(
                str(version.input.get("template", "ffhq_512")), int(version.input.get("size", 512))
            )
            state = {"onnx": self.hub.onnx(version.name, ctx.model_request), "spec": spec}
        else:
            raise ModelUnavailable(f"{options.model!r} is a {version.kind}, not a face enhancer")
        ctx.models_used[version.name] = version.tag
        ctx.state[self.name] = state

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, FaceEnhancerOptions)
        for face in target_faces(ctx):
            ctx.check_cancelled()
            frame = self.enhance_face(frame, face, options, ctx)
        return frame

    def enhance_face(
        self, frame: Frame, face: Face, options: FaceEnhancerOptions, ctx: JobContext
    ) -> Frame:
        state = ctx.state[self.name]
        if "ncnn" in state:
            scale: int = state["scale"]
            small, matrix = warp_face_by_keypoints5(
                frame, face.keypoints5, "ffhq_512", (BUILTIN_CROP // scale,) * 2
            )
            tile, _, overlap = state["tile"]
            restored = enhance_fitted(
                small,
                tile,
                overlap,
                scale,
                lambda part: forward_ncnn_realesrgan(state["ncnn"], part),
                on_tile=ctx.check_cancelled,
            )
            # The restored crop is `scale`× the small one: scale the affine to match.
            matrix = matrix * scale
            size = BUILTIN_CROP
        else:
            spec: FaceEnhancerSpec = state["spec"]
            size = spec.size
            crop, matrix = warp_face_by_keypoints5(
                frame, face.keypoints5, spec.template, (size, size)
            )
            output = forward_face_enhancer(state["onnx"], prepare_crop_frame(crop), options.weight)
            restored = normalize_crop_frame(output)
        mask = create_box_mask((size, size), options.mask_blur)
        pasted = paste_back(frame, np.asarray(restored), mask, matrix)
        return blend_paste_frame(frame, pasted, options.blend)
