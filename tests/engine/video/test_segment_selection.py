"""Face selection across segment borders: a part of a video starts with fresh tracks and
decides again at its first frame; where the decision cannot depend on when it is made, the
parts map the faces a run of the whole video maps, and where it can, the video is not split
(``worker/segments.same_mapping_in_parts``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import cv2
import pytest
from tests.testdata import FACES
from videoclips import FACE, SOURCE, create_clip, decode_all

from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video.swap import VideoSwap
from facegate.jobs.tables import Job
from facegate.worker.segments import same_mapping_in_parts

pytestmark = pytest.mark.slow

GROUP = FACES / "group_2_women_laughing_angled.jpg"
BORDERS = [(0, 24), (24, 48), (48, 60)]


def selections(
    face_engine: EngineRuntime, spec: PipelineSpec, frames: list[Frame], reference: Frame | None
) -> list[list[tuple[int, int]]]:
    """Per frame, the (source, face position) pairs the analysis stage selects, starting
    with fresh tracks as a part does (positions: the faces' left-to-right order)."""
    pipeline = face_engine.pipeline(spec)
    ctx = pipeline.prepare([cv2.imread(str(SOURCE))], reference=reference)
    work = VideoSwap(pipeline, ctx, TrackerOptions(fps=30.0))
    chosen = []
    try:
        for index, frame in enumerate(frames):
            found = work.analyse(frame, index)
            lefts = sorted(float(face.box[0]) for face in found.faces)
            chosen.append(
                sorted((source, lefts.index(float(face.box[0]))) for source, face in found.selected)
            )
    finally:
        work.close()
    return chosen


def whole_and_parts(
    face_engine: EngineRuntime, spec: PipelineSpec, frames: list[Frame], reference: Frame | None
) -> tuple[list[Any], list[Any]]:
    whole = selections(face_engine, spec, frames, reference)
    parts: list[Any] = []
    for first, end in BORDERS:
        parts += selections(face_engine, spec, frames[first:end], reference)
    return whole, parts


def video_job(spec: PipelineSpec) -> Job:
    return Job(id=uuid.uuid4(), tenant_id="t", spec=spec.model_dump(), inputs=["source-0"])


@pytest.mark.parametrize(("photo", "mode"), [(GROUP, "many"), (FACE, "one")])
def test_where_the_decision_cannot_depend_on_time_parts_map_as_the_whole_run(
    tmp_path: Path, face_engine: EngineRuntime, photo: Path, mode: str
) -> None:
    clip = create_clip(tmp_path / "clip.mp4", photo=photo, seconds=2.0, width=640, height=360)
    spec = PipelineSpec.model_validate({"processors": ["face_swapper"], "selector": {"mode": mode}})
    whole, parts = whole_and_parts(face_engine, spec, decode_all(clip), None)
    assert all(whole)  # a face is selected on every frame
    assert parts == whole
    assert same_mapping_in_parts(spec, video_job(spec), face_engine, clip)


def test_two_people_in_mode_one_or_reference_are_not_split(
    tmp_path: Path, face_engine: EngineRuntime
) -> None:
    clip = create_clip(tmp_path / "two.mp4", photo=GROUP, seconds=1.0, width=640, height=360)
    for mode in ("one", "reference"):
        spec = PipelineSpec.model_validate(
            {"processors": ["face_swapper"], "selector": {"mode": mode}}
        )
        assert not same_mapping_in_parts(spec, video_job(spec), face_engine, clip), mode


def test_a_reference_decision_made_at_a_border_can_fall_the_other_way(
    tmp_path: Path, face_engine: EngineRuntime
) -> None:
    """Why reference mode runs whole: on this clip of two similar people, a part's fresh
    tracks at its first frame match the reference differently from the whole run's, whose
    tracks were decided at frame 0. (Should the decision become independent of the frame it
    is made on, this fails, and reference mode can be split.)"""
    clip = create_clip(tmp_path / "two.mp4", photo=GROUP, seconds=2.0, width=640, height=360)
    spec = PipelineSpec.model_validate(
        {"processors": ["face_swapper"], "selector": {"mode": "reference"}}
    )
    whole, parts = whole_and_parts(face_engine, spec, decode_all(clip), cv2.imread(str(GROUP)))
    assert parts[: BORDERS[0][1]] == whole[: BORDERS[0][1]]  # the first part is the whole run
    assert parts != whole
