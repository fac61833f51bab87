"""The runner's side of segmented video (``queue/segments.py`` is the scheduler's).

- ``split_video_job``: a claimed video longer than the segment length is checked once, as a
  whole run would check it (policy, source images and the input video moderated), and cut
  into frame ranges; the worker then records the parts (``JobOutcomes.split``).
- ``run_part``: one range rendered with the frames' global indices (the watermark and the
  disclosure label as in the whole run), the output moderated, the quality report of the
  whole run's sampled frames that fall in it (``engine/video/quality.py``), video only (the
  audio is copied once, at the assembly).
- ``assemble_video_job``: the parts joined without re-encoding, the original's audio copied
  (``engine/video/concat.py``), the parts' quality reports gathered in order, handed to the
  worker as any video result (signed, stored, metered with every part's compute seconds).

Ranges are whole multiples of the watermark's refresh period, so every frame carries the
mark exactly as in a run of the whole video, and at least ``segment_seconds`` long (a short
remainder joins the last part). Videos with a variable frame rate or a display rotation are
not split (their frame ranges are not plain time ranges): they run whole.

Who gets which source is decided once per face track, when the track appears; a part starts
with fresh tracks, so it would decide again at its first frame. That gives the same mapping
by itself where the decision cannot depend on when it is made (``same_mapping_in_parts``):
the selector gives every face source 0 (``many`` with one source or averaged sources), or
the video never shows more than one face at once (mode ``one``: the one face is always
first). Everywhere else (``reference`` mode: a descriptor distance under a threshold, which a
fresh look at a border can put the other way; ``one`` with several people; a mapping) the
split looks over the video once first (``Pipeline.handovers``, engine/video/census.py) and
each part's first-frame people take the decisions they got where they first appeared.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from facegate.engine.moderation import ModerationPolicy
from facegate.engine.pipeline import PipelineSpec, frames_run
from facegate.engine.runtime import EngineRuntime
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video import VideoInfo
from facegate.engine.video.census import most_faces
from facegate.engine.video.concat import Part, concat_parts
from facegate.engine.video.options import output_size
from facegate.engine.video.swap import Handover
from facegate.engine.watermark import VideoWatermark
from facegate.jobs.policy import check_spec_allowed
from facegate.jobs.tables import Job
from facegate.jobs.video import output_format, probe_with_policy, video_limits, video_options
from facegate.mediatypes import MEDIA_TYPES
from facegate.models.requests import model_request_for
from facegate.observability.metrics import observe_swap_quality
from facegate.queue.outcomes import ModerationRecord, RenderedPart
from facegate.queue.segments import FrameRange, segment_of
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.moderation import JobModeration, ModerationDecisions
from facegate.worker.output import JobOutput, ProgressFn, source_items
from facegate.worker.scratch import ScratchSpace
from facegate.worker.video_runner import (
    check_reference,
    download_input,
    finish_frames,
    load_reference,
    load_sources,
    progress_reporter,
)

if TYPE_CHECKING:
    from facegate.provenance.marker import JobMark


class SplitPlan:
    """A checked video and the ranges it is cut into."""

    def __init__(
        self, ranges: list[FrameRange], compute_seconds: float, moderation: ModerationRecord
    ) -> None:
        self.ranges = ranges
        self.compute_seconds = compute_seconds
        self.moderation = moderation


@runtime_checkable
class SegmentingRunner(Protocol):
    """A JobRunner that can also cut a long video into parts and join them."""

    def split(
        self, job: Job, policy: Policy, cancel: threading.Event, on_progress: ProgressFn
    ) -> SplitPlan | None:
        """The parts of a claimed video, its inputs checked; None: run it whole."""
        ...

    def run_part(
        self,
        part: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> RenderedPart: ...

    def assemble(
        self, job: Job, parts: Sequence[Job], policy: Policy, on_progress: ProgressFn
    ) -> JobOutput:
        """The result of a segmented job from its parts (a remux: seconds, not minutes)."""
        ...


def plan_ranges(info: VideoInfo, segment_seconds: float) -> list[FrameRange]:
    """The frame ranges of a video cut into parts of about ``segment_seconds``; one range
    (run whole) when it is not longer, when ``segment_seconds`` is 0, or when its frames
    are not evenly spaced in time (variable frame rate) or it is displayed turned."""
    whole = [FrameRange(0, info.frames)]
    fps = float(info.fps)
    if segment_seconds <= 0 or info.rotation or fps <= 0:
        return whole
    if abs(info.frames - info.duration * fps) > 1.5:
        return whole  # variable frame rate: a frame's index is not its time
    period = VideoWatermark.REFRESH_FRAMES
    length = max(period, math.ceil(segment_seconds * fps / period) * period)
    if info.frames < 2 * length:
        return whole
    starts = list(range(0, info.frames, length))
    if info.frames - starts[-1] < length // 2:
        starts.pop()  # a short remainder joins the last part
    ends = [*starts[1:], info.frames]
    return [FrameRange(a, b) for a, b in zip(starts, ends, strict=True)]


def same_mapping_in_parts(
    spec: PipelineSpec, job: Job, engine: EngineRuntime, target: Path
) -> bool:
    """Whether parts that start with fresh face tracks select the faces a whole run does
    (see the module's docstring)."""
    selector = spec.selector
    if selector.mode == "reference":
        return False
    sources = sum(1 for name in job.inputs if name.startswith("source-"))
    if selector.mode == "many" and selector.mapping is None:
        if sources <= 1 or selector.average_sources:
            return True  # every face gets source 0, whenever it is decided
    if selector.mode == "one" and selector.mapping is None:
        return most_faces(target, engine.analyser, TrackerOptions().detect_every) <= 1
    return False


def split_video_job(
    store: TenantStore,
    engine: EngineRuntime,
    job: Job,
    policy: Policy,
    scratch: ScratchSpace,
    segment_seconds: float,
    moderation: Callable[[Job], JobModeration],
    cancel: threading.Event | None = None,
) -> SplitPlan | None:
    """Check a claimed video once and cut it, or None (run it whole, checked then)."""
    started = time.perf_counter()
    spec = PipelineSpec.model_validate(job.spec)
    check_spec_allowed(spec, policy)
    folder = scratch.job_folder("facegate-split-")
    try:
        target = folder / "target"
        download_input(store, job, "target", target)
        info = probe_with_policy(target, policy)
        ranges = plan_ranges(info, segment_seconds)
        if len(ranges) < 2:
            return None
        sources, source_keys, _ = load_sources(store, job, policy)
        reference = load_reference(store, job, policy)
        checks = moderation(job)
        checks.check_sources(source_items(sources, source_keys))
        check_reference(checks, reference)
        # The input video's frames: each part checks its own as it decodes them, when one
        # flagged frame refuses (reject_ratio 0: a part's verdict is the video's, and each
        # part checks its last frame, so no unchecked stretch spans a border); else here,
        # in a decode of its own (a ratio is of the whole video).
        in_parts = checks.policy.reject_ratio == 0
        if not in_parts:
            checks.check_input_video("target video", target)
        ranges = [dataclasses.replace(r, check_input=in_parts) for r in ranges]
        if not same_mapping_in_parts(spec, job, engine, target):
            handovers = engine.pipeline(spec).handovers(
                [s.frame for s in sources],
                target,
                [r.first for r in ranges[1:]],
                float(info.fps),
                output_size(info.width, info.height, video_options(info, policy)),
                source_keys=source_keys,
                reference=reference,
                cancel=cancel,
                model_request=model_request_for(job.tenant_id, str(job.id), policy),
            )
            ranges = [
                dataclasses.replace(r, handover=tuple(h.as_json() for h in handovers[r.first]))
                if r.first in handovers
                else r
                for r in ranges
            ]
        return SplitPlan(ranges, time.perf_counter() - started, checks.record)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_part(
    store: TenantStore,
    engine: EngineRuntime,
    part: Job,
    policy: Policy,
    cancel: threading.Event,
    on_progress: ProgressFn,
    mark: JobMark,
    scratch: ScratchSpace,
    moderation: Callable[[Job], JobModeration],
) -> RenderedPart:
    """Render one part of a segmented video (its job's inputs; checked at the split)."""
    started = time.perf_counter()
    segment = segment_of(part)
    first, end = int(segment["first"]), int(segment["end"])
    spec = PipelineSpec.model_validate({k: v for k, v in part.spec.items() if k != "segment"})
    check_spec_allowed(spec, policy)
    folder = scratch.job_folder("facegate-part-")
    try:
        target = folder / "target"
        sources, source_keys, _ = load_sources(store, part, policy)
        reference = load_reference(store, part, policy)
        download_input(store, part, "target", target)
        info = probe_with_policy(target, policy)
        fmt = output_format(info)
        dst = folder / f"part.{fmt}"
        fps = Fraction(info.fps)
        options = video_options(info, policy).model_copy(
            update={"start": float(first / fps), "end": float(end / fps)}
        )
        finish = finish_frames(policy, mark, in_place=True)
        checks = moderation(part)
        reports: list[dict[str, Any]] = []
        result = engine.pipeline(spec).run_video(
            [s.frame for s in sources],
            target,
            dst,
            source_keys=source_keys,
            reference=reference,
            options=options,
            limits=video_limits(policy),
            cancel=cancel,
            on_progress=progress_reporter(on_progress),
            model_request=model_request_for(part.tenant_id, str(part.parent_id), policy),
            finish_frame=_offset(finish, first),
            inspect_frames=checks.output_inspector(),
            inspect_input=checks.input_inspector("target video")
            if segment.get("check_input")
            else None,
            handover=[Handover.of_json(h) for h in segment.get("handover", [])],
            # the whole video's sampled frames that are this part's
            reports=reports,
            part_of=(first, frames_run(info, video_options(info, policy))),
        )
        target.unlink()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return RenderedPart(
        data=dst,
        scratch=folder,
        extension=fmt,
        content_type=MEDIA_TYPES[fmt],
        frames=result.frames,
        compute_seconds=time.perf_counter() - started,
        moderation=checks.record,
        quality=reports,
    )


def _offset(finish: Callable[[Frame, int], Frame], first: int) -> Callable[[Frame, int], Frame]:
    """``finish`` with the original's frame index (a part's run counts from 0)."""

    def finish_at(frame: Frame, index: int) -> Frame:
        return finish(frame, first + index)

    return finish_at


def assemble_video_job(
    store: TenantStore,
    job: Job,
    parts: Sequence[Job],
    policy: Policy,
    on_progress: ProgressFn,
    scratch: ScratchSpace,
) -> JobOutput:
    """Join a segmented job's parts and the original's audio into its result; the compute
    seconds are the whole job's (the split's and the parts', recorded on its row, and this
    assembly's)."""
    started = time.perf_counter()
    on_progress(0.0, "assemble")
    folder = scratch.job_folder("facegate-video-")
    try:
        target = folder / "target"
        sources, _, input_bytes = load_sources(store, job, policy)
        input_bytes += download_input(store, job, "target", target)
        info = probe_with_policy(target, policy)
        fmt = output_format(info)
        pieces: list[Part] = []
        for part in parts:
            name = part.outputs[0]
            path = folder / name
            download_input(store, job, name, path, kind="parts")
            first = int(segment_of(part)["first"])
            pieces.append(Part(path, Fraction(first) / Fraction(info.fps)))
        dst = folder / f"result.{fmt}"
        result = concat_parts(pieces, target, dst)
        for piece in pieces:
            piece.path.unlink()
        target.unlink()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    source_pixels = sum(s.width * s.height for s in sources)
    # The parts' reports in order: the sampled frames of a whole run.
    reports = [report for part in parts for report in part.quality or []]
    observe_swap_quality(job.tenant_id, ((r["d_source"], r["verdict"]) for r in reports))
    return JobOutput(
        data=dst,
        scratch=folder,
        format=fmt,
        width=result.width,
        height=result.height,
        frames=result.frames,
        compute_seconds=(job.compute_seconds or 0.0) + time.perf_counter() - started,
        input_pixels=source_pixels + info.width * info.height * info.frames,
        input_bytes=input_bytes,
        quality=reports,
    )


def part_moderation(
    engine: EngineRuntime,
    policy: Policy,
    moderation_policy: ModerationPolicy,
    decisions: ModerationDecisions,
) -> Callable[[Job], JobModeration]:
    """The moderation of a job or a part (audited under the job it belongs to)."""

    def moderation(job: Job) -> JobModeration:
        return JobModeration(
            job.tenant_id,
            policy.moderation,
            engine.hub,
            moderation_policy,
            job=f"job:{job.parent_id or job.id}",
            decisions=decisions,
        )

    return moderation
