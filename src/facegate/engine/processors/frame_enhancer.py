"""``frame_enhancer``: upscales the whole frame (the output grows by the model's scale).

Models: FaceFusion-format ONNX files in the model store (real_esrgan_x2/x4/x8, ...), or the
built-in Real-ESRGAN ncnn weights (``real_esrgan_x4plus``, ``realesr_animevideov3_x2/x4``)
that work offline on the CPU. Every model is tiled with overlap so memory stays bounded.
A tenant's private model uses the tiling given in its manifest ``input`` (scale, tile, pad,
overlap).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.manifest import ModelVersion
from facegate.engine.networks.frame_enhance import (
    FRAME_ENHANCERS,
    FrameEnhancerSpec,
    blend_frame,
    forward_ncnn_realesrgan,
    forward_real_esrgan,
    normalize_tile_frame,
    prepare_tile_frame,
)
from facegate.engine.networks.tiling import enhance_fitted, enhance_tiled
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.types import Frame

BUILTIN_DEFAULT = "realesr_animevideov3_x2"


class FrameEnhancerOptions(ProcessorOptions):
    """``model``: a frame enhancer name; ``blend``: 0..100 % of the enhanced frame over the
    bicubic-resized original (FaceFusion's default 80)."""

    model: str = BUILTIN_DEFAULT
    blend: int = Field(default=80, ge=0, le=100)


def spec_for(version: ModelVersion) -> FrameEnhancerSpec:
    """The table's spec for known names, else the manifest's ``input`` mapping."""
    known = FRAME_ENHANCERS.get(version.name)
    if known is not None:
        return known
    spec = version.input
    try:
        size = (int(spec["tile"]), int(spec.get("pad", 0)), int(spec.get("overlap", 0)))
        return FrameEnhancerSpec(int(spec["scale"]), size, str(spec.get("runtime", "onnx")))
    except (KeyError, TypeError, ValueError):
        raise ModelUnavailable(
            f"frame enhancer {version.name!r}: its manifest needs input.scale and input.tile"
        ) from None


class FrameEnhancer(Processor[FrameEnhancerOptions]):
    """Upscales frames with a tiled super-resolution model."""

    name: ClassVar[str] = "frame_enhancer"
    options_type: ClassVar[type[ProcessorOptions]] = FrameEnhancerOptions

    def check_models(self) -> None:
        self.hub.store.verify(self.hub.resolve(BUILTIN_DEFAULT))

    def prepare(self, ctx: JobContext) -> None:
        options = ctx.options_for(self.name, FrameEnhancerOptions)
        version = self.hub.resolve(options.model, ctx.model_request)
        if version.kind != "frame_enhancer":
            raise ModelUnavailable(f"{options.model!r} is a {version.kind}, not a frame enhancer")
        spec = spec_for(version)
        model: Any
        if spec.runtime == "ncnn":
            model, _ = self.hub.ncnn(version.name, ctx.model_request)
        else:
            model = self.hub.onnx(version.name, ctx.model_request)
        ctx.models_used[version.name] = version.tag
        ctx.state[self.name] = {"spec": spec, "model": model}

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, FrameEnhancerOptions)
        state = ctx.state[self.name]
        spec: FrameEnhancerSpec = state["spec"]
        model = state["model"]
        if spec.runtime == "ncnn":
            # Fully convolutional: tiles shrink to cover the frame exactly (enhance_fitted).
            enhanced = enhance_fitted(
                frame,
                spec.size[0],
                spec.size[2],
                spec.scale,
                lambda tile: forward_ncnn_realesrgan(model, tile),
                on_tile=ctx.check_cancelled,
            )
        else:
            enhanced = enhance_tiled(
                frame,
                spec.size,
                spec.scale,
                lambda tile: normalize_tile_frame(
                    forward_real_esrgan(model, prepare_tile_frame(tile))
                ),
                on_tile=ctx.check_cancelled,
            )
        return blend_frame(frame, enhanced, options.blend)
