"""Which frames of a video get a quality report (``engine/video/quality.py``)."""

from __future__ import annotations

import itertools

from facegate.engine.report import FaceReport
from facegate.engine.video.quality import QualitySampler


def sampled(sampler: QualitySampler, with_faces: range | list[int]) -> list[int]:
    """The frames reported, the analysing thread asking for each frame with a swapped face."""
    return [index for index in with_faces if sampler.due(index)]


def test_one_frame_per_span_at_its_middle() -> None:
    assert sampled(QualitySampler(100, 4), range(100)) == [13, 38, 63, 88]
    assert sampled(QualitySampler(3, 4), range(3)) == [1, 2]  # at most one a frame
    assert sampled(QualitySampler(0, 4), range(5)) == [1, 2, 3, 4]  # length unknown


def test_a_span_without_faces_gives_none_and_the_next_starts_afresh() -> None:
    # Faces only from frame 40 on: the first span's middle passed; frame 40 is the second's.
    assert sampled(QualitySampler(100, 4), range(40, 100)) == [40, 63, 88]
    # Faces only in 10-20 and 90-99: the second and third spans give nothing.
    assert sampled(QualitySampler(100, 4), [*range(10, 20), *range(90, 100)]) == [13, 90]


def report(face: int) -> FaceReport:
    return FaceReport(face, (0.0, 0.0, 1.0, 1.0), 0.4, 0.8, 2.0, 1.0, 2.0, "transferred")


def test_reports_come_back_in_frame_order_with_their_frame() -> None:
    sampler = QualitySampler(100, 4)
    sampler.add(63, [report(0)])  # render threads finish out of order
    sampler.add(13, [report(1), report(0)])
    stored = sampler.as_json()
    assert [(r["frame"], r["face"]) for r in stored] == [(13, 0), (13, 1), (63, 0)]
    assert stored[0]["verdict"] == "transferred"
    assert stored[0]["d_source"] == 0.4


def test_the_parts_of_a_segmented_video_sample_the_whole_runs_frames() -> None:
    whole = sampled(QualitySampler(100, 4), range(100))
    for cuts in ([0, 30, 70, 100], [0, 13, 14, 100], [0, 38, 39, 63, 64, 100], [0, 50, 100]):
        frames: list[int] = []
        for first, end in itertools.pairwise(cuts):
            sampler = QualitySampler(end - first, 4, part_of=(first, 100))
            local = sampled(sampler, range(end - first))
            for index in local:
                sampler.add(index, [report(0)])
            frames += [r["frame"] for r in sampler.as_json()]
        assert frames == whole, cuts
