"""A pipeline's per-frame work for video: tracked faces, sticky selection, thread-safe render.

``analyse`` (one thread, frame order) tracks faces and decides which target face gets which
source. The decision is made once per track, when the track first appears, and kept while the
track lives: two faces of similar size cannot swap identities when their order flips, and a
``reference`` match holds through frames where the descriptor is noisier (a turned head).
In ``reference`` mode the recogniser's descriptor (``engine.identity``) is computed only for
the faces of new tracks, the only ones whose decision is still open: once per person who
enters the clip, not per frame.
``render`` (any thread) runs the processors on a copy of the job context holding that frame's
faces, so several frames can be rendered at once.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from facegate.engine.errors import InvalidOptions
from facegate.engine.faces import FaceAnalyser, box_iou
from facegate.engine.identity import IdentityDescriber
from facegate.engine.processors.base import JobContext
from facegate.engine.report import FaceReport
from facegate.engine.selection import SelectorSpec, select_faces
from facegate.engine.tracking import FaceTracker, TrackerOptions, mesh_box
from facegate.engine.types import Face, Frame
from facegate.engine.video.process import FrameStages
from facegate.engine.video.quality import QualitySampler


class FramePipeline(Protocol):
    """What a video swap uses of ``engine.pipeline.Pipeline``."""

    analyser: FaceAnalyser
    identity: IdentityDescriber
    faces_only: bool

    @property
    def selector(self) -> SelectorSpec: ...

    def process_frame(
        self,
        frame: Frame,
        ctx: JobContext,
        faces: Sequence[Face] | None = None,
        selected: Sequence[tuple[int, Face]] | None = None,
        *,
        owned: bool = False,
    ) -> Frame: ...

    def face_reports(self, ctx: JobContext, target: Frame, result: Frame) -> list[FaceReport]: ...


@dataclass
class FrameFaces:
    """What the analyse stage hands to render for one frame."""

    faces: list[Face]
    selected: list[tuple[int, Face]]
    # The frame's index, when its swapped faces are to be reported (``QualitySampler``).
    report: int | None = None


@dataclass(frozen=True)
class Handover:
    """A face in view at a part's first frame and what its person got where the person first
    appeared (``source``: the source index, or None: left alone), with its mesh box
    (x1, y1, x2, y2) to find it again (a segmented run: ``engine/video/census.py``)."""

    box: tuple[float, float, float, float]
    source: int | None

    def as_json(self) -> dict[str, object]:
        return {"box": list(self.box), "source": self.source}

    @classmethod
    def of_json(cls, data: dict[str, object]) -> Handover:
        x1, y1, x2, y2 = (float(v) for v in data["box"])  # type: ignore[attr-defined]
        source = data["source"]
        return cls((x1, y1, x2, y2), None if source is None else int(source))  # type: ignore[call-overload]


class StickySelection:
    """Per-track memory of the selector's decision (source index, or None = left alone)."""

    def __init__(self) -> None:
        self.decided: dict[int, int | None] = {}

    def select(
        self, fresh: Sequence[tuple[int, Face]], faces: Sequence[Face]
    ) -> list[tuple[int, Face]]:
        fresh_by_track = {face.track_id: source for source, face in fresh}
        chosen: list[tuple[int, Face]] = []
        for face in faces:
            if face.track_id is None:
                continue
            if face.track_id not in self.decided:
                self.decided[face.track_id] = fresh_by_track.get(face.track_id)
            source = self.decided[face.track_id]
            if source is not None:
                chosen.append((source, face))
        return chosen


class VideoSwap:
    """Builds the FrameStages of one video job from a prepared pipeline and its context."""

    def __init__(
        self,
        pipeline: FramePipeline,
        ctx: JobContext,
        tracker_options: TrackerOptions | None = None,
        *,
        handover: Sequence[Handover] = (),
        quality: QualitySampler | None = None,
        owns_frames: bool = False,
    ) -> None:
        self.pipeline = pipeline
        # render's frames are handed over (process_video's decoded frames: nothing reads
        # them after render), so the swap pastes into them: no whole-frame copy a frame.
        self.owns_frames = owns_frames
        self.quality = quality  # reports the swapped faces of a few frames
        self.ctx = ctx
        self.options = tracker_options or TrackerOptions()
        self.tracker = FaceTracker(pipeline.analyser, self.options)
        self.sticky = StickySelection()
        # A part of a segmented run: the decisions its first frame's people already have.
        self.handover = list(handover)
        self.reference_faces: list[Face] = ctx.state.get("pipeline", {}).get("reference_faces", [])

    def stages(self) -> FrameStages:
        return FrameStages(render=self.render, analyse=self.analyse)

    def close(self) -> None:
        self.tracker.close()

    def analyse(self, frame: Frame, index: int) -> FrameFaces:
        faces = self.tracker.update(frame, index)
        if self.handover:
            self._take_handover(faces)
        if not faces:
            return FrameFaces([], [])
        selector = self.pipeline.selector
        candidates = faces
        if selector.mode == "reference":
            candidates = [face for face in faces if face.track_id not in self.sticky.decided]
            self.pipeline.identity.attach(frame, candidates)
        try:
            fresh = select_faces(self.ctx.source_faces, candidates, selector, self.reference_faces)
        except InvalidOptions:  # a mapping naming a face absent from this frame: decide later
            fresh = []
        selected = self.sticky.select(fresh, faces)
        sampled = self.quality is not None and bool(selected) and self.quality.due(index)
        return FrameFaces(faces, selected, index if sampled else None)

    def _take_handover(self, faces: Sequence[Face]) -> None:
        """On a part's first frame: each face that overlaps a handed-over one keeps its
        person's decision instead of deciding afresh (the rest decide as new people do)."""
        boxes = [handed.box for handed in self.handover]
        for face in faces:
            if face.track_id is None or face.track_id in self.sticky.decided:
                continue
            overlap = box_iou(mesh_box(face.landmarks), boxes)
            best = int(overlap.argmax())
            if overlap[best] > self.options.match_iou:
                self.sticky.decided[face.track_id] = self.handover[best].source
        self.handover = []

    def render(self, frame: Frame, found: FrameFaces) -> Frame:
        if not found.faces and self.pipeline.faces_only:
            return frame  # no face: the frame passes through untouched
        ctx = copy.copy(self.ctx)  # per-frame faces, shared read-only job state
        if found.report is None or self.quality is None:
            return self.pipeline.process_frame(
                frame, ctx, faces=found.faces, selected=found.selected, owned=self.owns_frames
            )
        original = frame.copy()  # processors may paste in place
        result = self.pipeline.process_frame(
            frame, ctx, faces=found.faces, selected=found.selected, owned=self.owns_frames
        )
        self.quality.add(found.report, self.pipeline.face_reports(ctx, original, result))
        return result
