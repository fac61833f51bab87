"""Video speed: (a) decode + encode alone, the floor; (b) the full swap pipeline; in fps.

One face, synthetic clips made here (a moving, zooming, turning photo with a tone). Targets on
the 2-core machine: 720p >= 30 fps end to end, 1080p >= 15 fps. The machine is shared, so the
load average is printed next to every number; compare ratios within one run. CPU ms per frame
(all threads) is steadier than wall fps under load: on an idle 2-core machine the pipeline can
reach at most about 2000 / cpu_ms fps. The full pipeline runs twice: with the first tracker
(static-mode mesh on a 256 px crop, the baseline) and the current one (mesh tracking mode),
then once more as the service runs it: the watermark on every frame and the output's
moderation (``engine.screening``) as the frames pass.

Per-stage breakdown (issue 28), wall ms per frame summed over the threads that run the stage
(render runs on ``--workers`` threads at once, so the stages add up to more than the frame's
share of the wall clock), and beside it the CPU ms of the threads that ran it (steadier on a
shared machine; the swap's helper thread is not in its caller's CPU, nor are mediapipe's and
onnxruntime's own threads in the tracker's and the classifier's): decode (a decode-only
pass of the clip), encode (the floor's wall minus that: the colour conversion for the
encoder, x264, the muxer and the output file's store: the rename into place), track (the
analyse stage) split into detect (the keyframes' full detection) and mesh (the tracked mesh
between them), swap (the render stage) and the swap's own stages (reshape/outline, raster,
bands, mask, colour/tone, glasses check, blend), watermark and moderation.

    .venv/bin/python benchmarks/video_bench.py [--seconds 6] [--sizes 720,1080] [--service-only]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average, read_frame
from facegate.engine.moderation import ModerationPolicy, Moderator
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.screening import VideoScreen
from facegate.engine.tracking import TrackerOptions
from facegate.engine.types import Frame
from facegate.engine.video import VideoOptions, process_video
from facegate.engine.video.convert import FrameGeometry, decoded_to_bgr
from facegate.engine.video.process import FrameStages
from facegate.engine.video.swap import VideoSwap
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.engine.watermark import VideoWatermark

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


class StageClock:
    """Wall seconds per stage, summed over every call on every thread, and the CPU seconds
    of the calling threads for the stages timed here (``timed``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds

    def timed(self, stage: str, work: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return work(*args)
            finally:
                used = time.thread_time() - cpu
                self.add(stage, time.perf_counter() - started)
                with self._lock:
                    self.cpu[stage] += used

        return run


class ThreadCpu:
    """The CPU seconds each of this process's threads spent while it ran (``with``), by
    role: Python threads by name (``video-render_1`` -> ``video-render``), native ones by
    their name where the library gives one (mediapipe's, FFmpeg's decoder threads), the
    rest (x264's, onnxruntime's, OpenCV's: named after the process) as ``native, unnamed``.
    Sampled from /proc every 0.2 s (the sampler, ``thread-cpu``, costs ~1 % of a core), so
    a thread that ended during the run loses at most its last 0.2 s (the render threads end
    with it, mostly idle)."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.wall = 0.0
        self.done = threading.Event()
        self.sampler = threading.Thread(target=self._run, name="thread-cpu", daemon=True)

    def __enter__(self) -> ThreadCpu:
        self.first = {tid: cpu for tid, (_, cpu) in self._sample().items()}
        self.wall = time.perf_counter()
        self.sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.sampler.join()
        self.last.update(self._sample())
        self.wall = time.perf_counter() - self.wall

    def _run(self) -> None:
        while not self.done.wait(0.2):
            self.last.update(self._sample())

    def _sample(self) -> dict[int, tuple[str, float]]:
        python = {t.native_id: t.name for t in threading.enumerate()}
        seen: dict[int, tuple[str, float]] = {}
        for name in os.listdir("/proc/self/task"):
            tid = int(name)
            try:
                with open(f"/proc/self/task/{tid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                with open(f"/proc/self/task/{tid}/comm") as comm:
                    native = comm.read().strip()
            except OSError:
                continue  # ended between the listing and the read
            role = self.last[tid][0] if tid in self.last else _role(python.get(tid), native)
            seen[tid] = (role, (int(fields[11]) + int(fields[12])) / self.tick)
        return seen

    def by_role(self) -> dict[str, float]:
        roles: dict[str, float] = defaultdict(float)
        for tid, (role, cpu) in self.last.items():
            roles[role] += cpu - self.first.get(tid, 0.0)
        return roles


def _role(python: str | None, native: str) -> str:
    if python is not None:
        return "main" if python == "MainThread" else python.rsplit("_", 1)[0]
    if native.startswith("mediapipe/"):
        return "mediapipe (native)"
    if native.startswith("av:"):
        return "FFmpeg " + native.removeprefix("av:").rstrip("0123456789") + " (native)"
    return "native, unnamed (x264, onnxruntime, OpenCV)"


def print_threads(cpu: ThreadCpu, frames: int, label: str = "threads") -> None:
    """Each thread role's CPU ms per frame, their sum and the cores it kept busy."""
    roles = cpu.by_role()
    total = sum(roles.values())
    print(
        f"    {label}: cpu ms per frame, all {1000 * total / frames:.1f} ms,"
        f" {total / cpu.wall:.2f} cores busy of {os.cpu_count()}"
    )
    for role, seconds in sorted(roles.items(), key=lambda item: -item[1]):
        if seconds * 1000 / frames >= 0.05:
            print(f"      {role:44s} {1000 * seconds / frames:6.2f} ms")


class TimedAnalyser:
    """The tracker's keyframe detection (``FaceAnalyser.analyse``), timed as ``detect``."""

    def __init__(self, analyser: Any, clock: StageClock) -> None:
        self.analyse = clock.timed("detect", analyser.analyse)


class TimedScreen:
    """The output's moderation as the service runs it (a ``FrameInspector``), timed."""

    def __init__(self, screen: VideoScreen, clock: StageClock) -> None:
        self.screen, self.clock = screen, clock

    def see(self, frame: Frame, time_: Fraction) -> None:
        self.clock.timed("moderation", self.screen.see)(frame, time_)

    def end(self) -> None:
        self.clock.timed("moderation", self.screen.close)()


def decode_only(src: Path) -> tuple[float, int]:
    """(wall seconds, frames) of decoding the clip to BGR frames as a run does (its reader's
    threading and colour conversion), nothing else."""
    started, frames = time.perf_counter(), 0
    with av.open(str(src)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        geometry = FrameGeometry(stream.width, stream.height, 0, False)
        for picture in container.decode(stream):
            decoded_to_bgr(picture, geometry)
            frames += 1
    return time.perf_counter() - started, frames


def floor(
    src: Path, dst: Path, preset: str, threads: ThreadCpu | None = None
) -> tuple[float, float]:
    cpu = time.process_time()
    with threads or contextlib.nullcontext():
        result = process_video(src, dst, identity, VideoOptions(preset=preset))
    return result.frames / result.seconds, (time.process_time() - cpu) / result.frames * 1000


def full(
    pipeline: Pipeline,
    src: Path,
    dst: Path,
    preset: str,
    workers: int,
    tracker: TrackerOptions,
    clock: StageClock | None = None,
    moderator: Moderator | None = None,
    threads: ThreadCpu | None = None,
    part: tuple[float, float | None] = (0.0, None),
) -> tuple[float, float]:
    """(wall fps, CPU ms per frame) of the swap pipeline with the given tracker settings;
    with a ``moderator``, as the service runs it: the watermark on every frame and the
    output's moderation; ``clock`` gets the stages. ``part``: the (start, end) seconds
    rendered (a segmented run's part; the whole clip by default)."""
    source = read_frame(SOURCE)
    options = VideoOptions(preset=preset, workers=workers, start=part[0], end=part[1])
    clock = clock or StageClock()
    started, cpu = time.perf_counter(), time.process_time()
    ctx = pipeline.prepare([source], on_stage=clock.add)
    work = VideoSwap(pipeline, ctx, tracker, owns_frames=True)  # as run_video hands them over
    work.tracker.analyser = TimedAnalyser(work.tracker.analyser, clock)  # type: ignore[assignment]
    stages = FrameStages(
        render=clock.timed("swap", work.render), analyse=clock.timed("track", work.analyse)
    )
    if moderator is not None:
        bits = np.random.default_rng(28).integers(0, 2, 64).astype(np.uint8)
        screen = VideoScreen(moderator, "output", ModerationPolicy())
        # The classifier's batches, on the screen's own thread (a part of "moderation").
        screen._score = clock.timed("moderation scoring", screen._score)  # type: ignore[method-assign]
        stages = FrameStages(
            render=stages.render,
            analyse=stages.analyse,
            # the mark added into the frame, as a video job adds it
            finish=clock.timed("watermark", VideoWatermark(bits, in_place=True)),
            inspect=TimedScreen(screen, clock),
        )
    try:
        with threads or contextlib.nullcontext():
            result = process_video(src, dst, stages, options, cancel=ctx.cancel)
    finally:
        work.close()
    wall = time.perf_counter() - started
    return result.frames / wall, (time.process_time() - cpu) / result.frames * 1000


#: The swap's stages (face_swapper.<stage>, ``engine_bench.SWAP_STAGES``), in their order.
SWAP_STAGES = ("outline", "raster", "bands", "mask", "side wait", "colour", "glasses", "blend")
#: The swap's target side, on its helper thread beside the stages above (when not busy).
HELPER_STAGES = ("side.glasses", "side.reshape", "side.shading")


def print_breakdown(
    label: str, clock: StageClock, frames: int, decode: float, floor_s: float
) -> None:
    """Each stage's wall ms per frame (summed over threads) and its share of the frame, with
    the CPU ms of the threads that ran it where it was timed here."""
    per_frame = {stage: 1000 * seconds / frames for stage, seconds in clock.seconds.items()}
    cpu = {stage: 1000 * seconds / frames for stage, seconds in clock.cpu.items()}
    per_frame["decode"] = 1000 * decode / frames
    per_frame["encode"] = max(0.0, 1000 * (floor_s - decode) / frames)
    if "track" in per_frame:  # the tracked mesh: what the analyse stage did besides detecting
        per_frame["mesh"] = per_frame["track"] - per_frame.get("detect", 0.0)
        cpu["mesh"] = cpu.get("track", 0.0) - cpu.get("detect", 0.0)
    inner = {"detect", "mesh", *(f"face_swapper.{s}" for s in (*SWAP_STAGES, *HELPER_STAGES))}
    inner.add("moderation scoring")
    order = ["decode", "track", "detect", "mesh", "swap"]
    order += [f"face_swapper.{s}" for s in (*SWAP_STAGES, *HELPER_STAGES)]
    order += ["watermark", "moderation", "moderation scoring", "encode"]
    total = sum(per_frame.get(stage, 0.0) for stage in ("decode", "track", "swap", "encode"))
    total += per_frame.get("watermark", 0.0) + per_frame.get("moderation", 0.0)
    print(
        f"  {label}: stages, wall ms per frame summed over threads (share of their sum), "
        "CPU ms of the threads that ran them"
    )
    for stage in order:
        if stage in per_frame:
            name = stage.removeprefix("face_swapper.")
            indent = 6 if stage in inner else 4
            ms = per_frame[stage]
            used = f"  cpu {cpu[stage]:6.2f} ms" if stage in cpu else ""
            line = f"{' ' * indent}{name:{22 - indent}s} {ms:7.2f} ms  {100 * ms / total:5.1f} %"
            print(line + used)


def service_pipeline() -> tuple[Pipeline, Moderator]:
    """The swap pipeline the benchmarks run (one source, the feathered mask) and the
    moderator of the service's output screening."""
    spec = PipelineSpec.model_validate(
        {
            "processors": ["face_swapper"],
            "processor_options": {"face_swapper": {"mask": "feather"}},
            "selector": {"mode": "one"},
        }
    )
    engine = engine_runtime()
    return engine.pipeline(spec), Moderator(engine.hub)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--sizes", default="720,1080")
    parser.add_argument("--presets", default="veryfast,superfast")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--service-only",
        action="store_true",
        help="the floor and (c) only: skip the two trackers' comparison (b)",
    )
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="keep glibc's allocator defaults (facegate processes tune them)",
    )
    args = parser.parse_args()
    print(like_a_facegate_process(args.default_allocator))
    pipeline, moderator = service_pipeline()
    print(f"cpus={os.cpu_count()} {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            width, height = SIZES[size]
            src = Path(tmp) / f"{size}.mp4"
            make_face_clip(src, TARGET, ClipSpec(seconds=args.seconds, width=width, height=height))
            dst = Path(tmp) / "out.mp4"
            decode_s, decoded = decode_only(src)
            for preset in args.presets.split(","):
                started = time.perf_counter()
                floor_threads = ThreadCpu()
                base, base_cpu = floor(src, dst, preset, floor_threads)
                floor_s = time.perf_counter() - started
                print(
                    f"{size}p {preset:9s} (a) decode+encode floor   {base:6.1f} fps"
                    f"  cpu {base_cpu:5.1f} ms/frame  {load_average()}"
                )
                results = {}
                for name, tracker in TRACKERS.items():
                    if args.service_only:
                        break
                    clock = StageClock()
                    fps, cpu = full(pipeline, src, dst, preset, args.workers, tracker, clock)
                    results[name] = (fps, cpu)
                    print(
                        f"{size}p {preset:9s} (b) full, {name:13s} {fps:6.1f} fps"
                        f"  cpu {cpu:5.1f} ms/frame  = {fps / base:.2f} x floor  {load_average()}"
                    )
                if results:
                    (old_fps, old_cpu), (new_fps, new_cpu) = results.values()
                    print(
                        f"{size}p {preset:9s} tracking vs static: {new_fps / old_fps:.2f}x fps,"
                        f" {old_cpu / new_cpu:.2f}x less CPU per frame"
                    )
                clock, threads = StageClock(), ThreadCpu()
                fps, cpu = full(
                    pipeline,
                    src,
                    dst,
                    preset,
                    args.workers,
                    TrackerOptions(),
                    clock,
                    moderator,
                    threads=threads,
                )
                print(
                    f"{size}p {preset:9s} (c) as the service: + watermark + moderation"
                    f" {fps:6.1f} fps  cpu {cpu:5.1f} ms/frame  = {fps / base:.2f} x floor"
                    f"  {load_average()}"
                )
                print_breakdown(f"{size}p {preset} (c)", clock, decoded, decode_s, floor_s)
                print_threads(threads, decoded)
                print_threads(floor_threads, decoded, "the floor's threads")


if __name__ == "__main__":
    main()
