"""The source cache: a source image named by a key is analysed once, however many pipelines
(a batch's items) use it, also when they ask at the same moment; each gets its own copy of
the faces, so one job's annotations never reach another's; the result is the same image as
without the cache; the least recently used keys go first."""

from __future__ import annotations

import threading
import time
from typing import Any

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.sourcecache import SourceFaceCache
from facegate.engine.types import Face, Frame

pytestmark = pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}")


class CountingAnalyser(FaceAnalyser):
    """The real analyser, counting the frames it analyses by their shape."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, ...]] = []

    def analyse(self, frame: Frame) -> list[Face]:
        self.calls.append(frame.shape)
        return super().analyse(frame)


def photo(name: str, width: int) -> Frame:
    frame = cv2.imread(str(FACES / name))
    height = round(frame.shape[0] * width / frame.shape[1])
    return np.ascontiguousarray(cv2.resize(frame, (width, height)))


def face(x: float) -> Face:
    return Face(
        box=np.array([x, 0.0, x + 10, 10]),
        score=0.9,
        keypoints5=np.zeros((5, 2)),
        landmarks=np.zeros((478, 3)),
    )


def test_a_keyed_source_is_analysed_once_with_the_same_result(face_engine: EngineRuntime) -> None:
    analyser = CountingAnalyser()
    cache = SourceFaceCache()
    spec = PipelineSpec(processors=["face_swapper"])
    cached = Pipeline(
        spec,
        analyser=analyser,
        registry=face_engine.registry,
        identity=face_engine.identity,
        source_cache=cache,
    )
    plain = Pipeline(
        spec, analyser=analyser, registry=face_engine.registry, identity=face_engine.identity
    )
    source = photo("woman_a_selfie_frontal_01.jpg", 300)
    targets = [
        photo(name, 320) for name in ("man_frontal_glasses.jpg", "woman_astronaut_frontal.jpg")
    ]
    key = ("studio", "sha256-of-the-source")

    for target in [*targets, *targets]:
        with_cache = cached.run_image([source], target, source_keys=[key])
        without = plain.run_image([source], target)
        assert np.array_equal(with_cache, without)
    source_calls = [shape for shape in analyser.calls if shape == source.shape]
    # Four runs without the cache, one with it for four runs.
    assert len(source_calls) == 4 + 1
    assert (cache.misses, cache.hits) == (1, 3)

    # Another key (another tenant, or other bytes) is analysed anew.
    cached.run_image([source], targets[0], source_keys=[("rival", "sha256-of-the-source")])
    assert cache.misses == 2


def test_each_pipeline_gets_its_own_copy_of_the_faces(face_engine: EngineRuntime) -> None:
    analyser = CountingAnalyser()
    cache = SourceFaceCache()
    pipeline = Pipeline(
        PipelineSpec(processors=["face_debugger"]),
        analyser=analyser,
        registry=face_engine.registry,
        identity=face_engine.identity,
        source_cache=cache,
    )
    a = photo("woman_a_selfie_frontal_01.jpg", 300)
    b = photo("man_frontal_glasses.jpg", 280)
    first = pipeline.prepare([a, b], source_keys=["a", "b"])
    second = pipeline.prepare([b, a], source_keys=["b", "a"])  # the other order
    assert len(analyser.calls) == 2
    # Each job's annotation of which source image a face came from is its own.
    assert [f.extra["source_frame"] for f in first.source_faces] == [0, 1]
    assert [f.extra["source_frame"] for f in second.source_faces] == [0, 1]
    assert np.array_equal(first.source_faces[0].landmarks, second.source_faces[1].landmarks)
    assert first.source_faces[0].landmarks is not second.source_faces[1].landmarks
    first.source_faces[0].landmarks[:] = 0  # a job changing its faces changes no one else's
    third = pipeline.prepare([a], source_keys=["a"])
    assert third.source_faces[0].landmarks.any()
    with pytest.raises(ValueError, match="each source"):
        pipeline.prepare([a, b], source_keys=["a"])


def test_concurrent_requests_for_one_key_analyse_once() -> None:
    cache = SourceFaceCache()
    calls: list[int] = []
    started = threading.Barrier(6)

    def analyse() -> list[Face]:
        calls.append(1)
        time.sleep(0.2)  # the others arrive while this runs
        return [face(1.0)]

    results: list[Any] = []

    def worker() -> None:
        started.wait()
        results.append(cache.faces("one", analyse))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1
    assert len(results) == 6
    assert len({id(result[0]) for result in results}) == 6  # six copies
    assert all(float(result[0].box[0]) == 1.0 for result in results)


def test_a_failed_analysis_is_not_kept_and_the_oldest_keys_go_first() -> None:
    cache = SourceFaceCache(max_entries=2)

    def fail() -> list[Face]:
        raise RuntimeError("decoder gone")

    with pytest.raises(RuntimeError):
        cache.faces("k", fail)
    assert cache.faces("k", lambda: [face(2.0)])[0].box[0] == 2.0
    cache.faces("l", lambda: [face(3.0)])
    cache.faces("k", lambda: [face(9.0)])  # a hit: k is now the most recent
    cache.faces("m", lambda: [face(4.0)])  # l, the least recent, goes
    assert len(cache) == 2
    assert cache.faces("k", lambda: [face(9.0)])[0].box[0] == 2.0
    assert cache.faces("l", lambda: [face(5.0)])[0].box[0] == 5.0


def test_forget_drops_only_the_keys_it_is_asked_to() -> None:
    cache = SourceFaceCache()
    for tenant, value in (("acme", 1.0), ("acme", 2.0), ("other", 3.0)):
        cache.faces((tenant, str(value)), lambda value=value: [face(value)])  # type: ignore[misc]
    assert cache.forget(lambda key: isinstance(key, tuple) and key[0] == "acme") == 2
    assert len(cache) == 1
    assert cache.faces(("other", "3.0"), lambda: [face(9.0)])[0].box[0] == 3.0
    assert cache.faces(("acme", "1.0"), lambda: [face(7.0)])[0].box[0] == 7.0


def test_a_keyed_sources_descriptor_for_the_quality_report_is_made_once(
    face_engine: EngineRuntime,
) -> None:
    """The quality report's descriptor of a source face (a ResNet pass, ~125 ms) is kept
    with the source's analysis: two jobs with one source describe it once, and report the
    same distances as a pipeline without the cache."""
    cache = SourceFaceCache()
    spec = PipelineSpec(processors=["face_swapper"])
    cached = Pipeline(
        spec,
        analyser=face_engine.analyser,
        registry=face_engine.registry,
        identity=face_engine.identity,
        source_cache=cache,
    )
    plain = Pipeline(
        spec,
        analyser=face_engine.analyser,
        registry=face_engine.registry,
        identity=face_engine.identity,
    )
    source = photo("woman_a_selfie_frontal_01.jpg", 300)
    target = photo("man_frontal_glasses.jpg", 320)
    key = ("studio", "sha256-of-the-source")
    reports: list[Any] = []
    for _ in range(2):
        cached.run_image([source], target, source_keys=[key], reports=reports)
    assert (cache.descriptors.misses, cache.descriptors.hits) == (1, 1)
    alone: list[Any] = []
    plain.run_image([source], target, reports=alone)
    assert [r.d_source for r in reports] == [alone[0].d_source] * 2
