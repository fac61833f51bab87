"""Clip factories for the video tests: made in the test's tmp dir, never committed."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
from tests.testdata import FACES

from facegate.engine.video.synth import ClipSpec, make_face_clip

FACE = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "man_frontal_glasses.jpg"
NO_FACE = FACES / "no_face_landscape_mountains.jpg"


def create_clip(path: Path, photo: Path = FACE, **spec: object) -> Path:
    make_face_clip(path, photo, ClipSpec(**spec))  # type: ignore[arg-type]
    return path


def decode_all(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def video_timestamps(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        return [float(f.time) for f in container.decode(video=0)]


def audio_seconds(path: Path) -> float:
    with av.open(str(path)) as container:
        if not container.streams.audio:
            return 0.0
        return sum(f.samples / f.sample_rate for f in container.decode(audio=0))


def create_audio_only(path: Path) -> Path:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=48000)
        for i in range(20):
            chunk = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="flt", layout="mono"
            )
            chunk.sample_rate, chunk.pts = 48000, i * 1024
            out.mux(stream.encode(chunk))
        out.mux(stream.encode())
    return path
