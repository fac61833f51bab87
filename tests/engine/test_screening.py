"""Video moderation that cannot be timed around (issue 26): a flagged run of half a second (or
of 15 frames) is refused wherever it is placed, in input videos (decoded from the file) and
in output videos (checked as the pipeline renders them), at a constant and at a variable
frame rate; and the sampler's guarantee itself, on random timelines.

Where a clip has few possible placements (a steady 3 s clip, the 4 s output timelines) every
one is tried; uneven input timelines are drawn at random (seeded), VFR_PLACEMENTS each. Each
video gets its own random phase; that the guarantee holds at every phase is what
``test_no_unchecked_run_reaches_the_gap`` proves, on 2000 timelines, without video.

The classifier is the stand-in of tests/moderationkit.py (the marker colour scores ~1, grey
~0), installed in a model store like an operator's model."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from tests.moderationkit import MARKER_BGR, install_standin, steady_times, write_marker_clip

from facegate.engine.errors import ContentPolicyViolation
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.screening import FrameSampler, gap_frames
from facegate.engine.types import Frame
from facegate.engine.video import FrameStages, VideoOptions, process_video
from facegate.worker.moderation import JOB_MODERATION, JobModeration

pytestmark = pytest.mark.timeout(600)
VFR_PLACEMENTS = 60
GAP = Fraction(1, 2)  # JOB_MODERATION's video_gap_seconds
RUN_FRAMES = 15  # half a second at 30 fps


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> ModelHub:
    models = tmp_path_factory.mktemp("screening") / "models"
    install_standin(models)
    return ModelHub(ModelStore(models))


def moderation(hub: ModelHub) -> JobModeration:
    return JobModeration("screened", True, hub, JOB_MODERATION)


def input_refused(hub: ModelHub, clip: Path) -> bool:
    try:
        moderation(hub).check_input_video("target video", clip)
    except ContentPolicyViolation as refused:
        what = refused.what
    else:
        return False
    assert what == "target video"
    return True


def vfr_times(rng: random.Random, seconds: float) -> list[Fraction]:
    """A variable frame rate: each frame shown 1/120 s to 1/4 s."""
    times, now = [], Fraction(0)
    while now < seconds:
        times.append(now)
        now += Fraction(rng.choice([1, 2, 3, 5, 8, 13, 30]), 120)
    return times


def run_of(times: list[Fraction], start: int, seconds: Fraction) -> set[int]:
    """Frames from ``start`` until they have been shown ``seconds`` (the next frame's time)."""
    end = start
    while end + 1 < len(times) and times[end + 1] - times[start] < seconds:
        end += 1
    assert end + 1 < len(times), "the run must end before the clip does"
    return set(range(start, end + 1))


def test_the_issues_clip_is_refused(hub: ModelHub, tmp_path: Path) -> None:
    """3 s at 30 fps, frames 0, 30 and 60 clean, the other 87 flagged: the old fixed
    positions (the first frame, then one a second) saw only the clean ones."""
    clip = tmp_path / "issue.mp4"
    write_marker_clip(clip, steady_times(90), set(range(90)) - {0, 30, 60})
    assert input_refused(hub, clip)
    clean = tmp_path / "clean.mp4"
    write_marker_clip(clean, steady_times(90), set())
    assert not input_refused(hub, clean)


def test_a_half_second_run_is_refused_wherever_it_is_on_input(
    hub: ModelHub, tmp_path: Path
) -> None:
    """Every placement of 15 flagged frames in a steady 3 s clip (76 starts)."""
    missed = []
    starts = range(90 - RUN_FRAMES + 1)
    for start in starts:
        clip = tmp_path / f"cfr-{start}.mp4"
        write_marker_clip(clip, steady_times(90), set(range(start, start + RUN_FRAMES)))
        if not input_refused(hub, clip):
            missed.append(start)
        clip.unlink()
    assert missed == [], f"{len(missed)} of {len(starts)} placements passed: starts {missed}"


@pytest.mark.parametrize("shape", ["half a second", "one long frame", "a packed burst"])
def test_variable_frame_rate_runs_are_refused_on_input(
    hub: ModelHub, tmp_path: Path, shape: str
) -> None:
    """Judged by frame as well as by time: half a second of uneven frames, one flagged
    frame shown for 0.6 s between clean ones, and 15 flagged frames packed into 15 ms."""
    rng = random.Random(f"vfr-{shape}")
    missed = 0
    for n in range(VFR_PLACEMENTS):
        times = vfr_times(rng, 4.0)
        start = rng.randrange(1, len(times) // 2)
        if shape == "half a second":
            flagged = run_of(times, start, GAP)
        else:
            base = times[start]
            if shape == "one long frame":
                inserted = [base + Fraction(k, 1000) for k in (0, 600)]
                flagged = {start}
            else:  # 15 frames 1 ms apart, then the next clean frame 1 ms later
                inserted = [base + Fraction(k, 1000) for k in range(RUN_FRAMES + 1)]
                flagged = set(range(start, start + RUN_FRAMES))
            shift = inserted[-1] - base
            times = times[:start] + inserted + [t + shift for t in times[start + 1 :]]
        clip = tmp_path / f"vfr-{n}.mp4"
        write_marker_clip(clip, times, flagged)
        missed += not input_refused(hub, clip)
        clip.unlink()
    assert missed == 0, f"{shape}: {missed} of {VFR_PLACEMENTS} placements passed"


def paint(flagged: set[int]) -> FrameStages:
    """A processor that puts the marker on the frames in ``flagged`` only (by index):
    content that exists in the output alone."""

    def analyse(frame: Frame, index: int) -> bool:
        return index in flagged

    def render(frame: Frame, marked: bool) -> Frame:
        if not marked:
            return frame
        out = frame.copy()
        out[:] = MARKER_BGR
        return out

    return FrameStages(render=render, analyse=analyse)


def output_refused(hub: ModelHub, src: Path, dst: Path, flagged: set[int]) -> bool:
    job = moderation(hub)
    inspector = job.output_inspector()
    assert inspector is not None
    stages = paint(flagged)
    stages = FrameStages(render=stages.render, analyse=stages.analyse, inspect=inspector)
    dst.unlink(missing_ok=True)
    try:
        process_video(src, dst, stages)
    except ContentPolicyViolation as refused:
        what = refused.what
    else:
        assert job.checked == ["output"]
        return False
    assert what == "output"
    assert not dst.exists()  # nothing of a refused output is left
    return True


@pytest.mark.parametrize("rate", ["constant", "variable"])
def test_a_half_second_run_is_refused_wherever_it_is_on_output(
    hub: ModelHub, tmp_path: Path, rate: str
) -> None:
    rng = random.Random(f"output-{rate}")
    times = steady_times(90) if rate == "constant" else vfr_times(rng, 4.0)
    src = tmp_path / "clean.mp4"
    write_marker_clip(src, times, set())
    assert not output_refused(hub, src, tmp_path / "out.mp4", set())
    assert not input_refused(hub, src)
    missed = []
    starts = range(len(times) - 40)  # every one: 50 steady, 24 on the uneven timeline
    for start in starts:
        flagged = set(range(start, start + RUN_FRAMES)) if rate == "constant" else set()
        flagged = flagged or run_of(times, start, GAP)
        if not output_refused(hub, src, tmp_path / "out.mp4", flagged):
            missed.append(start)
    assert missed == [], f"{len(missed)} of {len(starts)} placements passed: starts {missed}"


def unchecked_runs(times: list[Fraction], checked: list[bool]) -> list[tuple[Fraction, int]]:
    """(shown seconds, frames) of each maximal run of unchecked frames (the last frame's
    display time taken as 0)."""
    runs, start = [], None
    for index, is_checked in enumerate([*checked, True]):
        if not is_checked and start is None:
            start = index
        elif is_checked and start is not None:
            end_time = times[index] if index < len(times) else times[-1]
            runs.append((end_time - times[start], index - start))
            start = None
    return runs


def test_no_unchecked_run_reaches_the_gap(tmp_path: Path) -> None:
    """On random timelines (steady, uneven, bursts, long frames, a clock going backwards):
    every unchecked run is under half a second and under 15 frames; the phase varies."""
    rng = random.Random(7)
    firsts = set()
    for seed in range(2000):
        times = [Fraction(0)]
        for _ in range(rng.randrange(1, 400)):
            step = rng.choice([Fraction(1, 30), Fraction(1, 1000), Fraction(7, 10), Fraction(0)])
            times.append(times[-1] + step * rng.choice([1, 1, 1, -1]))
        sampler = FrameSampler(float(GAP), gap_frames(float(GAP)), random.Random(seed))
        first = sampler.offer(times[0])
        assert first is False  # decided when the next frame arrives
        checked = [sampler.offer(t) for t in times[1:]] + [sampler.end()]
        for shown, frames in unchecked_runs(times, checked):
            assert shown < GAP, (seed, shown, frames)
            assert frames < RUN_FRAMES, (seed, shown, frames)
        assert checked[-1]
        firsts.add(checked.index(True))
    assert len(firsts) > 5  # the first checked frame is not at a fixed position


def test_cost_at_a_steady_rate() -> None:
    """About two checked frames a second at 30 fps (and four at 60, where 15 frames are a
    quarter of a second)."""
    for fps, expected in ((30, 2.0), (60, 4.0), (24, 2.0)):
        times = steady_times(fps * 60, fps)
        sampler = FrameSampler(float(GAP), gap_frames(float(GAP)), random.Random(1))
        sampler.offer(times[0])
        picked = sum(sampler.offer(t) for t in times[1:]) + sampler.end()
        assert picked / 60 == pytest.approx(expected, rel=0.05), fps


def test_clean_frames_score_low(hub: ModelHub) -> None:
    from facegate.engine.moderation import Moderator

    grey = np.full((48, 64, 3), 128, np.uint8)
    marker = np.full((48, 64, 3), MARKER_BGR, np.uint8)
    low, high = Moderator(hub).scores([grey, marker])
    assert low < 0.01 < 0.99 < high


def input_refused_as_decoded(hub: ModelHub, clip: Path, borders: list[int]) -> bool:
    """The service's way: each run (the whole clip, or each part between ``borders``, as a
    segmented job cuts it) checks its own input frames as it decodes them."""
    dst = clip.with_name("out.mp4")
    for first, end in itertools.pairwise([0, *borders, 90]):
        job = moderation(hub)
        inspector = job.input_inspector("target video")
        assert inspector is not None
        options = VideoOptions(start=first / 30, end=end / 30 if end < 90 else None)
        stages = FrameStages(render=lambda frame, _: frame, inspect_input=inspector)
        dst.unlink(missing_ok=True)
        what = None
        try:
            process_video(clip, dst, stages, options)
        except ContentPolicyViolation as refused:
            what = refused.what
        if what is not None:
            assert what == "target video"
            assert not dst.exists()  # nothing of a refused run is left
            return True
        assert job.checked == ["target video"]
    return False


@pytest.mark.parametrize("borders", [[], [45]], ids=["whole", "two parts"])
def test_a_run_is_refused_across_a_part_border_as_the_parts_decode_it(
    hub: ModelHub, tmp_path: Path, borders: list[int]
) -> None:
    """Every placement of a 15-frame run that touches frames 25-64 (all that straddle the
    border at 45, and those beside it): refused by the run that decodes it, whole or in two
    parts each with its own random phase (each part checks its last frame, so no unchecked
    stretch spans the border)."""
    missed = []
    clean = tmp_path / "clean.mp4"
    write_marker_clip(clean, steady_times(90), set())
    assert not input_refused_as_decoded(hub, clean, borders)
    for start in range(25, 51):
        clip = tmp_path / f"run-{start}.mp4"
        write_marker_clip(clip, steady_times(90), set(range(start, start + RUN_FRAMES)))
        if not input_refused_as_decoded(hub, clip, borders):
            missed.append(start)
        clip.unlink()
    assert missed == [], f"{len(missed)} placements passed: starts {missed}"
