"""``expression_restorer``: gives each processed face back the expression it had in the
original frame (after a swap, the target's own expression), with FaceFusion's LivePortrait
parts from the model store (engine.networks.live_portrait). Sensitive ("expression transfer").

The original frame is the one the pipeline received, before any processor ran
(``ctx.state["pipeline"]["original_frame"]``)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.networks.face_helper import (
    create_box_mask,
    paste_back,
    warp_face_by_keypoints5,
)
from facegate.engine.networks.live_portrait import (
    CROP_SIZE,
    FEATURE_EXTRACTOR,
    GENERATOR,
    MOTION_EXTRACTOR,
    PARTS,
    TEMPLATE,
    forward_extract_motion,
    forward_generate,
    motion_points,
    normalize_crop_frame,
    prepare_crop_frame,
    restore_expression,
)
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.processors.face_enhancer import target_faces
from facegate.engine.processors.model_check import require_models
from facegate.engine.types import Face, Frame

Area = Literal["upper-face", "lower-face"]


class ExpressionRestorerOptions(ProcessorOptions):
    """``factor`` 0..100 (FaceFusion's default 80, mapped to 0..1.2); ``areas`` whose
    expression is restored."""

    model: Literal["live_portrait"] = "live_portrait"
    factor: int = Field(default=80, ge=0, le=100)
    areas: tuple[Area, ...] = ("upper-face", "lower-face")
    mask_blur: float = Field(default=0.3, ge=0.0, le=1.0)


class ExpressionRestorer(Processor[ExpressionRestorerOptions]):
    """Restores the original expression onto processed faces."""

    name: ClassVar[str] = "expression_restorer"
    options_type: ClassVar[type[ProcessorOptions]] = ExpressionRestorerOptions
    sensitive: ClassVar[bool] = True
    reads_original: ClassVar[bool] = True

    def check_models(self) -> None:
        require_models(self.name, self.hub, [list(PARTS)])

    def prepare(self, ctx: JobContext) -> None:
        parts = {name: self.hub.onnx(name, ctx.model_request) for name in PARTS}
        for part in parts.values():
            ctx.models_used[part.version.name] = part.version.tag
        ctx.state[self.name] = parts

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, ExpressionRestorerOptions)
        original = ctx.state.get("pipeline", {}).get("original_frame")
        source = original if isinstance(original, np.ndarray) else frame
        for face in target_faces(ctx):
            ctx.check_cancelled()
            frame = self.restore_face(source, frame, face, options, ctx.state[self.name])
        return frame

    def restore_face(
        self,
        source_frame: Frame,
        frame: Frame,
        face: Face,
        options: ExpressionRestorerOptions,
        parts: dict[str, OnnxModel],
    ) -> Frame:
        size = (CROP_SIZE, CROP_SIZE)
        source_crop, _ = warp_face_by_keypoints5(source_frame, face.keypoints5, TEMPLATE, size)
        target_crop, matrix = warp_face_by_keypoints5(frame, face.keypoints5, TEMPLATE, size)
        source_in, target_in = prepare_crop_frame(source_crop), prepare_crop_frame(target_crop)
        volume = np.asarray(parts[FEATURE_EXTRACTOR].run({"input": target_in})[0], np.float32)
        source = forward_extract_motion(parts[MOTION_EXTRACTOR], source_in)
        target = forward_extract_motion(parts[MOTION_EXTRACTOR], target_in)
        factor = float(np.interp(options.factor, [0, 100], [0, 1.2]))
        expression = restore_expression(source, target, factor, options.areas)
        # The generator warps the feature volume from its own key points ("source") to the
        # driving ones ("target"): the target's pose with the restored expression.
        output = forward_generate(
            parts[GENERATOR],
            volume,
            motion_points(target, target.expression),
            motion_points(target, expression),
        )
        restored = normalize_crop_frame(output)
        side = restored.shape[0]
        mask = create_box_mask((side, side), options.mask_blur)
        return paste_back(frame, restored, mask, matrix * (side / CROP_SIZE))
