"""Video speed: (a) decode + encode alone, the floor; (b) the full swap pipeline; in fps.

One face, synthetic clips made here (a moving, zooming, turning photo with a tone). Targets on
the 2-core machine: 720p >= 30 fps end to end, 1080p >= 15 fps. The machine is shared, so the
load average is printed next to every number; compare ratios within one run. CPU ms per frame
(all threads) is steadier than wall fps under load: on an idle 2-core machine the pipeline can
reach at most about 2000 / cpu_ms fps. The full pipeline runs twice: with the first tracker
(static-mode mesh on a 256 px crop, the baseline) and the current one (mesh tracking mode).

    .venv/bin/python benchmarks/video_bench.py [--seconds 6] [--sizes 720,1080]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average, read_frame
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, process_video
from facegate.engine.video.swap import VideoSwap
from facegate.engine.video.synth import ClipSpec, make_face_clip

TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "man_frontal_glasses.jpg"
SIZES = {720: (1280, 720), 1080: (1920, 1080)}
#: the baseline (the engine's first tracker: static-mode mesh on a 256 px crop) and the current
TRACKERS = {
    "static crop": TrackerOptions(mesh_tracking=False, crop_size=256),
    "mesh tracking": TrackerOptions(),
}


def identity(frame: Frame) -> Frame:
    return frame


def floor(src: Path, dst: Path, preset: str) -> tuple[float, float]:
    cpu = time.process_time()
    result = process_video(src, dst, identity, VideoOptions(preset=preset))
    return result.frames / result.seconds, (time.process_time() - cpu) / result.frames * 1000


def full(
    pipeline: Pipeline, src: Path, dst: Path, preset: str, workers: int, tracker: TrackerOptions
) -> tuple[float, float]:
    """(wall fps, CPU ms per frame) of the swap pipeline with the given tracker settings."""
    source = read_frame(SOURCE)
    options = VideoOptions(preset=preset, workers=workers)
    started, cpu = time.perf_counter(), time.process_time()
    ctx = pipeline.prepare([source])
    work = VideoSwap(pipeline, ctx, tracker)
    try:
        result = process_video(src, dst, work.stages(), options, cancel=ctx.cancel)
    finally:
        work.close()
    wall = time.perf_counter() - started
    return result.frames / wall, (time.process_time() - cpu) / result.frames * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--sizes", default="720,1080")
    parser.add_argument("--presets", default="veryfast,superfast")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="keep glibc's allocator defaults (facegate processes tune them)",
    )
    args = parser.parse_args()
    print(like_a_facegate_process(args.default_allocator))
    spec = PipelineSpec.model_validate(
        {
            "processors": ["face_swapper"],
            "processor_options": {"face_swapper": {"mask": "feather"}},
            "selector": {"mode": "one"},
        }
    )
    pipeline = engine_runtime().pipeline(spec)
    print(f"cpus={os.cpu_count()} {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            width, height = SIZES[size]
            src = Path(tmp) / f"{size}.mp4"
            make_face_clip(src, TARGET, ClipSpec(seconds=args.seconds, width=width, height=height))
            dst = Path(tmp) / "out.mp4"
            for preset in args.presets.split(","):
                base, base_cpu = floor(src, dst, preset)
                print(
                    f"{size}p {preset:9s} (a) decode+encode floor   {base:6.1f} fps"
                    f"  cpu {base_cpu:5.1f} ms/frame  {load_average()}"
                )
                results = {}
                for name, tracker in TRACKERS.items():
                    fps, cpu = full(pipeline, src, dst, preset, args.workers, tracker)
                    results[name] = (fps, cpu)
                    print(
                        f"{size}p {preset:9s} (b) full, {name:13s} {fps:6.1f} fps"
                        f"  cpu {cpu:5.1f} ms/frame  = {fps / base:.2f} x floor  {load_average()}"
                    )
                (old_fps, old_cpu), (new_fps, new_cpu) = results.values()
                print(
                    f"{size}p {preset:9s} tracking vs static: {new_fps / old_fps:.2f}x fps,"
                    f" {old_cpu / new_cpu:.2f}x less CPU per frame"
                )


if __name__ == "__main__":
    main()
