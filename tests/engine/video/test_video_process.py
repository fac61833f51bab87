"""process_video end to end on clips made here: timing, audio, metadata, cancel, progress."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from videoclips import audio_seconds, create_clip, decode_all, video_timestamps

from facegate.engine.errors import Cancelled, CorruptMedia, InvalidOptions
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, VideoProgress, probe_video, process_video


def mark(frame: Frame) -> Frame:
    frame[:8, :8] = (0, 0, 255)
    return frame


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_output_keeps_frames_fps_duration_and_audio(tmp_path: Path, suffix: str) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=2.0)
    dst = tmp_path / f"out{suffix}"
    result = process_video(src, dst, mark)
    source, output = probe_video(src), probe_video(dst)
    assert abs(output.frames - source.frames) <= 1
    assert result.frames == source.frames
    assert output.fps == source.fps
    assert output.duration == pytest.approx(source.duration, abs=1 / 30)
    assert output.has_audio
    assert audio_seconds(dst) == pytest.approx(audio_seconds(src), abs=0.05)
    assert output.codec == ("vp9" if suffix == ".webm" else "h264")
    first = decode_all(dst)[0]
    assert first[:6, :6, 2].mean() > 200  # the frame function's mark is in the output


def test_variable_frame_rate_timestamps_pass_through(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mkv", seconds=1.0, vfr=True)
    dst = tmp_path / "out.mp4"
    process_video(src, dst, mark)
    assert video_timestamps(dst) == pytest.approx(video_timestamps(src), abs=1e-3)


def test_rotation_and_full_range_are_kept_and_frames_are_upright(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=0.5, rotation=90, full_range=True)
    shapes: list[tuple[int, ...]] = []

    def record(frame: Frame) -> Frame:
        shapes.append(frame.shape)
        return frame

    dst = tmp_path / "out.mp4"
    process_video(src, dst, record)
    assert set(shapes) == {(360, 640, 3)}  # upright: displayed 640 wide
    info = probe_video(dst)
    assert (info.rotation, info.color_range, info.width, info.height) == (90, 2, 360, 640)


def test_untouched_frames_survive_the_colour_round_trip(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=0.5, audio=False)
    dst = tmp_path / "out.mkv"
    process_video(src, dst, lambda frame: frame, VideoOptions(crf=12))
    before, after = decode_all(src), decode_all(dst)
    assert len(before) == len(after)
    assert np.abs(before[5].astype(int) - after[5]).mean() < 2.0


def test_trim_and_resolution_cap(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=2.0, width=960, height=540)
    dst = tmp_path / "out.mp4"
    result = process_video(src, dst, mark, VideoOptions(start=0.5, end=1.5, max_side=641))
    info = probe_video(dst)
    assert abs(info.frames - 30) <= 1
    assert (info.width, info.height) == (640, 360)  # even, within the cap
    assert (result.width, result.height) == (640, 360)
    assert audio_seconds(dst) == pytest.approx(1.0, abs=0.1)
    assert video_timestamps(dst)[0] == pytest.approx(0.0, abs=1e-3)


def test_progress_reports_frames_fps_and_eta(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=1.0, audio=False)
    reports: list[VideoProgress] = []
    process_video(src, tmp_path / "out.mp4", mark, on_progress=reports.append)
    assert reports[-1].frames_done == reports[-1].frames_total == 30
    assert reports[-1].fraction == 1.0
    assert all(r.fps > 0 for r in reports)
    assert [r.frames_done for r in reports] == sorted(r.frames_done for r in reports)


def test_cancel_stops_within_a_second_and_leaves_nothing(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=4.0, audio=False)
    dst = tmp_path / "out.mp4"
    cancel = threading.Event()
    started = threading.Event()

    def slow(frame: Frame) -> Frame:
        started.set()
        time.sleep(0.2)  # a heavy frame function
        return frame

    cancelled_at: list[float] = []

    def fire() -> None:
        started.wait(10)
        time.sleep(0.3)
        cancelled_at.append(time.monotonic())
        cancel.set()

    threading.Thread(target=fire).start()
    with pytest.raises(Cancelled):
        process_video(src, dst, slow, VideoOptions(workers=2), cancel=cancel)
    assert time.monotonic() - cancelled_at[0] < 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]  # no partial output


def test_failure_in_the_frame_function_leaves_nothing(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=1.0, audio=False)

    def broken(frame: Frame) -> Frame:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        process_video(src, tmp_path / "out.mp4", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]


def test_bad_inputs_are_refused_before_work(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x00" * 200)
    with pytest.raises(CorruptMedia):
        process_video(junk, tmp_path / "out.mp4", mark)
    src = create_clip(tmp_path / "in.mp4", seconds=0.2, audio=False)
    with pytest.raises(InvalidOptions):
        process_video(src, tmp_path / "out.gif", mark)


def test_render_pool_keeps_frame_order(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=1.0, audio=False)
    seen: list[float] = []

    def stamp(frame: Frame) -> Frame:
        time.sleep(0.001 * (len(seen) % 3))  # finish out of order
        seen.append(0)
        return frame

    dst = tmp_path / "out.mp4"
    process_video(src, dst, stamp, VideoOptions(workers=3))
    stamps = video_timestamps(dst)
    assert stamps == sorted(stamps)
    assert len(stamps) == 30
