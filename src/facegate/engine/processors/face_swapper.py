"""``face_swapper``: replaces each selected target face with its mapped source identity.

The swapping method is a backend (``engine.swap.backend``) chosen by the ``model`` option;
``mesh_warp`` is built in. Per job, ``prepare`` turns every source face into the backend's
source state once (``ctx.state["face_swapper"]``); ``process_frame`` then swaps each
``(source index, target face)`` pair the pipeline selected. With ``mask_types``
``occlusion``, the occluders in front of each target face (``swap.occlusion``, found on the
frame as it came in) get their pixels back after the backend pasted: it holds for every
backend.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from facegate.engine.errors import InvalidOptions
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.swap.backend import SwapBackend
from facegate.engine.swap.factory import create_swap_backend
from facegate.engine.swap.occlusion import OcclusionDetector, keep_occluders
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.types import Face, Frame

__all__ = ["FaceSwapper", "FaceSwapperOptions"]


def source_frame_index(ctx: JobContext, face_index: int, face: Face) -> int:
    """Which of ``ctx.source_frames`` a source face was found in.

    Uses ``face.extra["source_frame"]`` when the analyser set it; otherwise a single source
    image, or one face per image, makes the answer unambiguous.
    """
    tagged = face.extra.get("source_frame")
    if isinstance(tagged, int) and 0 <= tagged < len(ctx.source_frames):
        return tagged
    if len(ctx.source_frames) == 1:
        return 0
    if len(ctx.source_frames) == len(ctx.source_faces):
        return face_index
    raise InvalidOptions("face_swapper: cannot tell which source image each source face came from")


class FaceSwapper(Processor[FaceSwapperOptions]):
    """Swaps faces with the backend named by ``model`` (default ``mesh_warp``)."""

    name: ClassVar[str] = "face_swapper"
    options_type: ClassVar[type[ProcessorOptions]] = FaceSwapperOptions
    sensitive: ClassVar[bool] = True

    def __init__(self, hub: ModelHub) -> None:
        super().__init__(hub)
        # Backends are read-only once created (loaded models), so one per model name is
        # shared by every job; the lock only guards their lazy creation.
        self._backends: dict[str, SwapBackend] = {}
        self._lock = threading.Lock()
        self._occlusion: OcclusionDetector | None = None

    def occlusion(self) -> OcclusionDetector:
        with self._lock:
            if self._occlusion is None:
                self._occlusion = OcclusionDetector()
            return self._occlusion

    def backend(self, model: str) -> SwapBackend:
        with self._lock:
            found = self._backends.get(model)
            if found is None:
                found = create_swap_backend(model, self.hub)
                self._backends[model] = found
            return found

    def prepare(self, ctx: JobContext) -> None:
        options = ctx.options_for(self.name, FaceSwapperOptions)
        backend = self.backend(options.model)
        sources: list[object] = []
        for index, face in enumerate(ctx.source_faces):
            ctx.check_cancelled()
            frame = ctx.source_frames[source_frame_index(ctx, index, face)]
            state = backend.prepare_source([face], [frame], options, ctx.model_request)
            used = getattr(state, "models_used", None)
            if isinstance(used, dict):
                ctx.models_used.update(used)  # the tags this job ran with (A/B record)
            sources.append(state)
        ctx.state[self.name] = {"backend": backend, "sources": sources}

    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        options = ctx.options_for(self.name, FaceSwapperOptions)
        state: dict[str, Any] | None = ctx.state.get(self.name)
        if state is None:
            raise InvalidOptions("face_swapper: prepare() was not run for this job")
        backend: SwapBackend = state["backend"]
        sources: list[object] = state["sources"]
        original = frame
        # The backend's stages, reported as "face_swapper.<stage>" (benchmarks' breakdown).
        timings: dict[str, float] | None = {} if ctx.on_stage is not None else None
        if ctx.selected and not (ctx.frame_owned and not options.occlusion):
            # One copy per frame: the backends paste into it (the caller's frame, e.g. the
            # pipeline's original kept for the expression restorer, stays untouched). A
            # frame handed over is pasted into in place, unless occluders are put back
            # from the frame as it came.
            frame = frame.copy()
        for source_index, target_face in ctx.selected:
            ctx.check_cancelled()
            if not 0 <= source_index < len(sources):
                raise InvalidOptions(
                    f"face_swapper: source face {source_index} does not exist "
                    f"({len(sources)} source faces)"
                )
            # Occluders are found on the incoming frame: a neighbour's swap may have
            # pasted over this face's surroundings already.
            occluders = self.occlusion().mask(original, target_face) if options.occlusion else None
            frame = backend.swap_face(frame, sources[source_index], target_face, options, timings)
            if occluders is not None:
                frame = keep_occluders(frame, original, occluders)
        if ctx.on_stage is not None and timings:
            for stage, seconds in timings.items():
                ctx.on_stage(f"{self.name}.{stage}", seconds)
        return frame

    def release(self) -> None:
        with self._lock:
            self._backends.clear()
            occlusion, self._occlusion = self._occlusion, None
        if occlusion is not None:
            occlusion.close()
