"""Runs one claimed job on the engine: inputs in, encoded result out.

Kept apart from the worker loop so the loop (claim, leases, bookkeeping) can be tested
with any JobRunner, and this bridge with the real engine.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from facegate.engine.image import ImageLimits, LoadedImage, OutputFormat, encode_image, load_image
from facegate.engine.label import draw_label
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.types import Frame
from facegate.engine.watermark import embed_watermark
from facegate.jobs.policy import check_output_resolution, check_spec_allowed
from facegate.jobs.tables import Job
from facegate.models.requests import model_request_for
from facegate.storage.base import data_size
from facegate.storage.tenant import TenantStore
from facegate.tenancy.schemas import DisclosureLabel
from facegate.tenancy.tables import Policy
from facegate.worker.moderation import JobModeration

if TYPE_CHECKING:
    from facegate.provenance.marker import JobMark


class ProgressFn(Protocol):
    """Reports (fraction done 0..1, stage); video runs add ``detail`` (frames, fps, ETA)."""

    def __call__(
        self, fraction: float, stage: str, detail: dict[str, Any] | None = None
    ) -> None: ...


CONTENT_TYPES: dict[str, str] = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "mp4": "video/mp4",
    "webm": "video/webm",
}
EXTENSIONS: dict[str, str] = {
    "jpeg": "jpg",
    "png": "png",
    "webp": "webp",
    "mp4": "mp4",
    "webm": "webm",
}
ResultFormat = OutputFormat | Literal["mp4", "webm"]


@dataclass(frozen=True)
class JobOutput:
    """The encoded result of a job and what is recorded about it.

    ``data`` is the result's bytes (an image), or the file a run wrote it to (a video: it is
    streamed to storage, never held in memory whole) inside ``scratch``, a private folder
    the worker deletes with :meth:`discard` once the result is stored or given up."""

    data: bytes | Path
    format: ResultFormat
    width: int
    height: int
    frames: int
    compute_seconds: float
    # What went in (usage metering): pixels of every input image, bytes of every upload.
    input_pixels: int = 0
    input_bytes: int = 0
    # Model name -> tag the run used (the tenant's pins / A/B variant), stored on the job.
    models_used: dict[str, str] = field(default_factory=dict)
    scratch: Path | None = None
    # What content moderation checked and allowed (inputs, then the output); empty when
    # the tenant's moderation is off. The worker audits it with the result.
    moderated: tuple[str, ...] = ()
    # The C2PA manifest store of a format that cannot embed one (WebM), stored beside it.
    sidecar: bytes | None = None

    @property
    def size(self) -> int:
        """The result's size in bytes."""
        return data_size(self.data)

    def discard(self) -> None:
        """Delete the scratch folder of a file result (nothing for bytes)."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]

    @property
    def name(self) -> str:
        return f"result.{EXTENSIONS[self.format]}"


class JobRunner(Protocol):
    """Turns a claimed job into its output; raises EngineError (or a ServiceError).
    ``mark`` is the job's watermark: the runner puts it into every frame it encodes."""

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput: ...


def disclose(frame: Frame, policy: Policy) -> Frame:
    """The tenant's visible disclosure label on a result frame, when its policy has one
    (off by default); the watermark and the manifest are added whatever the policy."""
    if not policy.disclosure_label:
        return frame
    label = DisclosureLabel.model_validate(policy.disclosure_label)
    return draw_label(frame, label.text, label.corner)


def output_format(spec: PipelineSpec, target: LoadedImage) -> OutputFormat:
    """The spec's format, else the target's when it is an output format, else PNG (BMP/TIFF
    targets may carry detail a JPEG would lose)."""
    if spec.output.format is not None:
        return spec.output.format
    if target.format in ("jpeg", "png", "webp"):
        return target.format
    return "png"


def source_items(sources: list[LoadedImage]) -> list[tuple[str, Frame]]:
    """The job's source images as moderation names them (``source image 1``, ...)."""
    return [(f"source image {i}", s.frame) for i, s in enumerate(sources, start=1)]


class EngineRunner:
    """JobRunner on the real engine: decode, Pipeline(spec).run_image, encode (video jobs:
    ``jobs.video_runner``)."""

    def __init__(self, tenant_store: TenantStore) -> None:
        self.tenant_store = tenant_store

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        if job.kind == "video":
            from facegate.worker.video_runner import run_video_job  # imports this module

            return run_video_job(self.tenant_store, job, policy, cancel, on_progress, mark)
        started = time.perf_counter()
        spec = PipelineSpec.model_validate(job.spec)
        check_spec_allowed(spec, policy)  # the policy may have changed since submission
        limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
        on_progress(0.0, "load")
        sources: list[LoadedImage] = []
        target: LoadedImage | None = None
        input_pixels = input_bytes = 0
        for name in job.inputs:
            data = self.tenant_store.get(job.tenant_id, "inputs", job.id, name)
            loaded = load_image(data, limits)
            input_pixels += loaded.width * loaded.height
            input_bytes += len(data)
            if name.startswith("target"):
                target = loaded
            elif name.startswith("source-"):
                sources.append(loaded)
        if target is None:
            raise RuntimeError(f"job {job.id} has no target input")
        check_output_resolution(spec, policy, target.width, target.height)
        moderation = JobModeration(job.tenant_id, policy.moderation)
        moderation.check_inputs([*source_items(sources), ("target image", target.frame)])
        pipeline = Pipeline(spec)
        models_used: dict[str, str] = {}
        frame = pipeline.run_image(
            [s.frame for s in sources],
            target.frame,
            cancel=cancel,
            on_progress=on_progress,
            model_request=model_request_for(job.tenant_id, str(job.id), policy),
            models_used=models_used,
        )
        moderation.check_output(frame)  # before the result is encoded, marked and stored
        fmt = output_format(spec, target)
        alpha = (
            target.alpha
            if target.alpha is not None and target.alpha.shape == frame.shape[:2]
            else None
        )
        on_progress(1.0, "encode")
        frame = embed_watermark(disclose(frame, policy), mark.bits)
        data = encode_image(frame, fmt, spec.output.quality, alpha=alpha)
        height, width = frame.shape[:2]
        return JobOutput(
            data=data,
            format=fmt,
            width=width,
            height=height,
            frames=1,
            compute_seconds=time.perf_counter() - started,
            input_pixels=input_pixels,
            input_bytes=input_bytes,
            models_used=models_used,
            moderated=tuple(moderation.checked),
        )
