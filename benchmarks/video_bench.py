"""Video speed: (a) decode + encode alone, the floor; (b) the full swap pipeline; in fps.

One face, synthetic clips made here (a moving, zooming, turning photo with a tone). Targets on
the 2-core machine: 720p >= 30 fps end to end, 1080p >= 15 fps. The machine is shared, so the
load average is printed next to every number; compare the ratio full / floor in one run.

    .venv/bin/python benchmarks/video_bench.py [--seconds 6] [--sizes 720,1080]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2

from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, process_video
from facegate.engine.video.synth import ClipSpec, make_face_clip

FACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "faces"
FACES = FACES if FACES.exists() else Path("/work/shared/data/faces")
TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "man_frontal_glasses.jpg"
SIZES = {720: (1280, 720), 1080: (1920, 1080)}


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def identity(frame: Frame) -> Frame:
    return frame


def floor(src: Path, dst: Path, preset: str) -> float:
    result = process_video(src, dst, identity, VideoOptions(preset=preset))  # type: ignore[arg-type]
    return result.frames / result.seconds


def full(pipeline: Pipeline, src: Path, dst: Path, preset: str, workers: int) -> float:
    source = cv2.imread(str(SOURCE))
    options = VideoOptions(preset=preset, workers=workers)  # type: ignore[arg-type]
    started = time.perf_counter()
    result = pipeline.run_video([source], src, dst, options=options)
    return result.frames / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--sizes", default="720,1080")
    parser.add_argument("--presets", default="veryfast,superfast")
    args = parser.parse_args()
    spec = PipelineSpec.model_validate(
        {
            "processors": ["face_swapper"],
            "processor_options": {"face_swapper": {"mask": "feather"}},
            "selector": {"mode": "one"},
        }
    )
    pipeline = Pipeline(spec)
    print(f"cpus={os.cpu_count()} {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            width, height = SIZES[size]
            src = Path(tmp) / f"{size}.mp4"
            make_face_clip(src, TARGET, ClipSpec(seconds=args.seconds, width=width, height=height))
            dst = Path(tmp) / "out.mp4"
            for preset in args.presets.split(","):
                base = floor(src, dst, preset)
                print(f"{size}p {preset:9s} (a) decode+encode floor  {base:6.1f} fps  {load()}")
                for workers in (1, 2):
                    fps = full(pipeline, src, dst, preset, workers)
                    print(
                        f"{size}p {preset:9s} (b) full pipeline w={workers} {fps:6.1f} fps"
                        f"  = {fps / base:.2f} x floor  {load()}"
                    )


if __name__ == "__main__":
    main()
