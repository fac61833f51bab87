"""The quality report of a swapped face (``engine.report``)."""

from __future__ import annotations

import threading
from typing import Any

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.errors import NoFaceDetected
from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import FaceRecogniser
from facegate.engine.pipeline import PipelineSpec, on_two_threads
from facegate.engine.report import FaceReport, judge, measure_face, verdict
from facegate.engine.runtime import EngineRuntime
from facegate.engine.swap.mesh_warp import MeshWarpBackend
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.types import Face, FloatArray, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")

SOURCE = "woman_a_selfie_frontal_01.jpg"
FRONTAL = "woman_astronaut_frontal.jpg"
PROFILE = "man_profile_grayscale_occluded.png"  # yaw ~53°, grey, half hidden by a camera


@pytest.fixture(scope="module")
def recogniser() -> FaceRecogniser:
    return FaceRecogniser()


@pytest.fixture(scope="module")
def photos() -> dict[str, tuple[Frame, Face]]:
    analyser = FaceAnalyser()
    found = {}
    for name in (SOURCE, FRONTAL, PROFILE):
        frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
        scale = min(1.0, 640 / max(frame.shape[:2]))
        frame = np.asarray(
            cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        )
        faces = analyser.analyse(frame)
        assert len(faces) == 1, name
        found[name] = (frame, faces[0])
    return found


@pytest.mark.parametrize(
    ("d_source", "d_target", "expected"),
    [
        (0.40, 0.70, "transferred"),
        (0.55, 0.58, "transferred"),
        (0.65, 0.80, "weak"),  # nearer the source, not the source's person
        (0.50, 0.45, "weak"),  # under 0.6 from both, nearer the target
        (0.75, 0.30, "not transferred"),  # still the target
        (0.80, 0.70, "not transferred"),  # no one's
    ],
)
def test_the_verdict(d_source: float, d_target: float, expected: str) -> None:
    assert verdict(d_source, d_target) == expected


def swap_and_report(
    recogniser: FaceRecogniser, photos: dict[str, tuple[Frame, Face]], target: str
) -> dict[str, object]:
    backend, options = MeshWarpBackend(), FaceSwapperOptions()
    source_frame, source_face = photos[SOURCE]
    state = backend.prepare_source([source_face], [source_frame], options)
    frame, face = photos[target]
    result = backend.swap_face(frame.copy(), state, face, options)
    embedding = recogniser.describe(source_frame, source_face)
    return judge(measure_face(recogniser, frame, result, face), embedding).as_dict()


def test_a_frontal_target_is_transferred(
    recogniser: FaceRecogniser, photos: dict[str, tuple[Frame, Face]]
) -> None:
    report = swap_and_report(recogniser, photos, FRONTAL)
    assert report["verdict"] == "transferred", report
    assert isinstance(report["tone"], float)
    assert report["tone"] < 8.0
    assert abs(float(str(report["yaw"]))) < 20.0


def test_a_report_searches_for_the_face_once_and_reads_both_faces_as_apart(
    recogniser: FaceRecogniser, photos: dict[str, tuple[Frame, Face]]
) -> None:
    """The result's and the target's chips share one box search (most of a chip's cost):
    the target's descriptor stays within 0.03 of the one from its own search."""
    backend, options = MeshWarpBackend(), FaceSwapperOptions()
    source_frame, source_face = photos[SOURCE]
    state = backend.prepare_source([source_face], [source_frame], options)
    frame, face = photos[FRONTAL]
    result = backend.swap_face(frame.copy(), state, face, options)
    searches = 0
    detectors = list(recogniser._detectors)

    def counted(image: Frame, upsample: int) -> object:
        nonlocal searches
        searches += 1
        return detectors[0](image, upsample)

    recogniser._detectors[:] = [counted]
    try:
        swapped, original = recogniser.descriptors(recogniser.chips_at([result, frame], face))
        assert searches == 1
        own = recogniser.describe(frame, face)
        assert searches == 2
    finally:
        recogniser._detectors[:] = detectors
    assert float(np.linalg.norm(original - own)) < 0.03
    assert float(np.linalg.norm(swapped - recogniser.describe(result, face))) < 1e-5


def test_a_profile_target_is_not_transferred(
    recogniser: FaceRecogniser, photos: dict[str, tuple[Frame, Face]]
) -> None:
    report = swap_and_report(recogniser, photos, PROFILE)
    assert report["verdict"] == "not transferred", report
    assert abs(float(str(report["yaw"]))) > 35.0


def test_an_image_run_with_reports_swaps_a_copy_and_leaves_the_target_as_it_came(
    face_engine: EngineRuntime, photos: dict[str, tuple[Frame, Face]]
) -> None:
    """``run_image`` with reports hands the processors its one copy of the target (they
    paste into it) and compares the result with the target as it came: the caller's frame
    is untouched and the result is the run without reports' to the byte."""
    pipeline = face_engine.pipeline(PipelineSpec())
    source, target = photos[SOURCE][0], photos[FRONTAL][0].copy()
    given = target.copy()
    reports: list[FaceReport] = []
    result = pipeline.run_image([source], target, reports=reports)
    assert np.array_equal(target, given)
    assert [report.verdict for report in reports] == ["transferred"]
    assert result.tobytes() == pipeline.run_image([source], target).tobytes()


class Refused(Exception):
    pass


def test_work_beside_the_reports_reads_the_result_on_its_own_thread_and_fails_after_them(
    face_engine: EngineRuntime, photos: dict[str, tuple[Frame, Face]]
) -> None:
    """``beside_reports`` (a job's output moderation) runs on a thread of its own while the
    reports are made, on the result as returned; what it raises comes once the reports are
    done; without reports to make it runs on the caller's thread."""
    pipeline = face_engine.pipeline(PipelineSpec())
    source, target = photos[SOURCE][0], photos[FRONTAL][0]
    seen: list[tuple[str, Frame]] = []

    def read(result: Frame) -> None:
        seen.append((threading.current_thread().name, result.copy()))

    reports: list[FaceReport] = []
    result = pipeline.run_image([source], target, reports=reports, beside_reports=read)
    ((thread, frame),) = seen
    assert thread != threading.current_thread().name
    assert np.array_equal(frame, result)
    assert len(reports) == 1

    def refuse(_result: Frame) -> None:
        raise Refused

    reports = []
    with pytest.raises(Refused):
        pipeline.run_image([source], target, reports=reports, beside_reports=refuse)
    assert len(reports) == 1  # the reports were made before the refusal came

    seen.clear()
    pipeline.run_image([source], target, beside_reports=read)  # no reports wanted
    assert [name for name, _ in seen] == [threading.current_thread().name]


def test_two_threads_keep_the_order_and_hand_back_the_first_failure() -> None:
    threads: set[str] = set()

    def square(value: int) -> int:
        threads.add(threading.current_thread().name)
        return value * value

    assert on_two_threads(square, list(range(7)), "squares") == [v * v for v in range(7)]
    assert len(threads) == 2  # the caller's and one more
    assert "squares" in threads
    assert on_two_threads(square, [3], "squares") == [9]

    def fail_on_odd(value: int) -> int:
        if value % 2:
            raise Refused(value)
        return value

    with pytest.raises(Refused):
        on_two_threads(fail_on_odd, list(range(4)), "squares")


def test_a_group_photos_reports_are_each_faces_own_in_order(
    face_engine: EngineRuntime, photos: dict[str, tuple[Frame, Face]]
) -> None:
    """The faces' reports, made on two threads, are the ones made one by one."""
    pipeline = face_engine.pipeline(PipelineSpec.model_validate({"selector": {"mode": "many"}}))
    group = cv2.imread(str(FACES / "group_3_men_expressions_glasses.jpg"), cv2.IMREAD_COLOR)
    source = photos[SOURCE][0]
    reports: list[FaceReport] = []
    result = pipeline.run_image([source], group, reports=reports)
    assert len(reports) >= 2
    assert [report.face for report in reports] == list(range(len(reports)))
    recogniser = pipeline.identity.recogniser
    embedding = recogniser.describe(*photos[SOURCE])
    faces = {tuple(round(v) for v in report.box): report for report in reports}
    compared = 0
    for face in pipeline.analyser.analyse(group):
        key = tuple(round(float(v)) for v in face.box[:4])
        if key in faces:
            alone = judge(measure_face(recogniser, group, result, face, faces[key].face), embedding)
            assert alone == faces[key]
            compared += 1
    assert compared == len(reports)


def test_an_image_run_analyses_the_target_and_describes_the_source_beside_the_other_work(
    face_engine: EngineRuntime,
    photos: dict[str, tuple[Frame, Face]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``run_image`` analyses the target on the analyser's aside threads while the sources
    are prepared, and describes the source for the report on a thread of its own while the
    face is swapped: the reports are those made afterwards, one step after the other; a
    source without a face is still the error, whatever the target's analysis found."""
    pipeline = face_engine.pipeline(PipelineSpec())
    source, target = photos[SOURCE][0], photos[FRONTAL][0]
    recogniser = pipeline.identity.recogniser
    analysed: dict[int, str] = {}
    described: list[str] = []
    analyse, describe = pipeline.analyser.analyse, recogniser.describe

    target_begun = threading.Event()
    prepare = pipeline.prepare

    def analyse_where(frame: Frame, *args: object, **kwargs: object) -> list[Face]:
        analysed[id(frame)] = threading.current_thread().name
        if frame is target:
            target_begun.set()
        return analyse(frame, *args, **kwargs)  # type: ignore[arg-type]

    def prepare_once_the_target_is_begun(*args: Any, **kwargs: Any) -> Any:
        # (so the test does not depend on when the aside thread gets the CPU: a target
        # whose analysis has not begun by the end of prepare is analysed on the caller)
        assert target_begun.wait(10)
        return prepare(*args, **kwargs)

    def describe_where(frame: Frame, face: Face) -> FloatArray:
        described.append(threading.current_thread().name)
        return describe(frame, face)

    monkeypatch.setattr(pipeline.analyser, "analyse", analyse_where)
    monkeypatch.setattr(recogniser, "describe", describe_where)
    monkeypatch.setattr(pipeline, "prepare", prepare_once_the_target_is_begun)
    reports: list[FaceReport] = []
    result = pipeline.run_image([source], target, reports=reports)
    here = threading.current_thread().name
    assert analysed[id(source)] == here
    assert analysed[id(target)].startswith("tracker-detect")
    assert described == ["source-descriptors"]
    ctx = pipeline.prepare([source])
    ctx.selected = pipeline.select(target, ctx, analyse(target))
    assert reports == pipeline.face_reports(ctx, target, result)

    no_face = cv2.imread(str(FACES / "no_face_landscape_mountains.jpg"), cv2.IMREAD_COLOR)
    with pytest.raises(NoFaceDetected, match="source image 1 has no face"):
        pipeline.run_image([no_face], target, reports=[])
