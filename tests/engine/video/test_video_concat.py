"""concat_parts: parts rendered from trimmed ranges join into the file a whole run writes."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pytest
from videoclips import create_clip

from facegate.engine.errors import CorruptMedia
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, process_video
from facegate.engine.video.concat import Part, concat_parts


def keep(frame: Frame) -> Frame:
    return frame


def describe(path: Path) -> dict[str, Any]:
    """Frame times, video packet timestamps and the audio packets (bytes included)."""
    with av.open(str(path)) as container:
        times = [float(f.time) for f in container.decode(video=0)]
    with av.open(str(path)) as container:
        video = [(p.pts, p.dts) for p in container.demux(video=0) if p.size]
    with av.open(str(path)) as container:
        audio = [(p.pts, p.dts, bytes(p)) for p in container.demux(audio=0) if p.size]
    return {"times": times, "video": video, "audio": audio}


def render_parts(src: Path, folder: Path, bounds: list[int], suffix: str) -> list[Part]:
    parts = []
    for number, (first, end) in enumerate(itertools.pairwise(bounds)):
        path = folder / f"part-{number}{suffix}"
        process_video(src, path, keep, VideoOptions(start=first / 30, end=end / 30))
        parts.append(Part(path, Fraction(first, 30)))
    return parts


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_joined_parts_have_the_frames_timestamps_and_audio_of_a_whole_run(
    tmp_path: Path, suffix: str
) -> None:
    src = create_clip(tmp_path / f"in{suffix}", seconds=2.0, width=320, height=240)
    whole = tmp_path / f"whole{suffix}"
    process_video(src, whole, keep)
    parts = render_parts(src, tmp_path, [0, 24, 48, 60], suffix)
    joined = tmp_path / f"joined{suffix}"
    result = concat_parts(parts, src, joined)
    expected, got = describe(whole), describe(joined)
    assert len(got["times"]) == result.frames == 60
    assert got["times"] == expected["times"]
    # The same presentation times; the order of packets differs only where a part's first
    # frame became a keyframe (the encoder plans its B-frames around it).
    assert sorted(pts for pts, _ in got["video"]) == sorted(pts for pts, _ in expected["video"])
    dts = [dts for _, dts in got["video"]]
    assert dts == sorted(set(dts))
    assert dts[0] == expected["video"][0][1]
    assert got["audio"] == expected["audio"]  # copied packet for packet
    assert result.has_audio


def test_parts_encoded_differently_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    src = create_clip(tmp_path / "in.mp4", seconds=1.0, width=320, height=240)
    first = tmp_path / "a.mp4"
    process_video(src, first, keep, VideoOptions(end=0.5))
    second = tmp_path / "b.mp4"
    process_video(src, second, keep, VideoOptions(start=0.5, max_side=160))
    joined = tmp_path / "joined.mp4"
    with pytest.raises(CorruptMedia, match="part 2"):
        concat_parts([Part(first, Fraction(0)), Part(second, Fraction(1, 2))], src, joined)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4", "in.mp4"]
