"""What a video job's quality report costs (``engine/video/quality.py``).

    .venv/bin/python benchmarks/video_report_bench.py [--seconds 4] [--sizes 720,1080]

The same clip (a synthetic face clip, one face in every frame) through ``run_video`` with and
without ``reports``, alternately: wall seconds and CPU seconds of this process for each, and
the reports' frames. The difference is the report: a few sampled frames, two recogniser
passes per swapped face (the result's and the original's) and one for the source (once: the
source cache keeps its descriptor); the reports' own CPU time on the render threads is
printed beside it (on a busy machine the process's totals are noisy).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import FACES, engine_runtime, load_average, read_frame
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.processors.base import JobContext
from facegate.engine.report import FaceReport
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions
from facegate.engine.video.synth import ClipSpec, make_face_clip

TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "woman_astronaut_frontal.jpg"
SIZES = {720: (1280, 720), 1080: (1920, 1080)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--sizes", default="720,1080")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spec = PipelineSpec.model_validate({"processors": ["face_swapper"]})
    engine = engine_runtime()
    pipeline = engine.pipeline(spec)
    source = read_frame(SOURCE)
    # The reports' own time, on the render threads that make them (CPU of that thread).
    spent: list[float] = []
    describe = pipeline.face_reports

    def timed_reports(ctx: JobContext, target: Frame, result: Frame) -> list[FaceReport]:
        cpu = time.thread_time()
        try:
            return describe(ctx, target, result)
        finally:
            spent.append(time.thread_time() - cpu)

    pipeline.face_reports = timed_reports  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            width, height = SIZES[size]
            src, dst = Path(tmp) / f"{size}.mp4", Path(tmp) / "out.mp4"
            frames = make_face_clip(
                src, TARGET, ClipSpec(seconds=args.seconds, width=width, height=height)
            )
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            sampled: list[dict[str, Any]] = []
            spent.clear()
            for _ in range(args.repeat):
                for reported in (False, True):
                    reports: list[dict[str, Any]] | None = [] if reported else None
                    wall, cpu = time.perf_counter(), time.process_time()
                    pipeline.run_video([source], src, dst, options=VideoOptions(), reports=reports)
                    runs[reported].append((time.perf_counter() - wall, time.process_time() - cpu))
                    if reports:
                        sampled = reports
            for reported, label in ((False, "without reports"), (True, "with reports")):
                wall = statistics.median(w for w, _ in runs[reported])
                cpu = statistics.median(c for _, c in runs[reported])
                print(
                    f"{size}p, {frames} frames, {label:16s}: wall {wall:6.2f} s  "
                    f"cpu {cpu:6.2f} s  {load_average()}"
                )
            print(
                f"  the reports' CPU on the render threads: {sum(spent) / args.repeat:.2f} s a "
                f"run ({len(spent) // args.repeat} frames, "
                f"{1000 * statistics.median(spent):.0f} ms median a frame)"
            )
            print(
                f"  reported frames {[r['frame'] for r in sampled]}, "
                f"d_source {[r['d_source'] for r in sampled]}, "
                f"verdicts {sorted({r['verdict'] for r in sampled})}"
            )


if __name__ == "__main__":
    main()
