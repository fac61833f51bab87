"""The swap backend port: how ``face_swapper`` talks to one swapping method.

A backend turns the source faces of one identity into a reusable state once per job
(``prepare_source``), then swaps that identity onto target faces frame after frame
(``swap_face``). Backends hold only read-only things (loaded models), so one instance
serves many jobs and threads. ``mesh_warp`` (geometric, built in) is the first; the ONNX
swappers (inswapper, simswap, ...) register themselves the same way.

The registry maps a model name to a factory; it is filled at import time and only read
afterwards, so it carries no per-job state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from facegate.engine.errors import InvalidOptions
from facegate.engine.types import Face, Frame

if TYPE_CHECKING:
    from facegate.engine.modelstore.tags import ModelRequest
    from facegate.engine.swap.options import FaceSwapperOptions


class SwapBackend(Protocol):
    """One face-swapping method."""

    def prepare_source(
        self,
        source_faces: Sequence[Face],
        source_frames: Sequence[Frame],
        options: FaceSwapperOptions,
        request: ModelRequest | None = None,
    ) -> object:
        """State for one source identity; ``source_faces[i]`` was found in ``source_frames[i]``.

        Several faces mean several photos of one person (a backend may average them).
        ``request`` (the job's tenant, tag policy and id) picks the model files a learned
        backend uses for this job; the state carries them, and may expose
        ``models_used: dict[str, str]`` (name -> tag) for the job's record.
        Raises ``NoFaceDetected`` when given no face.
        """
        ...

    def swap_face(
        self, frame: Frame, source_state: object, target_face: Face, options: FaceSwapperOptions
    ) -> Frame:
        """``frame`` with ``target_face`` replaced by the prepared identity.

        The backend may write into ``frame`` and return it: the caller passes a frame it
        owns (``face_swapper`` copies each frame once, however many faces it swaps, instead
        of every backend copying a whole frame per face).
        """
        ...


SwapBackendFactory = Callable[[], SwapBackend]


def _mesh_warp_factory() -> SwapBackend:
    from facegate.engine.swap.mesh_warp import MeshWarpBackend

    return MeshWarpBackend()


_FACTORIES: dict[str, SwapBackendFactory] = {"mesh_warp": _mesh_warp_factory}


def register_swap_backend(name: str, factory: SwapBackendFactory) -> None:
    """Make ``name`` a valid ``face_swapper`` model. Call at import time of the backend's
    module; registering a name twice with a different factory is an error."""
    existing = _FACTORIES.get(name)
    if existing is not None and existing is not factory:
        raise ValueError(f"swap backend {name!r} is already registered")
    _FACTORIES[name] = factory


def _load_plugins() -> None:
    # The ONNX swappers register themselves when their module is imported; importing it here
    # (lazily: it pulls in onnxruntime) makes every FaceFusion model name a valid choice.
    import facegate.engine.networks.onnx_swap  # noqa: F401


def swap_backend_names() -> frozenset[str]:
    _load_plugins()
    return frozenset(_FACTORIES)


def create_swap_backend(name: str) -> SwapBackend:
    """A new backend instance (factories may raise ``ModelUnavailable``)."""
    _load_plugins()
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InvalidOptions(f"face_swapper: unknown swap model {name!r}") from None
    return factory()
