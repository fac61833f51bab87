"""Runs one claimed job on the engine: inputs in, encoded result out.

Kept apart from the worker loop so the loop (claim, leases, bookkeeping) can be tested
with any JobRunner, and this bridge with the real engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from facegate.engine.image import ImageLimits, LoadedImage, OutputFormat, encode_image, load_image
from facegate.engine.moderation import ModerationPolicy
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.report import FaceReport, apply_weak_swap_policy
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import Frame
from facegate.engine.watermark import embed_watermark
from facegate.jobs.cost import TargetShape
from facegate.jobs.policy import check_output_resolution, check_spec_allowed
from facegate.jobs.tables import Job
from facegate.models.requests import model_request_for
from facegate.observability.metrics import observe_swap_quality
from facegate.queue.outcomes import RenderedPart
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.moderation import JOB_MODERATION, JobModeration, ModerationDecisions
from facegate.worker.output import JobOutput, ProgressFn, disclose, source_items, source_key
from facegate.worker.scratch import ScratchSpace
from facegate.worker.segments import (
    SplitPlan,
    assemble_video_job,
    part_moderation,
    run_part,
    split_video_job,
)
from facegate.worker.video_runner import check_decoded_memory, check_reference, run_video_job

#: A video at least twice this long is cut into parts of about this many seconds that
#: several workers run at once (the default of ``FACEGATE_VIDEO_SEGMENT_SECONDS``; 0: never).
SEGMENT_SECONDS = 6.0

if TYPE_CHECKING:
    from facegate.provenance.marker import JobMark


def output_format(spec: PipelineSpec, target: LoadedImage) -> OutputFormat:
    """The spec's format, else the target's when it is an output format, else PNG (BMP/TIFF
    targets may carry detail a JPEG would lose)."""
    if spec.output.format is not None:
        return spec.output.format
    if target.format in ("jpeg", "png", "webp"):
        return target.format
    return "png"


class EngineRunner:
    """JobRunner on the real engine: decode, the runtime's pipeline.run_image, encode (video jobs:
    ``jobs.video_runner``)."""

    def __init__(
        self,
        tenant_store: TenantStore,
        engine: EngineRuntime,
        scratch: ScratchSpace | None = None,
        moderation: ModerationPolicy = JOB_MODERATION,
        memory_budget: int | None = None,
        segment_seconds: float = SEGMENT_SECONDS,
    ) -> None:
        self.tenant_store = tenant_store
        # The worker's memory budget: a job whose estimate from its decoded target is over
        # it fails (memory-budget-exceeded) before the pipeline runs; None: no check.
        self.memory_budget = memory_budget
        self.segment_seconds = segment_seconds
        self.moderation = moderation  # the jobs' policy (the installation's video gap)
        # The runtime's source cache is shared by the jobs this runner runs: a batch's items
        # (one source, many targets) analyse their source once. Keys hold the tenant: no
        # tenant learns from the timing whether another one used the same image.
        self.engine = engine
        self.scratch = scratch or ScratchSpace()  # unopened: the temporary directory itself
        # Moderation decisions on source images, shared likewise: a batch's items check
        # their source once (keyed by tenant too).
        self.moderation_decisions = ModerationDecisions()

    # segmented video (worker/segments.py)
    def split(
        self, job: Job, policy: Policy, cancel: threading.Event, on_progress: ProgressFn
    ) -> SplitPlan | None:
        if job.kind != "video" or self.segment_seconds <= 0:
            return None
        on_progress(0.0, "load")
        return split_video_job(
            self.tenant_store,
            self.engine,
            job,
            policy,
            self.scratch,
            self.segment_seconds,
            self._moderation(policy),
            cancel,
        )

    def run_part(
        self,
        part: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> RenderedPart:
        return run_part(
            self.tenant_store,
            self.engine,
            part,
            policy,
            cancel,
            on_progress,
            mark,
            self.scratch,
            self._moderation(policy),
        )

    def assemble(
        self, job: Job, parts: Sequence[Job], policy: Policy, on_progress: ProgressFn
    ) -> JobOutput:
        return assemble_video_job(self.tenant_store, job, parts, policy, on_progress, self.scratch)

    def _moderation(self, policy: Policy) -> Callable[[Job], JobModeration]:
        return part_moderation(self.engine, policy, self.moderation, self.moderation_decisions)

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        if job.kind == "video":
            return run_video_job(
                self.tenant_store,
                self.engine,
                job,
                policy,
                cancel,
                on_progress,
                mark,
                self.scratch,
                self.moderation_decisions,
                self.moderation,
                self.memory_budget,
            )
        started = time.perf_counter()
        spec = PipelineSpec.model_validate(job.spec)
        check_spec_allowed(spec, policy)  # the policy may have changed since submission
        limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
        on_progress(0.0, "load")
        sources: list[LoadedImage] = []
        source_keys: list[tuple[str, str]] = []
        target: LoadedImage | None = None
        reference: Frame | None = None
        input_pixels = input_bytes = 0
        for name in job.inputs:
            data = self.tenant_store.get(job.tenant_id, "inputs", job.id, name)
            loaded = load_image(data, limits)
            input_pixels += loaded.width * loaded.height
            input_bytes += len(data)
            if name.startswith("target"):
                target = loaded
            elif name == "reference":
                reference = loaded.frame
            elif name.startswith("source-"):
                sources.append(loaded)
                source_keys.append(source_key(job.tenant_id, data))
        if target is None:
            raise RuntimeError(f"job {job.id} has no target input")
        check_output_resolution(spec, policy, target.width, target.height)
        check_decoded_memory(spec, TargetShape(target.width, target.height), self.memory_budget)
        moderation = JobModeration(
            job.tenant_id,
            policy.moderation,
            self.engine.hub,
            self.moderation,
            job=f"job:{job.id}",
            decisions=self.moderation_decisions,
        )
        moderation.check_sources(source_items(sources, source_keys))
        moderation.check_inputs([("target image", target.frame)])
        check_reference(moderation, reference)
        pipeline = self.engine.pipeline(spec)
        models_used: dict[str, str] = {}
        reports: list[FaceReport] = []
        # The output's moderation reads the result beside its quality report, unless the
        # tenant's weak-swap action may change the result (restore a face) or fail the job
        # (which it did before the output was ever moderated).
        moderated_beside = policy.weak_swap == "keep"
        output_refused: list[BaseException] = []

        def moderate_output(result: Frame) -> None:
            try:
                moderation.check_output(result)
            except BaseException as exc:  # raised below, where the check always was
                output_refused.append(exc)

        frame = pipeline.run_image(
            [s.frame for s in sources],
            target.frame,
            source_keys=source_keys,
            reference=reference,
            cancel=cancel,
            on_progress=on_progress,
            model_request=model_request_for(job.tenant_id, str(job.id), policy),
            models_used=models_used,
            reports=reports,
            beside_reports=moderate_output if moderated_beside else None,
        )
        reports = apply_weak_swap_policy(policy.weak_swap, reports, target.frame, frame)
        observe_swap_quality(job.tenant_id, ((r.d_source, r.verdict) for r in reports))
        if output_refused:
            raise output_refused[0]
        if not moderated_beside:
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
            moderation=moderation.record,
            quality=[report.as_dict() for report in reports],
        )
