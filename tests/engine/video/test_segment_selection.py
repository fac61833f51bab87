"""Face selection across segment borders: a part of a video starts with fresh tracks; where
the decision cannot depend on when it is made, the parts map the faces a run of the whole
video maps by themselves (``worker/segments.same_mapping_in_parts``), and where it can, the
split hands each part the decisions of the people in view at its first frame
(``Pipeline.handovers``, ``engine/video/census.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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
from facegate.engine.video.swap import Handover, VideoSwap
from facegate.jobs.tables import Job
from facegate.worker.segments import same_mapping_in_parts

pytestmark = pytest.mark.slow

GROUP = FACES / "group_2_women_laughing_angled.jpg"
BORDERS = [(0, 24), (24, 48), (48, 60)]


def selections(
    face_engine: EngineRuntime,
    spec: PipelineSpec,
    frames: list[Frame],
    reference: Frame | None,
    handover: Sequence[Handover] = (),
) -> list[list[tuple[int, int]]]:
    """Per frame, the (source, face position) pairs the analysis stage selects, starting
    with fresh tracks as a part does (positions: the faces' left-to-right order)."""
    pipeline = face_engine.pipeline(spec)
    ctx = pipeline.prepare([cv2.imread(str(SOURCE))], reference=reference)
    work = VideoSwap(pipeline, ctx, TrackerOptions(fps=30.0), handover=handover)
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
    face_engine: EngineRuntime,
    spec: PipelineSpec,
    frames: list[Frame],
    reference: Frame | None,
    handovers: dict[int, list[Handover]] | None = None,
) -> tuple[list[Any], list[Any]]:
    whole = selections(face_engine, spec, frames, reference)
    parts: list[Any] = []
    for first, end in BORDERS:
        handover = (handovers or {}).get(first, [])
        parts += selections(face_engine, spec, frames[first:end], reference, handover)
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


def test_two_people_in_mode_one_or_reference_need_a_handover(
    tmp_path: Path, face_engine: EngineRuntime
) -> None:
    clip = create_clip(tmp_path / "two.mp4", photo=GROUP, seconds=1.0, width=640, height=360)
    for mode in ("one", "reference"):
        spec = PipelineSpec.model_validate(
            {"processors": ["face_swapper"], "selector": {"mode": mode}}
        )
        assert not same_mapping_in_parts(spec, video_job(spec), face_engine, clip), mode


@pytest.fixture(scope="module")
def two_people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two")
    return create_clip(folder / "two.mp4", photo=GROUP, seconds=2.0, width=640, height=360)


REFERENCE = PipelineSpec.model_validate(
    {"processors": ["face_swapper"], "selector": {"mode": "reference"}}
)


def test_a_reference_decision_made_afresh_at_a_border_can_fall_the_other_way(
    face_engine: EngineRuntime, two_people: Path
) -> None:
    """Why parts need a handover: on this clip of two similar people, a part's fresh tracks
    at its first frame match the reference differently from the whole run's, whose tracks
    were decided at frame 0."""
    frames = decode_all(two_people)
    whole, parts = whole_and_parts(face_engine, REFERENCE, frames, cv2.imread(str(GROUP)))
    assert parts[: BORDERS[0][1]] == whole[: BORDERS[0][1]]  # the first part is the whole run
    assert parts != whole


def test_with_the_census_handover_reference_parts_map_as_the_whole_run(
    face_engine: EngineRuntime, two_people: Path
) -> None:
    """The same clip and borders: the split looks over the video once and each part's
    first-frame people keep the decisions they got at frame 0; every frame of the parts
    then selects what the whole run selects."""
    reference = cv2.imread(str(GROUP))
    handovers = face_engine.pipeline(REFERENCE).handovers(
        [cv2.imread(str(SOURCE))],
        two_people,
        [first for first, _ in BORDERS[1:]],
        30.0,
        reference=reference,
    )
    assert sorted(handovers) == [24, 48]
    assert all(len(people) == 2 for people in handovers.values())  # both women, each border
    frames = decode_all(two_people)
    whole, parts = whole_and_parts(face_engine, REFERENCE, frames, reference, handovers)
    assert any(whole)
    assert parts == whole
