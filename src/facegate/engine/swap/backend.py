"""The swap backend port: how ``face_swapper`` talks to one swapping method.

A backend turns the source faces of one identity into a reusable state once per job
(``prepare_source``), then swaps that identity onto target faces frame after frame
(``swap_face``). Backends hold only read-only things (loaded models), so one instance
serves many jobs and threads. ``mesh_warp`` (geometric, built in) is the first; every
FaceFusion swapper of ``networks.swap_models.SWAPPERS`` (inswapper, simswap, ...) is the
other kind (``swap.options.swap_backend_names``). ``swap.factory`` creates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

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
        self,
        frame: Frame,
        source_state: object,
        target_face: Face,
        options: FaceSwapperOptions,
        timings: dict[str, float] | None = None,
    ) -> Frame:
        """``frame`` with ``target_face`` replaced by the prepared identity; ``timings``, when
        given, receives the seconds each of the backend's stages took (added to what it holds).

        The backend may write into ``frame`` and return it: the caller passes a frame it
        owns (``face_swapper`` copies each frame once, however many faces it swaps, instead
        of every backend copying a whole frame per face).
        """
        ...
