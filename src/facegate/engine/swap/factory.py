"""Creates the swap backend a ``face_swapper`` model name stands for."""

from __future__ import annotations

from facegate.engine.errors import InvalidOptions
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.networks.onnx_swap import OnnxSwapBackend
from facegate.engine.swap.backend import SwapBackend
from facegate.engine.swap.mesh_warp import MeshWarpBackend
from facegate.engine.swap.options import MESH_WARP, swap_backend_names


def create_swap_backend(name: str, hub: ModelHub) -> SwapBackend:
    """A new backend instance; the ONNX ones load their models from ``hub`` when first used
    (``ModelUnavailable`` where a file is missing)."""
    if name == MESH_WARP:
        return MeshWarpBackend()
    if name in swap_backend_names():
        return OnnxSwapBackend(name, hub)
    raise InvalidOptions(f"face_swapper: unknown swap model {name!r}")
