"""``age_modifier``: makes each selected face older or younger (the specification's
enterprise-gated "age change"). Models: styleganex_age (default) or fran, FaceFusion format,
from the model store (see engine.networks.age_modify). Sensitive: its use is audited."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from facegate.engine.errors import InvalidOptions, ModelUnavailable
from facegate.engine.modelstore.hub import OnnxModel
from facegate.engine.networks.age_modify import (
    AGE_MODELS,
    AgeModelSpec,
    estimate_age,
    fix_color,
    forward_age,
    fran_direction,
    normalize_crop_frame,
    prepare_crop_frame,
    scale_keypoints5,
    styleganex_direction,
)
from facegate.engine.networks.face_helper import (
    create_box_mask,
    paste_back,
    warp_face_by_keypoints5,
)
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.processors.face_enhancer import target_faces
from facegate.engine.processors.model_check import require_models
from facegate.engine.types import Face, Frame

FAIRFACE = "fairface"


class AgeModifierOptions(ProcessorOptions):
    """``direction`` -100 (younger) .. 100 (older), FaceFusion's default 0; ``source_age``
    (fran only): the face's age in years, else estimated with ``fairface`` when installed."""

    model: str = "styleganex_age"
    direction: int = Field(default=0, ge=-100, le=100)
    source_age: float | None = Field(default=None, ge=0, le=100)
    mask_blur: float = Field(default=0.3, ge=0.0, le=1.0)


def _spec(name: str, kind_input: dict[str, object]) -> AgeModelSpec:
    found = AGE_MODELS.get(name)
    if found is not None:
        return found
    base = AGE_MODELS[str(kind_input.get("type", "styleganex_age"))]
    return base  # a tenant's own model of a known type (manifest input ``type``)


class AgeModifier(Processor[AgeModifierOptions]):
    """Ages or rejuvenates faces with a FaceFusion-format age model."""

    name: ClassVar[str] = "age_modifier"
    options_type: ClassVar[type[ProcessorOptions]] = AgeModifierOptions
    sensitive: ClassVar[bool] = True

    def check_models(self) -> None:
        require_models(self.name, self.hub, [[name] for name in AGE_MODELS])

    def prepare(self, ctx: JobContext) -> None:
        options = ctx.options_for(self.name, AgeModifierOptions)
        model = self.hub.onnx(options.model, ctx.model_request)
        if model.version.kind != "age_modifier":
            raise ModelUnavailable(f"{options.model!r} is a {model.version.kind}, not an age model")
        spec = _spec(model.version.name, model.version.input)
        fairface: OnnxModel | None = None
        if spec.type == "fran" and options.source_age is None:
            if not self.hub.has(FAIRFACE, ctx.model_request):
                raise InvalidOptions("age_modifier: fran needs source_age, or fairface installed")
            fairface = self.hub.onnx(FAIRFACE, ctx.model_request)
            ctx.models_used[FAIRFACE] = fairface.version.tag
        ctx.models_used[model.version.name] = model.version.tag
        ctx.state[self.name] = {"model": model, "spec": spec, "fairface": fairface}

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, AgeModifierOptions)
        for face in target_faces(ctx):
            ctx.check_cancelled()
            frame = self.modify_face(frame, face, options, ctx)
        return frame

    def modify_face(
        self, frame: Frame, face: Face, options: AgeModifierOptions, ctx: JobContext
    ) -> Frame:
        state = ctx.state[self.name]
        model: OnnxModel = state["model"]
        spec: AgeModelSpec = state["spec"]
        size = _fixed(model.input_shape("target"), spec.size)
        crop, matrix = warp_face_by_keypoints5(frame, face.keypoints5, spec.template, (size, size))
        if spec.type == "styleganex":
            assert spec.background_template is not None
            back_size = _fixed(model.input_shape("target_with_background"), spec.background_size)
            back, matrix = warp_face_by_keypoints5(
                frame,
                scale_keypoints5(face.keypoints5, 0.875),
                spec.background_template,
                (back_size, back_size),
            )
            feeds = {
                "target": prepare_crop_frame(crop),
                "target_with_background": prepare_crop_frame(back),
                "direction": styleganex_direction(options.direction),
            }
            generated = fix_color(back, normalize_crop_frame(forward_age(model, feeds)))
            matrix = matrix * (generated.shape[0] / back_size)  # the output is the 384 crop, larger
        else:
            age = options.source_age
            if age is None:
                crop224, _ = warp_face_by_keypoints5(
                    frame, face.keypoints5, "arcface_112_v2", (224, 224)
                )
                age = estimate_age(state["fairface"], crop224)
            feeds = {
                "target": prepare_crop_frame(crop),
                "direction": fran_direction(age, options.direction),
            }
            generated = normalize_crop_frame(forward_age(model, feeds))
            matrix = matrix * (generated.shape[0] / size)
        side = generated.shape[0]
        mask = create_box_mask((side, side), options.mask_blur)
        return paste_back(frame, np.asarray(generated), mask, matrix)


def _fixed(shape: list[object], default: int) -> int:
    """The crop size the file declares (axis 2), or the model's default when dynamic."""
    value = shape[2] if len(shape) == 4 else None
    return value if isinstance(value, int) and value > 0 else default
