"""Runs one claimed video job: the target streamed from storage to a private temporary file
(PyAV reads files), ``Pipeline.run_video`` with progress and cancellation, and the result
handed to the worker as that folder's file (streamed to storage, never read into memory
whole). Nothing reaches storage unless the run completes: the engine writes the output
under a hidden name and renames it only when finished. The folder is deleted when the run
fails, else by the worker once the result is stored (``JobOutput.discard``).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from facegate.engine.image import ImageLimits, LoadedImage, load_image
from facegate.engine.moderation import ModerationPolicy
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import Frame
from facegate.engine.video import VideoProgress
from facegate.engine.watermark import VideoWatermark
from facegate.jobs.cost import TargetShape, check_memory_budget, estimate_cost
from facegate.jobs.policy import check_spec_allowed
from facegate.jobs.tables import Job
from facegate.jobs.video import output_format, probe_with_policy, video_limits, video_options
from facegate.models.requests import model_request_for
from facegate.observability.metrics import observe_swap_quality
from facegate.storage.tenant import Kind, TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.moderation import JOB_MODERATION, JobModeration, ModerationDecisions
from facegate.worker.output import JobOutput, ProgressFn, disclose, source_items, source_key
from facegate.worker.scratch import ScratchSpace

if TYPE_CHECKING:
    from facegate.provenance.marker import JobMark

#: at most this often a progress row is written (the engine reports every 0.25 s)
PROGRESS_EVERY_SECONDS = 0.5


def download_input(
    store: TenantStore, job: Job, name: str, path: Path, kind: Kind = "inputs"
) -> int:
    """Stream one input of the job (or another of its objects: ``kind``) into ``path``
    (any backend); returns its size. A part of a segmented job reads its job's."""
    size = 0
    owner = job.parent_id or job.id
    with path.open("wb") as handle:
        for chunk in store.iter_chunks(job.tenant_id, kind, owner, name):
            handle.write(chunk)
            size += len(chunk)
    return size


def load_sources(
    store: TenantStore, job: Job, policy: Policy
) -> tuple[list[LoadedImage], list[tuple[str, str]], int]:
    """The job's source images (a part: its job's), their source-cache keys and bytes."""
    limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
    sources: list[LoadedImage] = []
    keys: list[tuple[str, str]] = []
    size = 0
    for name in job.inputs:
        if name.startswith("source-"):
            data = store.get(job.tenant_id, "inputs", job.parent_id or job.id, name)
            sources.append(load_image(data, limits))
            keys.append(source_key(job.tenant_id, data))
            size += len(data)
    return sources, keys, size


def load_reference(store: TenantStore, job: Job, policy: Policy) -> Frame | None:
    """The job's reference image (selector mode ``reference``; a part: its job's), or None."""
    if "reference" not in job.inputs:
        return None
    data = store.get(job.tenant_id, "inputs", job.parent_id or job.id, "reference")
    limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
    return load_image(data, limits).frame


def check_reference(moderation: JobModeration, reference: Frame | None) -> None:
    """The reference image is moderated as the other input images are."""
    if reference is not None:
        moderation.check_inputs([("reference image", reference)])


def progress_reporter(
    on_progress: ProgressFn, every: float = PROGRESS_EVERY_SECONDS
) -> Callable[[VideoProgress], None]:
    """VideoProgress -> the job's progress, stage and detail, throttled to ``every``."""
    last = [float("-inf")]

    def report(progress: VideoProgress) -> None:
        now = time.monotonic()
        final = progress.frames_done >= progress.frames_total
        if now - last[0] < every and not final:
            return
        last[0] = now
        eta = progress.eta_seconds
        detail = {
            "frames_done": progress.frames_done,
            "frames_total": progress.frames_total,
            "fps": round(progress.fps, 2),
            "eta_seconds": round(eta, 1) if eta is not None else None,
            "elapsed_seconds": round(progress.elapsed_seconds, 1),
        }
        on_progress(progress.fraction, "process", detail)

    return report


def check_decoded_memory(
    spec: PipelineSpec, target: TargetShape, budget: int | None, *, video: bool = False
) -> None:
    """The job's memory estimate again, from its target as decoded (or its video as opened)
    rather than as submitted: a header that understated the size gains nothing, and a job
    over this worker's whole budget fails (memory-budget-exceeded) before it runs."""
    if budget is None:
        return
    cost = estimate_cost(spec.processors, spec.processor_options, target, video=video)
    check_memory_budget(cost.memory_bytes, budget, what="this worker's memory budget")


def finish_frames(
    policy: Policy, mark: JobMark, *, in_place: bool = False
) -> Callable[[Frame, int], Frame]:
    """Last on every output frame, in order: the disclosure label (when the tenant's policy
    has one), then the watermark (always); ``in_place``: into the frame it is given (a
    video job's frames, handed over by ``process_video``), not into a new one."""
    watermark = VideoWatermark(mark.bits, in_place=in_place)

    def finish(frame: Frame, index: int) -> Frame:
        return watermark(disclose(frame, policy), index)

    return finish


def run_video_job(
    store: TenantStore,
    engine: EngineRuntime,
    job: Job,
    policy: Policy,
    cancel: threading.Event,
    on_progress: ProgressFn,
    mark: JobMark,
    scratch: ScratchSpace,
    decisions: ModerationDecisions | None = None,
    moderation_policy: ModerationPolicy = JOB_MODERATION,
    memory_budget: int | None = None,
) -> JobOutput:
    """The video counterpart of ``EngineRunner.run`` (same checks, same JobOutput; the
    sources analysed through the runtime's source cache); its files live in the worker's
    ``scratch`` space."""
    started = time.perf_counter()
    spec = PipelineSpec.model_validate(job.spec)
    check_spec_allowed(spec, policy)  # the policy may have changed since submission
    on_progress(0.0, "load")
    folder = scratch.job_folder("facegate-video-")
    try:
        target = folder / "target"
        sources, source_keys, input_bytes = load_sources(store, job, policy)
        input_bytes += download_input(store, job, "target", target)
        info = probe_with_policy(target, policy)
        shape = TargetShape(info.width, info.height, info.frames)
        check_decoded_memory(spec, shape, memory_budget, video=True)
        moderation = JobModeration(
            job.tenant_id,
            policy.moderation,
            engine.hub,
            moderation_policy,
            job=f"job:{job.id}",
            decisions=decisions,
        )
        moderation.check_sources(source_items(sources, source_keys))
        reference = load_reference(store, job, policy)
        check_reference(moderation, reference)
        fmt = output_format(info)
        dst = folder / f"result.{fmt}"
        on_progress(0.0, "analyse")
        reports: list[dict[str, Any]] = []
        result = engine.pipeline(spec).run_video(
            [s.frame for s in sources],
            target,
            dst,
            source_keys=source_keys,
            reference=reference,
            options=video_options(info, policy),
            limits=video_limits(policy),
            cancel=cancel,
            on_progress=progress_reporter(on_progress),
            model_request=model_request_for(job.tenant_id, str(job.id), policy),
            finish_frame=finish_frames(policy, mark, in_place=True),
            # each output frame as encoded; refused before the result is complete
            inspect_frames=moderation.output_inspector(),
            # each input frame as decoded (no decode of its own)
            inspect_input=moderation.input_inspector("target video"),
            reports=reports,  # the swapped faces of a few sampled frames
        )
        target.unlink()  # the input copy is not needed any more; the result stays
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    source_pixels = sum(s.width * s.height for s in sources)
    observe_swap_quality(job.tenant_id, ((r["d_source"], r["verdict"]) for r in reports))
    return JobOutput(
        data=dst,
        scratch=folder,
        format=fmt,
        width=result.width,
        height=result.height,
        frames=result.frames,
        compute_seconds=time.perf_counter() - started,
        input_pixels=source_pixels + info.width * info.height * info.frames,
        input_bytes=input_bytes,
        moderation=moderation.record,
        quality=reports,
    )
