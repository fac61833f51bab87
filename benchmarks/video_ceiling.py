"""Video's ceiling on this machine (issue 28): what its cores allow the service's pipeline.

One synthetic clip with one face (as ``video_bench.py``), three runs, alternated for
``--rounds``:

(a) the floor: decoded and re-encoded with the project's codec settings, no face work;
(b) the service's pipeline in one process, as ``video_bench.py`` (c) runs it (tracking, the
    swap on two render threads, the watermark on every frame, the output's moderation): its
    fps, ratio to the floor, CPU ms a frame (all threads) and the cores it kept busy, and the
    best ratio that CPU allows at all: ``cores × 1000 / cpu ms`` fps, against the floor;
(c) the same clip as two halves rendered at once in two processes (each its own pipeline
    and engine, as two parts of a segmented run are, ``worker/segments.py``), joined by
    ``concat_parts``: fps from both starting together until both are done (their start-up,
    printed apart, is what a warm worker pays once), and the cores busy. Nothing is shared
    but the cores: it is the ceiling of taking the render out of the interpreter's lock.

    .venv/bin/python benchmarks/video_ceiling.py [--seconds 8] [--height 720] [--rounds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from fractions import Fraction
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from benchkit import like_a_facegate_process, load_average
from facegate.engine.tracking import TrackerOptions
from facegate.engine.video.concat import Part, concat_parts
from facegate.engine.video.synth import ClipSpec, make_face_clip
from video_bench import SIZES, TARGET, floor, full, service_pipeline

PRESET = "veryfast"


def run_part(
    src: Path, dst: Path, part: tuple[float, float | None], ready: Queue[Any], go: Event
) -> None:
    """A spawned process: set up as a worker would, say ready, wait for ``go``, render
    ``part`` of ``src`` as the service does; put (frames, wall s, CPU s) on ``ready``."""
    like_a_facegate_process()
    pipeline, moderator = service_pipeline()
    ready.put("ready")
    go.wait()
    started, cpu = time.perf_counter(), time.process_time()
    fps, _ = full(pipeline, src, dst, PRESET, 2, TrackerOptions(), moderator=moderator, part=part)
    wall = time.perf_counter() - started
    ready.put((round(fps * wall), wall, time.process_time() - cpu))


def two_processes(src: Path, tmp: Path, seconds: float) -> tuple[float, float, float, int]:
    """(fps, cores busy, start-up s, frames) of the clip's two halves in two processes."""
    context = multiprocessing.get_context("spawn")
    ready: Queue[Any] = context.Queue()
    go = context.Event()
    half = seconds / 2
    parts = [(0.0, half), (half, None)]
    outputs = [tmp / f"part{i}.mp4" for i in range(2)]
    spawned = time.perf_counter()
    workers = [
        context.Process(target=run_part, args=(src, out, part, ready, go))
        for out, part in zip(outputs, parts, strict=True)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get()
    start_up = time.perf_counter() - spawned
    started = time.perf_counter()
    go.set()
    results = [ready.get() for _ in workers]
    for worker in workers:
        worker.join()
    concat_parts(
        [Part(outputs[0], Fraction(0)), Part(outputs[1], Fraction(half))], src, tmp / "joined.mp4"
    )
    wall = time.perf_counter() - started
    frames = sum(frames for frames, _, _ in results)
    cpu = sum(cpu for _, _, cpu in results)
    return frames / wall, cpu / wall, start_up, frames


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--height", type=int, default=720, choices=sorted(SIZES))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(like_a_facegate_process())
    cores = os.cpu_count() or 1
    pipeline, moderator = service_pipeline()
    width, height = SIZES[args.height]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        src = tmp / "clip.mp4"
        make_face_clip(src, TARGET, ClipSpec(seconds=args.seconds, width=width, height=height))
        print(f"{args.height}p {PRESET}, {args.seconds:g} s, {cores} cores  {load_average()}")
        for round_ in range(args.rounds):
            base, _ = floor(src, tmp / "floor.mp4", PRESET)
            started, cpu = time.perf_counter(), time.process_time()
            fps, cpu_ms = full(
                pipeline, src, tmp / "one.mp4", PRESET, 2, TrackerOptions(), moderator=moderator
            )
            busy = (time.process_time() - cpu) / (time.perf_counter() - started)
            allowed = cores * 1000 / cpu_ms
            two, two_busy, start_up, frames = two_processes(src, tmp, args.seconds)
            print(
                f"round {round_ + 1}: (a) floor {base:5.1f} fps | (b) one process {fps:5.1f} fps"
                f" = {fps / base:.2f}x, cpu {cpu_ms:4.1f} ms a frame, {busy:.2f} cores busy;"
                f" that CPU allows at most {allowed:5.1f} fps = {allowed / base:.2f}x |"
                f" (c) two processes {two:5.1f} fps = {two / base:.2f}x"
                f" ({two / fps:.2f}x one), {two_busy:.2f} cores busy, {frames} frames,"
                f" start-up {start_up:.1f} s  {load_average()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
