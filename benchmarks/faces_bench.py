"""Face analysis speed on 1920x1080 frames: median ms per stage, one-face and six-face frames.

    .venv/bin/python benchmarks/faces_bench.py [--repeat 15] [--faces-dir ../shared/data/faces]

Stages: whole-frame detection, tile detection, NMS, mesh per face (crop + FaceMesh + Face
building), and the full ``FaceAnalyser.analyse`` call with the default options (tile_policy
"auto" skips the tiles when every face found on the whole frame is large; tiles and meshes
run on ``AnalyserOptions.threads`` threads), the same call on one thread; then the same call
with ENGINE-NOTES' prototype set-up (tiles always, at full size, mesh crop 384 px) as the
baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from benchkit import FACES, like_a_facegate_process, read_frame
from facegate.engine import faces as F
from facegate.engine.types import Frame


def frame_1080p(path: Path) -> Frame:
    """The photo scaled to 1080 px high, centred on a 1920x1080 grey canvas."""
    image = read_frame(path)
    height, width = image.shape[:2]
    scale = 1080 / height
    # Bilinear: what this benchmark has always measured on (an INTER_CUBIC passed as the third
    # positional argument was taken by OpenCV as ``dst`` and ignored).
    size = (min(1920, round(width * scale)), 1080)
    image = np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_LINEAR), np.uint8)
    canvas = np.full((1080, 1920, 3), 127, np.uint8)
    x0 = (1920 - image.shape[1]) // 2
    canvas[:, x0 : x0 + image.shape[1]] = image
    return canvas


def median_ms(run: Callable[[], object], repeat: int) -> float:
    run()  # warm-up (graph creation, first inference)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench(name: str, frame: Frame, repeat: int) -> None:
    options = F.AnalyserOptions()
    analyser = F.FaceAnalyser(options)
    graphs = analyser._graphs()
    height, width = frame.shape[:2]
    windows = F._tile_windows(width, height, options.tiles, options.tile_overlap)
    pyramid = F.Pyramid(frame)
    raw = F.detect_faces(graphs, pyramid, F.AnalyserOptions(tile_policy="always"))
    skipped = len(F.detect_faces(graphs, pyramid, options)) < len(raw)
    merged = F.nms(raw, options.nms_iou)
    # A fresh pyramid per run: its halvings are part of the detection cost.
    whole = median_ms(
        lambda: F.Pyramid(frame).detect(
            graphs.detector, (0, 0, width, height), options.tile_max_side
        ),
        repeat,
    )
    tiles = median_ms(
        lambda: [
            F.Pyramid(frame).detect(graphs.detector, window, options.tile_max_side)
            for window in windows
        ],
        repeat,
    )
    nms = median_ms(lambda: F.nms(raw, options.nms_iou), repeat)
    mesh = median_ms(lambda: [F.mesh_face(graphs, frame, d, options) for d in merged], repeat)
    total = median_ms(lambda: analyser.analyse(frame), repeat)  # tiles, meshes on 2 threads
    one_thread = F.FaceAnalyser(F.AnalyserOptions(threads=1))
    serial = median_ms(lambda: one_thread.analyse(frame), repeat)
    one_thread.close()
    # ENGINE-NOTES' prototype: tiles always, at full size, mesh crops of 384 px.
    baseline = F.FaceAnalyser(
        F.AnalyserOptions(mesh_crop_size=384, tile_max_side=4096, tile_policy="always", threads=1)
    )
    base = median_ms(lambda: baseline.analyse(frame), repeat)
    found = len(analyser.analyse(frame))
    per_face = mesh / max(1, len(merged))
    print(
        f"{name}: {found} face(s) | detect whole {whole:.1f} ms, {len(windows)} tiles "
        f"{tiles:.1f} ms, NMS {nms:.2f} ms, mesh {mesh:.1f} ms ({per_face:.1f} per face) | "
        f"analyse {total:.1f} ms on {options.threads} threads, {serial:.1f} ms on one "
        f"(tiles {'skipped' if skipped else 'run'}) | "
        f"baseline (prototype: tiles always, full size, crop 384) {base:.1f} ms, "
        f"ratio {total / base:.2f}"
    )
    analyser.close()
    baseline.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--faces-dir", type=Path, default=FACES)
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="keep glibc's allocator defaults (facegate processes tune them)",
    )
    args = parser.parse_args()
    print(like_a_facegate_process(args.default_allocator))
    print(f"load average (1, 5, 15 min): {os.getloadavg()}, cpus: {os.cpu_count()}")
    bench("1 face ", frame_1080p(args.faces_dir / "woman_a_selfie_frontal_01.jpg"), args.repeat)
    bench("6 faces", frame_1080p(args.faces_dir / "group_6_faces_insightface_t1.jpg"), args.repeat)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
