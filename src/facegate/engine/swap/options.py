"""Options of the face swapper (shared by the processor and every swap backend)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from facegate.engine.networks.swap_models import SWAPPERS
from facegate.engine.processors.base import ProcessorOptions

#: The built-in, geometric swap backend (no model files).
MESH_WARP = "mesh_warp"


def swap_backend_names() -> frozenset[str]:
    """Every valid ``face_swapper`` model: the built-in one and the ONNX swappers."""
    return frozenset({MESH_WARP, *SWAPPERS})


class FaceSwapperOptions(ProcessorOptions):
    """Options of ``face_swapper``; names and ranges follow FaceFusion where it has them.

    - ``model``: a registered swap backend (``mesh_warp`` is built in);
    - ``blend``: 0 keeps the target untouched, 1 applies the swap fully;
    - ``mask``: ``feather`` (alpha blend with a soft edge) or ``poisson`` (seamless clone);
    - ``mask_padding``: % of the face box cut from the top, right, bottom, left;
    - ``mask_blur``: softness of the mask edge, 0..1 (FaceFusion's default 0.3);
    - ``keep_expression``: keep the target's eyes and mouth interior (and the whole lips /
      lids where the source's mouth or eyes are open differently);
    - ``match_lighting``: keep the target's low-frequency shading and colour, take only the
      source's detail; off: a plain colour transfer;
    - ``keep_outline`` (mesh_warp): keep the target's face outline (jaw, cheeks, chin); off,
      the outline moves towards the source's and the region around the face follows it. Always
      kept with ``occlusion`` (occluders are put back where they were);
    - ``skin_shading`` (mesh_warp): ``target`` (default) keeps the target's own shading and
      skin tone on the skin between the eyes, nose and mouth (cheeks, forehead, chin), and the
      face's mean skin tone is the target's; ``source`` takes the source's shading there too
      (a little more of its identity, its cheeks' light and colour with it);
    - ``glasses`` (mesh_warp): ``keep`` (default) keeps a target's glasses whole in front of
      the new face and paints a source's out before its face is taken; ``remove`` paints
      both out (the target's over the face and around it, then the swap covers the face);
      ``swap`` does neither (the recogniser reads a little more of the source: its glasses
      come with it);
    - ``mask_types`` (FaceFusion's ``face_mask_types``): ``box`` is the face region every
      backend pastes in (mesh_warp: the trimmed oval within the padding box; ONNX swappers:
      the padded box) and is always there; ``occlusion`` adds the occluder mask
      (``swap.occlusion``): hands, hair and objects in front of the target face stay in front;
    - ``pixel_boost_size``, ``weight``: ONNX swappers only (see below); mesh_warp ignores them.
    """

    model: str = "mesh_warp"
    blend: float = Field(default=1.0, ge=0.0, le=1.0)
    mask: Literal["feather", "poisson"] = "feather"
    mask_padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    mask_blur: float = Field(default=0.3, ge=0.0, le=1.0)
    keep_expression: bool = True
    match_lighting: bool = True
    keep_outline: bool = False
    skin_shading: Literal["target", "source"] = "target"
    glasses: Literal["keep", "remove", "swap"] = "keep"
    mask_types: tuple[Literal["box", "occlusion"], ...] = ("box",)
    # ONNX swappers only (FaceFusion's face_swapper_pixel_boost and face_swapper_weight):
    # the crop size the model's output is assembled to (a multiple of the model's size), and
    # the source/target identity balance (0.5 = the source's identity unchanged).
    pixel_boost_size: int | None = Field(default=None, ge=64, le=1024)
    weight: float = Field(default=0.5, ge=0.0, le=1.0)

    @field_validator("mask_padding")
    @classmethod
    def _padding_in_range(
        cls, value: tuple[float, float, float, float]
    ) -> tuple[float, float, float, float]:
        if any(not 0.0 <= v <= 100.0 for v in value):
            raise ValueError("each padding must be within 0..100 (percent)")
        if value[0] + value[2] >= 100.0 or value[1] + value[3] >= 100.0:
            raise ValueError("opposite paddings must leave part of the face")
        return value

    @field_validator("mask_types")
    @classmethod
    def _box_and_no_repeats(
        cls, value: tuple[Literal["box", "occlusion"], ...]
    ) -> tuple[Literal["box", "occlusion"], ...]:
        if "box" not in value:
            raise ValueError("mask_types must include 'box' (the face region every swap pastes in)")
        if len(set(value)) != len(value):
            raise ValueError("mask_types lists a mask type twice")
        return value

    @property
    def occlusion(self) -> bool:
        return "occlusion" in self.mask_types

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in swap_backend_names():
            known = ", ".join(sorted(swap_backend_names()))
            raise ValueError(f"unknown swap model {value!r} (known: {known})")
        return value
