"""PipelineSpec → Pipeline: the one way to run processors on images (and video frames).

A ``PipelineSpec`` is plain data (what a job stores); a ``Pipeline`` is that spec validated
against the installed processors, ready to run. A pipeline holds no per-job state: each run
gets its own ``JobContext``, so one pipeline (or two with different options) may serve many
jobs in parallel threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from facegate.engine.errors import InvalidOptions, NoFaceDetected
from facegate.engine.faces import FaceAnalyser, sort_faces
from facegate.engine.identity import IdentityDescriber
from facegate.engine.identity import available as identity_available
from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.processors.base import JobContext, Processor, ProcessorOptions
from facegate.engine.processors.registry import ProcessorRegistry
from facegate.engine.report import FaceMeasure, FaceReport, judge, measure_face
from facegate.engine.selection import SelectorSpec, prepare_sources, select_faces
from facegate.engine.sourcecache import SourceFaceCache
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Face, FloatArray, Frame

if TYPE_CHECKING:  # the video stack (PyAV) loads on a pipeline's first video: see run_video
    from facegate.engine.video.options import VideoOptions, VideoProgress, VideoResult
    from facegate.engine.video.probe import VideoInfo, VideoLimits
    from facegate.engine.video.process import FrameInspector
    from facegate.engine.video.reader import InputInspector
    from facegate.engine.video.swap import Handover

ProgressCallback = Callable[[float, str], None]
"""Called with (fraction done 0..1, stage name)."""

#: Processors that need at least one source face (they put a source identity somewhere).
SOURCE_PROCESSORS = frozenset({"face_swapper"})
#: Processors that act on target faces: an image target without a face is an error for them.
FACE_PROCESSORS = frozenset(
    {"face_swapper", "face_enhancer", "age_modifier", "expression_restorer"}
)


class OutputSpec(BaseModel):
    """How the result is encoded. ``format=None`` keeps the target's format where possible."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["jpeg", "png", "webp"] | None = None
    quality: int = Field(default=90, ge=1, le=100)


T = TypeVar("T")
R = TypeVar("R")


def started(work: Callable[[], R], name: str) -> Future[R]:
    """``work()`` begun now on a thread of its own (a new thread: it inherits the caller's
    CPU priority, which differs between a worker's lanes); its result or exception in the
    future."""
    future: Future[R] = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to whoever reads the future
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


@contextlib.contextmanager
def beside(work: Callable[[], None] | None, name: str) -> Iterator[None]:
    """``work()`` on a thread of its own (:func:`started`) while the block runs; its
    exception, if any, is raised after the block (the block's own first)."""
    if work is None:
        yield
        return
    running = started(work, name)
    try:
        yield
    finally:
        wait([running])
    running.result()


def on_two_threads(work: Callable[[T], R], items: Sequence[T], name: str) -> list[R]:
    """``[work(item) for item in items]``, every other item :func:`beside` the caller (on a
    thread called ``name``) where there are several items and cores."""
    if len(items) < 2 or (os.cpu_count() or 1) < 2:
        return [work(item) for item in items]
    results: dict[int, R] = {}

    def run(start: int) -> None:
        for index in range(start, len(items), 2):
            results[index] = work(items[index])

    with beside(lambda: run(1), name):
        run(0)
    return [results[index] for index in range(len(items))]


class PipelineSpec(BaseModel):
    """What to run: processors in order, their options, face selection and output encoding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    processors: list[str] = Field(default_factory=lambda: ["face_swapper"], min_length=1)
    processor_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    selector: SelectorSpec = Field(default_factory=SelectorSpec)
    output: OutputSpec = Field(default_factory=OutputSpec)

    @field_validator("processors")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each processor may appear once")
        return value


class Pipeline:
    """A validated, ready-to-run PipelineSpec."""

    def __init__(
        self,
        spec: PipelineSpec,
        *,
        analyser: FaceAnalyser,
        registry: ProcessorRegistry,
        identity: IdentityDescriber,
        source_cache: SourceFaceCache | None = None,
    ) -> None:
        self.spec = spec
        self.identity = identity
        # Sources named by a key (``source_keys``) are analysed once per key: a batch's
        # items share their source. The cache must serve this pipeline's analyser only.
        self.source_cache = source_cache
        stray = set(spec.processor_options) - set(spec.processors)
        if stray:
            raise InvalidOptions(
                f"options given for processors not in the pipeline: {', '.join(sorted(stray))}"
            )
        self.processors: list[Processor[Any]] = [registry.get(name) for name in spec.processors]
        self.options: dict[str, ProcessorOptions] = {
            p.name: p.validate_options(spec.processor_options.get(p.name)) for p in self.processors
        }
        self.analyser = analyser
        self.needs_source = bool(SOURCE_PROCESSORS & set(spec.processors))
        self.needs_target_face = bool(FACE_PROCESSORS & set(spec.processors))
        # Every processor works on faces: a frame without one passes through untouched.
        self.faces_only = set(spec.processors) <= FACE_PROCESSORS

    @property
    def selector(self) -> SelectorSpec:
        return self.spec.selector

    def analyse_sources(
        self, sources: Sequence[Frame], keys: Sequence[Hashable] | None = None
    ) -> list[Face]:
        """Faces of every source image, image by image, each image's faces in selector order.
        ``keys`` name the images for the source cache (one per image), when there is one.

        The list index is the "source face index" that mappings refer to.
        """
        faces: list[Face] = []
        for index, frame in enumerate(sources):
            key = keys[index] if keys is not None else None
            found = sort_faces(self._analyse_source(frame, key), self.spec.selector.order)
            if not found and self.needs_source:
                raise NoFaceDetected(f"source image {index + 1} has no face")
            for position, face in enumerate(found):
                face.extra["source_frame"] = index  # which source image the face came from
                if key is not None:  # the face by the source cache's key (its descriptor)
                    face.extra["source_face_key"] = (key, position)
            faces.extend(found)
        return faces

    def _analyse_source(self, frame: Frame, key: Hashable | None) -> list[Face]:
        if key is None or self.source_cache is None:
            return self.analyser.analyse(frame)
        return self.source_cache.faces(key, lambda: self.analyser.analyse(frame))

    def prepare(
        self,
        sources: Sequence[Frame],
        *,
        source_keys: Sequence[Hashable] | None = None,
        reference: Frame | None = None,
        cancel: threading.Event | None = None,
        on_stage: Callable[[str, float], None] | None = None,
        model_request: ModelRequest | None = None,
    ) -> JobContext:
        """Analyse sources (and the reference frame) once and let each processor prepare.

        ``model_request`` (tenant, tag policy, job id) is what processors resolve models
        with: a tenant's private models and pinned tags apply to its job only; the tags
        used land in ``ctx.models_used``."""
        if self.needs_source and not sources:
            raise InvalidOptions("face_swapper needs at least one source image")
        ctx = JobContext(
            options=dict(self.options),
            source_frames=list(sources),
            cancel=cancel or threading.Event(),
            on_stage=on_stage,
            model_request=model_request or ModelRequest(),
        )
        ctx.check_cancelled()
        if source_keys is not None and len(source_keys) != len(sources):
            raise ValueError("source_keys must name each source image")
        ctx.source_faces = prepare_sources(
            self.analyse_sources(sources, source_keys), self.spec.selector
        )
        reference_faces: list[Face] = []
        if reference is not None:
            reference_faces = sort_faces(self.analyser.analyse(reference), self.spec.selector.order)
            if not reference_faces:
                raise NoFaceDetected("the reference image has no face")
            if self.spec.selector.mode == "reference":
                self.identity.attach(reference, reference_faces)
        ctx.state["pipeline"] = {"reference_faces": reference_faces}
        for processor in self.processors:
            ctx.check_cancelled()
            processor.prepare(ctx)
        return ctx

    def select(
        self, frame: Frame, ctx: JobContext, target_faces: Sequence[Face]
    ) -> list[tuple[int, Face]]:
        """The (source face index, target face) pairs the processors will work on, by the
        selector; sets ``ctx.target_faces`` (in the selector's order)."""
        ctx.target_faces = sort_faces(target_faces, self.spec.selector.order)
        reference_faces = ctx.state.get("pipeline", {}).get("reference_faces", [])
        if self.spec.selector.mode == "reference":
            self.identity.attach(frame, ctx.target_faces)
        return select_faces(ctx.source_faces, ctx.target_faces, self.spec.selector, reference_faces)

    def process_frame(
        self,
        frame: Frame,
        ctx: JobContext,
        faces: Sequence[Face] | None = None,
        selected: Sequence[tuple[int, Face]] | None = None,
        *,
        owned: bool = False,
    ) -> Frame:
        """Run every processor on one frame. ``faces`` skips detection (video tracking);
        ``selected`` skips selection (video keeps each track's pairing across frames);
        ``owned``: the caller hands the frame over and never reads it again, so processors
        may paste into it (``JobContext.frame_owned``; not where one reads the original)."""
        ctx.check_cancelled()
        ctx.frame_owned = owned and not any(p.reads_original for p in self.processors)
        # The frame as it came, for processors that restore something of it (expression).
        ctx.state.setdefault("pipeline", {})["original_frame"] = frame
        target_faces = list(faces) if faces is not None else self.analyser.analyse(frame)
        if selected is not None:
            ctx.target_faces = sort_faces(target_faces, self.spec.selector.order)
            ctx.selected = list(selected)
        else:
            ctx.selected = self.select(frame, ctx, target_faces)
        for processor in self.processors:
            ctx.check_cancelled()
            started = time.perf_counter()
            frame = processor.process_frame(frame, ctx)
            if ctx.on_stage is not None:
                ctx.on_stage(processor.name, time.perf_counter() - started)
        return frame

    def run_image(
        self,
        sources: Sequence[Frame],
        target: Frame,
        *,
        source_keys: Sequence[Hashable] | None = None,
        reference: Frame | None = None,
        cancel: threading.Event | None = None,
        on_progress: ProgressCallback | None = None,
        model_request: ModelRequest | None = None,
        models_used: dict[str, str] | None = None,
        counts: dict[str, int] | None = None,
        reports: list[FaceReport] | None = None,
        beside_reports: Callable[[Frame], None] | None = None,
    ) -> Frame:
        """Process one target image; ``NoFaceDetected`` when a face processor finds no face.
        ``models_used``, when given, receives the model name -> tag the run used; ``counts``
        the faces found in the target (``target_faces``) and those processed (``processed``);
        ``reports`` the quality report of each swapped face (``engine.report``; none where
        the pipeline swaps nothing or the recogniser is not installed). ``beside_reports``:
        more reading of the result (the output's moderation), run on a thread of its own
        while the reports are made (neither changes the result), else after processing;
        what it raises is raised once both are done."""
        report = on_progress or (lambda fraction, stage: None)
        report(0.0, "analyse")
        # The target is analysed on the analyser's aside threads while the sources are
        # analysed and prepared here (mediapipe releases the interpreter: two cores busy).
        # Those threads keep their graphs; they run at the CPU priority of the thread that
        # first used them (in a worker process, a worker's: jobs and the API's live streams
        # share an analyser only in the threads shape, FACEGATE_WORKER_PROCESSES=false).
        analysing = self.analyser.aside().submit(self.analyser.analyse, target)
        try:
            ctx = self.prepare(
                sources,
                source_keys=source_keys,
                reference=reference,
                cancel=cancel,
                model_request=model_request,
            )
        except BaseException:
            analysing.cancel()  # one under way ends on its own; nothing reads it
            raise
        if models_used is not None:  # processors resolved their models in prepare()
            models_used.update(ctx.models_used)
            ctx.models_used = models_used
        report(0.3, "detect")
        # Not started yet (the aside threads busy with videos' keyframes): analysed here.
        target_faces = self.analyser.analyse(target) if analysing.cancel() else analysing.result()
        if not target_faces and self.needs_target_face:
            raise NoFaceDetected("the target image has no face")
        report(0.5, "process")
        wants_reports = reports is not None and "face_swapper" in self.spec.processors
        if not (wants_reports and identity_available()):
            result = self.process_frame(target, ctx, faces=target_faces)
            if beside_reports is not None:
                beside_reports(result)
        else:
            assert reports is not None  # (wants_reports)
            # The sources' descriptors need no result: made on a thread of their own while
            # the faces are swapped and the result's faces measured.
            selected = self.select(target, ctx, target_faces)
            indexes = [source_index for source_index, _ in selected]
            describing = started(
                lambda: self._source_embeddings(ctx, indexes), "source-descriptors"
            )
            try:
                # The reports compare the result with the target as it came: the processors
                # get a copy, handed over (they paste into it: one whole-frame copy, not two).
                result = self.process_frame(
                    target.copy(), ctx, faces=target_faces, selected=selected, owned=True
                )
                moderate = None if beside_reports is None else lambda: beside_reports(result)
                with beside(moderate, "beside-reports"):
                    measures = self._measure_faces(ctx, target, result)
                    reports.extend(self._judged(ctx, measures, describing.result()))
            finally:
                wait([describing])  # (a failed swap: its end too)
        if counts is not None:
            counts.update(target_faces=len(target_faces), processed=len(ctx.selected))
        report(1.0, "done")
        return result

    def face_reports(self, ctx: JobContext, target: Frame, result: Frame) -> list[FaceReport]:
        """The quality report of each face ``ctx`` swapped from ``target`` into ``result``."""
        embeddings = self._source_embeddings(ctx, [index for index, _ in ctx.selected])
        return self._judged(ctx, self._measure_faces(ctx, target, result), embeddings)

    @staticmethod
    def _judged(
        ctx: JobContext, measures: Sequence[FaceMeasure], embeddings: dict[int, FloatArray]
    ) -> list[FaceReport]:
        """Each measured face judged against its source's descriptor (``ctx.selected``
        names the source of each)."""
        return [judge(m, embeddings[ctx.selected[m.index][0]]) for m in measures]

    def _source_embeddings(self, ctx: JobContext, indexes: Sequence[int]) -> dict[int, FloatArray]:
        """The recogniser's descriptor of each source face named (by its index in
        ``ctx.source_faces``), through the source cache where the face has a key."""
        recogniser = self.identity.recogniser
        embeddings: dict[int, FloatArray] = {}
        for source_index in indexes:
            if source_index not in embeddings:
                source = ctx.source_faces[source_index]
                which = source.extra.get("source_frame", 0)
                frame = ctx.source_frames[which if isinstance(which, int) else 0]

                def describe(frame: Frame = frame, source: Face = source) -> FloatArray:
                    return recogniser.describe(frame, source)

                key = source.extra.get("source_face_key")
                if self.source_cache is None or key is None or "averaged_from" in source.extra:
                    embeddings[source_index] = describe()
                else:  # a source image's face is described once for all its jobs
                    embeddings[source_index] = self.source_cache.descriptor(key, describe)
        return embeddings

    def _measure_faces(self, ctx: JobContext, target: Frame, result: Frame) -> list[FaceMeasure]:
        """``measure_face`` of each face ``ctx`` swapped, in order; several faces on two
        threads (dlib's search, the aligner and the descriptor all release the interpreter)."""
        recogniser = self.identity.recogniser

        def one(item: tuple[int, tuple[int, Face]]) -> FaceMeasure:
            index, (_, face) = item
            return measure_face(recogniser, target, result, face, index)

        return on_two_threads(one, list(enumerate(ctx.selected)), "face-reports")

    def run_video(
        self,
        sources: Sequence[Frame],
        src: Path,
        dst: Path,
        *,
        source_keys: Sequence[Hashable] | None = None,
        reference: Frame | None = None,
        options: VideoOptions | None = None,
        limits: VideoLimits | None = None,
        cancel: threading.Event | None = None,
        on_progress: Callable[[VideoProgress], None] | None = None,
        model_request: ModelRequest | None = None,
        finish_frame: Callable[[Frame, int], Frame] | None = None,
        inspect_frames: FrameInspector | None = None,
        handover: Sequence[Handover] = (),
        inspect_input: InputInspector | None = None,
        reports: list[dict[str, Any]] | None = None,
        part_of: tuple[int, int] | None = None,
    ) -> VideoResult:
        """Process a video file into ``dst`` (tracked faces, progress, cancel within ~50 ms;
        nothing appears at ``dst`` unless the run completes). See ``engine.video``.
        ``finish_frame(frame, index)`` runs on every output frame in order, last before the
        encoder (the service's watermark); ``inspect_frames`` then sees each (the service's
        moderation of the output, before anything is encoded into place). ``handover``: a
        part of a segmented run, the decisions of the people in view at its first frame
        (``border_handovers``). ``inspect_input`` sees each input frame as it is decoded
        (the service's moderation of the input video, without a decode of its own).
        ``reports`` receives the quality report of each swapped face of a few sampled frames
        (``engine/video/quality.py``), each with its ``frame``; none where the pipeline swaps
        nothing or the recogniser is not installed. ``part_of``: (this run's first frame, the
        whole video's frames) for a part of a segmented run, which samples the whole's spans
        that are its own and reports the whole's frame indices."""
        # optional: PyAV and the video stack, which an image's run (``facegate swap``) never needs
        from facegate.engine.video.probe import probe_video
        from facegate.engine.video.process import process_video  # optional: as above
        from facegate.engine.video.quality import QualitySampler  # optional: as above
        from facegate.engine.video.swap import VideoSwap  # optional: as above

        info = probe_video(src, limits)  # refuse a bad file before analysing the sources
        ctx = self.prepare(
            sources,
            source_keys=source_keys,
            reference=reference,
            cancel=cancel,
            model_request=model_request,
        )
        sampler = None
        if reports is not None and "face_swapper" in self.spec.processors and identity_available():
            sampler = QualitySampler(frames_run(info, options), part_of=part_of)
        work = VideoSwap(
            self,
            ctx,
            TrackerOptions(fps=float(info.fps)),
            handover=handover,
            quality=sampler,
            owns_frames=True,  # process_video decodes a fresh frame for each render
        )
        try:
            stages = dataclasses.replace(
                work.stages(),
                finish=finish_frame,
                inspect=inspect_frames,
                inspect_input=inspect_input,
            )
            result = process_video(src, dst, stages, options, on_progress, ctx.cancel, limits)
        finally:
            work.close()
        if reports is not None and sampler is not None:
            reports.extend(sampler.as_json())
        return result

    def handovers(
        self,
        sources: Sequence[Frame],
        src: Path,
        borders: Sequence[int],
        fps: float,
        size: tuple[int, int] | None = None,
        *,
        source_keys: Sequence[Hashable] | None = None,
        reference: Frame | None = None,
        cancel: threading.Event | None = None,
        model_request: ModelRequest | None = None,
    ) -> dict[int, list[Handover]]:
        """Before a video is cut at ``borders`` (each a part's first frame): the people in
        view at each border and the decisions a run of the whole video gives them
        (``engine/video/census.py``), for :meth:`run_video`'s ``handover``. ``size``: the
        run's frame size when its options scale the video down (``output_size``)."""
        # optional: PyAV and the video stack, as in run_video
        from facegate.engine.video.census import border_handovers

        ctx = self.prepare(
            sources,
            source_keys=source_keys,
            reference=reference,
            cancel=cancel,
            model_request=model_request,
        )
        return border_handovers(src, self, ctx, borders, TrackerOptions(fps=fps), size)


def frames_run(info: VideoInfo, options: VideoOptions | None) -> int:
    """How many frames of a video a run with ``options`` processes (about: from its
    duration when the options cut it)."""
    if options is None or (options.start == 0.0 and options.end is None):
        return info.frames
    end = info.duration if options.end is None else min(options.end, info.duration)
    return max(1, round((end - options.start) * float(info.fps)))
