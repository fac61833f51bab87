"""Peak memory stays flat as the video grows: bounded queues, nothing accumulated per frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import pytest
from videoclips import audio_seconds, create_clip, video_timestamps

# Each run in a fresh interpreter so ru_maxrss is that run's own peak; set up as a facegate
# process is (its allocator keeps freed frame buffers for reuse: that must not grow either).
_RUN = """
import resource, sys, cv2
from pathlib import Path
from facegate.allocator import tune_allocator
from facegate.engine.video import process_video, VideoOptions
assert tune_allocator()
def work(frame):
    # a face-sized edit, like a swap: touches a region, returns the frame
    frame[200:460, 500:760] = cv2.GaussianBlur(frame[200:460, 500:760], (9, 9), 0)
    return frame
process_video(Path(sys.argv[1]), Path(sys.argv[2]), work, VideoOptions(preset="ultrafast"))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_kb(src: Path, dst: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(src), str(dst)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return int(done.stdout.strip().splitlines()[-1])


def looped(src: Path, dst: Path, times: int) -> Path:
    """``src`` played ``times`` times over, its packets copied (no re-encoding), each loop's
    timestamps after the last: a clip as long as that, made in the time it takes to copy it
    (synthesising 60 s of moving 720p frames costs minutes on a busy machine)."""
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        copies = {
            s.index: out.add_stream_from_template(s)
            for s in (*inp.streams.video, *inp.streams.audio)
        }
        first: dict[int, int] = {}
        end: dict[int, int] = {}
        for packet in inp.demux():
            if packet.pts is not None and packet.dts is not None:
                i = packet.stream.index
                first[i] = min(first.get(i, packet.dts), packet.dts)
                end[i] = max(end.get(i, 0), packet.pts + packet.duration)
        for loop in range(times):
            inp.seek(0)
            for packet in inp.demux():
                if packet.dts is None or packet.stream.index not in copies:
                    continue
                shift = loop * (end[packet.stream.index] - first[packet.stream.index])
                packet.pts, packet.dts = packet.pts + shift, packet.dts + shift
                packet.stream = copies[packet.stream.index]
                out.mux(packet)
    return dst


@pytest.mark.slow
def test_sixty_seconds_need_no_more_memory_than_ten(tmp_path: Path) -> None:
    short = create_clip(tmp_path / "10s.mp4", seconds=10, width=1280, height=720)
    long = looped(short, tmp_path / "60s.mp4", 6)
    assert len(video_timestamps(long)) == 6 * len(video_timestamps(short)) == 300 * 6
    assert audio_seconds(long) == pytest.approx(60, abs=0.2)
    short_peak = peak_rss_kb(short, tmp_path / "o10.mp4")
    long_peak = peak_rss_kb(long, tmp_path / "o60.mp4")
    print(f"peak RSS: 10 s {short_peak / 1024:.0f} MiB, 60 s {long_peak / 1024:.0f} MiB")
    assert long_peak <= 1.2 * short_peak
