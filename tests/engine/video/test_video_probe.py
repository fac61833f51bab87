"""probe_video: what a good file looks like, and a typed error for every bad one."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from videoclips import FACE, create_audio_only, create_clip

from facegate.engine.errors import CorruptMedia, MediaTooLarge, UnsupportedMedia
from facegate.engine.video import VideoLimits, is_video_file, probe_video


def test_probe_describes_a_clip(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "a.mp4", seconds=1.0)
    info = probe_video(clip)
    assert (info.width, info.height, info.frames, info.fps) == (640, 360, 30, 30)
    assert info.duration == pytest.approx(1.0, abs=0.05)
    assert info.has_audio
    assert info.codec == "h264"
    assert is_video_file(clip)


def test_probe_reads_rotation_and_full_range(tmp_path: Path) -> None:
    info = probe_video(create_clip(tmp_path / "r.mp4", seconds=0.5, rotation=90, full_range=True))
    assert info.rotation == 90
    assert info.display_size == (640, 360)
    assert info.color_range == 2


def test_truncated_file_is_corrupt(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "a.mp4", seconds=1.0)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(clip.read_bytes()[: clip.stat().st_size // 2])
    with pytest.raises(CorruptMedia):
        probe_video(cut)


def test_truncated_matroska_is_corrupt_or_short(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "a.mkv", seconds=1.0, audio=False)
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(clip.read_bytes()[:400])
    with pytest.raises(CorruptMedia):
        probe_video(cut)


def test_garbage_is_unsupported(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"this is not a video at all " * 100)
    assert not is_video_file(junk)
    with pytest.raises(UnsupportedMedia):
        probe_video(junk)


def test_damaged_mp4_header_is_corrupt(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(struct.pack(">I", 24) + b"ftypisom" + b"\x00" * 12 + b"\xff" * 500)
    with pytest.raises(CorruptMedia):
        probe_video(bad)


def test_audio_only_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedMedia, match="audio-only"):
        probe_video(create_audio_only(tmp_path / "tone.m4a"))


def test_still_image_is_not_a_video(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedMedia):
        probe_video(FACE)


def test_zero_frames_is_corrupt(tmp_path: Path) -> None:
    import av

    clip = create_clip(tmp_path / "a.mp4", seconds=0.5)
    empty = tmp_path / "empty.mp4"
    # Same streams, video packets dropped: a video track that declares itself and holds nothing.
    with av.open(str(clip)) as src, av.open(str(empty), "w") as out:
        out.add_stream_from_template(src.streams.video[0])
        audio = out.add_stream_from_template(src.streams.audio[0])
        for packet in src.demux(src.streams.audio[0]):
            if packet.dts is not None:
                packet.stream = audio
                out.mux(packet)
    # FFmpeg drops the empty track of an mp4, so this reads as audio-only; either way a
    # typed refusal, never a job that starts and fails.
    with pytest.raises((CorruptMedia, UnsupportedMedia)):
        probe_video(empty)


def test_absurd_dimensions_are_refused(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "a.mp4", seconds=0.2, audio=False)
    with pytest.raises(MediaTooLarge) as caught:
        probe_video(clip, VideoLimits(max_pixels=100 * 100))
    assert caught.value.limit_name == "max_pixels"


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (VideoLimits(max_bytes=1000), "max_bytes"),
        (VideoLimits(max_seconds=0.5), "max_seconds"),
        (VideoLimits(max_frames=10), "max_frames"),
    ],
)
def test_limits(tmp_path: Path, limits: VideoLimits, name: str) -> None:
    clip = create_clip(tmp_path / "a.mp4", seconds=1.0)
    with pytest.raises(MediaTooLarge) as caught:
        probe_video(clip, limits)
    assert caught.value.limit_name == name


def test_variable_frame_rate_is_accepted(tmp_path: Path) -> None:
    info = probe_video(create_clip(tmp_path / "v.mkv", seconds=1.0, vfr=True))
    assert info.frames == 30


def zero_sample_tables(data: bytes) -> bytes:
    """The issue's crafted MP4: the track's sample tables emptied in place (the entry counts
    of stts/stsc/stco/stss and the sample count of stsz set to zero)."""
    patched = bytearray(data)
    for box, count_at in ((b"stts", 8), (b"stsc", 8), (b"stco", 8), (b"stss", 8), (b"stsz", 12)):
        start = 0
        while (found := patched.find(box, start)) != -1:
            # after the type: version+flags (4 bytes), then the count field
            patched[found + 4 + count_at - 4 : found + 4 + count_at] = b"\x00" * 4
            start = found + 4
    return bytes(patched)


def test_a_track_with_zero_samples_is_corrupt(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "a.mp4", seconds=0.5, audio=False)
    crafted = tmp_path / "zero.mp4"
    crafted.write_bytes(zero_sample_tables(clip.read_bytes()))
    with pytest.raises((CorruptMedia, UnsupportedMedia)):
        probe_video(crafted)
