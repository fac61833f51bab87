"""Crafted videos that are cheap to make and dear to decode: one keyframe, then a second of
busy P-frames repeated for as long as wanted (stream-copied, so a 30 s 1080p60 clip takes
one second of encoding). A reader that decodes every frame up to its samples pays for all
of them; one that seeks cannot skip any (there is no keyframe to seek to)."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np


def encode_second(width: int, height: int, fps: int) -> bytes:
    """One second of H.264 in MP4: a keyframe and ``fps - 1`` P-frames of moving noise."""
    out_buffer = io.BytesIO()
    with av.open(out_buffer, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {
            "preset": "ultrafast",
            "x264-params": "keyint=100000:min-keyint=100000:scenecut=0:bframes=0",
        }
        rng = np.random.default_rng(0)
        noise = rng.integers(0, 255, (height // 8, width // 8, 3), dtype=np.uint8)
        base = noise.repeat(8, 0).repeat(8, 1)
        for index in range(fps):
            frame = av.VideoFrame.from_ndarray(np.roll(base, index * 4, axis=1), format="bgr24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return out_buffer.getvalue()


def make_keyframeless_clip(path: Path, width: int, height: int, fps: int, seconds: float) -> int:
    """Write the clip to ``path``; returns its frame count."""
    with av.open(io.BytesIO(encode_second(width, height, fps))) as source:
        template = source.streams.video[0]
        packets = [packet for packet in source.demux(template) if packet.size]
        step = int(packets[1].pts or 0) - int(packets[0].pts or 0)
        total = round(fps * seconds)
        with av.open(str(path), "w") as out:
            stream = out.add_stream_from_template(template)
            for index in range(total):
                original = packets[0] if index == 0 else packets[1 + (index - 1) % (fps - 1)]
                packet = av.Packet(bytes(original))
                packet.pts = packet.dts = index * step
                packet.time_base = template.time_base
                packet.is_keyframe = index == 0
                packet.stream = stream
                out.mux(packet)
    return total
