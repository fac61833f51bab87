"""The processor contract every processor follows.

Lifecycle (FaceFusion's, minus its process-wide state):

1. ``check_models()``: the models this processor needs are present and verified, else
   ``ModelUnavailable``. Called once per process per processor instance.
2. ``validate_options(raw)``: turns the job's raw option mapping into a typed, frozen options
   object, else ``InvalidOptions``. Pure; no I/O.
3. ``prepare(ctx)``: per-job work done once before frames (e.g. the source identity).
   Whatever it computes goes into ``ctx.state[self.name]``, never onto ``self``.
4. ``process_frame(frame, ctx)``: returns the processed frame (may be the same array).
5. ``release()``: frees models when the process no longer needs this processor.

A processor instance holds only read-only things (loaded models) and may be shared by
many jobs and threads at once; everything per job travels in ``JobContext``. There is no
module-level mutable state, so two pipelines with different options run side by side.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from facegate.engine.errors import Cancelled, InvalidOptions
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.types import Face, Frame


class ProcessorOptions(BaseModel):
    """Base of every processor's options: immutable, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


OptionsT = TypeVar("OptionsT", bound=ProcessorOptions)


@dataclass
class JobContext:
    """Everything one job's run needs, passed explicitly to every processor call.

    - ``options``: validated options per processor name;
    - ``source_faces``: the source faces (one per source image, or more), in order;
    - ``target_faces``: faces found in the current frame (set by the pipeline per frame);
    - ``selected``: pairs (source index, target face) the processors should act on, as
      decided by the pipeline's selector for the current frame;
    - ``state``: per-processor scratch space for this job (``state[processor.name]``);
    - ``cancel``: set to stop; processors call ``check_cancelled()`` between stages;
    - ``model_request``: tenant, tag pins / A/B split and job id for model resolution
      (engine.modelstore); ``models_used``: model name -> tag actually used (the job records it);
    - ``frame_owned``: the current frame was handed over (its caller never reads it again, and
      no processor reads the original: ``Processor.reads_original``), so a processor may paste
      into it instead of into a copy (a video's decoded frames: one whole-frame copy fewer).
    """

    options: dict[str, ProcessorOptions] = field(default_factory=dict)
    source_faces: list[Face] = field(default_factory=list)
    source_frames: list[Frame] = field(default_factory=list)
    target_faces: list[Face] = field(default_factory=list)
    selected: list[tuple[int, Face]] = field(default_factory=list)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    on_stage: Callable[[str, float], None] | None = None
    model_request: ModelRequest = field(default_factory=ModelRequest)
    models_used: dict[str, str] = field(default_factory=dict)
    frame_owned: bool = False

    def check_cancelled(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("the run was cancelled")

    def options_for(self, name: str, kind: type[OptionsT]) -> OptionsT:
        opts = self.options.get(name)
        if not isinstance(opts, kind):
            raise InvalidOptions(f"processor {name!r} has no validated options in this job")
        return opts


class Processor(ABC, Generic[OptionsT]):
    """Base class of processors. Subclasses set ``name`` and ``options_type``."""

    name: ClassVar[str]
    options_type: ClassVar[type[ProcessorOptions]]
    #: Whether the service should treat use of this processor as sensitive (audited).
    sensitive: ClassVar[bool] = False
    #: Whether it reads the frame as it came (``ctx.state["pipeline"]["original_frame"]``):
    #: then no processor may paste into the frame it was given (``JobContext.frame_owned``).
    reads_original: ClassVar[bool] = False

    def __init__(self, hub: ModelHub) -> None:
        #: Where the processor's models come from (the engine runtime's hub); the tenant and
        #: tag choice travel per call in the JobContext.
        self.hub = hub

    def check_models(self) -> None:
        """Raise ModelUnavailable when a needed model is missing; default: nothing needed."""

    @classmethod
    def validate_options(cls, raw: Mapping[str, Any] | None) -> OptionsT:
        """The typed options of ``raw`` (needs only the class: no models are loaded)."""
        try:
            opts = cls.options_type.model_validate(dict(raw or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "options"
            raise InvalidOptions(f"{cls.name}: {where}: {first['msg']}") from None
        return opts  # type: ignore[return-value]

    def prepare(self, ctx: JobContext) -> None:
        """Per-job preparation before the first frame; results go to ctx.state[self.name]."""

    @abstractmethod
    def process_frame(self, frame: Frame, ctx: JobContext) -> Frame:
        """Process one frame for one job."""

    def release(self) -> None:
        """Free loaded models."""
