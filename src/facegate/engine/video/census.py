"""Looking over a whole video before it is cut into parts (``worker/segments.py``).

A run of a whole video decides, once per face track when the track first appears, which
source goes onto it (``engine/video/swap.py``); a part of a segmented run starts with fresh
tracks at its first frame. The two agree without help when that decision cannot depend on
when it is made: with at most one face in view, the one face is always the selected one
(``most_faces`` counts the faces on every ``every``-th frame, the tracker's detection
cadence, stopping as soon as ``enough`` were seen).

Otherwise (``reference`` mode, where the decision is a descriptor distance under a
threshold that a fresh look at a border can put the other way; ``one`` with several people;
an explicit mapping), ``border_handovers`` runs the analyse stage of a whole run (the same
tracker, the same decisions) up to the last border, and hands each part the decisions of
the people in view at its first frame (``Handover``): the part's tracks take them instead
of deciding afresh. It costs the decode and tracking of the video up to its last border
(no swap, no encode), once, before the parts start. (Looking on keyframes only was tried
and is not enough: a face that moves across the frame between two looks is taken for a new
person, who is then decided afresh.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import av

from facegate.engine.faces import FaceAnalyser
from facegate.engine.processors.base import JobContext
from facegate.engine.tracking import TrackerOptions, mesh_box
from facegate.engine.video.convert import FrameGeometry, decoded_to_bgr
from facegate.engine.video.swap import FramePipeline, Handover, VideoSwap


def frames_of(
    path: Path, size: tuple[int, int] | None = None
) -> Iterator[tuple[int, av.VideoFrame, FrameGeometry]]:
    """Every decoded picture of a video with its index and the geometry to convert it, at
    ``size`` (a run's output size: frames are analysed at it) or the video's own (videos
    displayed turned are never split: no rotation here)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        context = stream.codec_context
        width, height = size or (context.width, context.height)
        geometry = FrameGeometry.for_rotation(width, height, 0, context.color_range == 2)
        for index, picture in enumerate(container.decode(stream)):
            yield index, picture, geometry


def most_faces(path: Path, analyser: FaceAnalyser, every: int, enough: int = 2) -> int:
    """The most faces found on one looked-at frame (at most ``enough``)."""
    most = 0
    for index, picture, geometry in frames_of(path):
        if index % every:
            continue
        frame = decoded_to_bgr(picture, geometry)
        most = max(most, len(analyser.analyse(frame)))
        if most >= enough:
            break
    return most


def border_handovers(
    path: Path,
    pipeline: FramePipeline,
    ctx: JobContext,
    borders: Sequence[int],
    options: TrackerOptions,
    size: tuple[int, int] | None = None,
) -> dict[int, list[Handover]]:
    """For each border frame (a part's first), the people in view and their decisions.
    ``ctx``: the job's prepared context (sources, reference); ``size``: the frames' size in
    the run (its output size)."""
    wanted = set(borders)
    last = max(wanted, default=-1)
    work = VideoSwap(pipeline, ctx, options)
    handovers: dict[int, list[Handover]] = {}
    for index, picture, geometry in frames_of(path, size):
        if index > last:
            break
        ctx.check_cancelled()
        found = work.analyse(decoded_to_bgr(picture, geometry), index)
        if index in wanted:
            handovers[index] = [
                Handover(
                    tuple(float(v) for v in mesh_box(face.landmarks)),  # type: ignore[arg-type]
                    work.sticky.decided.get(face.track_id) if face.track_id is not None else None,
                )
                for face in found.faces
            ]
    return handovers
