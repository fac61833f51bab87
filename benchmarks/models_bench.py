"""Model store / inference pool benchmark (issue 5). Prints numbers; asserts nothing.

1. Cold start: a fresh process (import, model store, warm-up list loaded, face analysis)
   until its first swap is done (built-in mesh_warp on a test photo).
2. Built-in Real-ESRGAN (ncnn, CPU): x4plus, animevideov3-x2 and -x4 in seconds per input
   megapixel, old settings (FaceFusion's fixed tiles, old tile sizes, libgomp spinning) vs
   the chosen ones (fitted tiles, FRAME_ENHANCERS sizes, passive OpenMP waiting), each in
   a fresh process, interleaved in the same run; peak RSS each; then the face_enhancer
   processor on one face, old vs new. Load average printed: the machine is shared.
3. RSS with 10 tenants using the same models vs one tenant (shared session pool); goal
   <= 1.1x.

Run: ``.venv/bin/python benchmarks/models_bench.py [--esrgan-size 128] [--rounds 2]
[--only-esrgan]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchkit import FACES

WARM_UP = ["open_nsfw", "realesr_animevideov3_x2"]
FACE_PHOTO = FACES / "man_frontal_glasses.jpg"
# The tile sizes before this benchmark's tuning (compared with FRAME_ENHANCERS' current ones).
OLD_TILES = {
    "real_esrgan_x4plus": 96,
    "realesr_animevideov3_x2": 192,
    "realesr_animevideov3_x4": 192,
}

COLD_START = r"""
import time, json, sys
start = time.perf_counter()
from pathlib import Path
import cv2
from facegate.engine.runtime import EngineRuntime
engine = EngineRuntime.create(Path(sys.argv[1]), warm_up=json.loads(sys.argv[2]))
warm = time.perf_counter() - start
from facegate.engine.pipeline import PipelineSpec
src = cv2.imread(sys.argv[3]); dst = cv2.imread(sys.argv[4])
engine.pipeline(PipelineSpec()).run_image([src], dst)
print(json.dumps({"warm_up_s": warm, "first_swap_s": time.perf_counter() - start,
                  "loads": engine.hub.pool.stats.loaded}))
"""

RSS = r"""
import json, resource, sys
import numpy as np
from pathlib import Path
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.moderation import preprocess, forward_open_nsfw
from facegate.engine.networks.frame_enhance import forward_ncnn_realesrgan

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
hub = ModelHub(ModelStore(Path(sys.argv[1])))
frame = np.random.default_rng(0).integers(0, 255, (96, 96, 3), dtype=np.uint8)
def use(tenant):
    request = ModelRequest(tenant=tenant)
    nsfw = hub.onnx("open_nsfw", request)
    forward_open_nsfw(nsfw, preprocess(frame)[None])
    net, _ = hub.ncnn("realesr_animevideov3_x2", request)
    forward_ncnn_realesrgan(net, frame)
use("tenant-0"); use("tenant-0")
one = rss_mb()
for i in range(1, 10):
    use(f"tenant-{i}")
ten = rss_mb()
print(json.dumps({"rss_one_mb": one, "rss_ten_mb": ten, "sessions": len(hub.pool)}))
"""


ESRGAN = r"""
import json, os, resource, sys, time
policy, kind, name, size, mode, tile, overlap = sys.argv[1:8]
size, tile, overlap = int(size), int(tile), int(overlap)
if policy == "spin":
    import ncnn  # loaded before facegate's import_ncnn asks libgomp for passive waiting
import cv2
import numpy as np
from pathlib import Path
from facegate.engine.networks import tiling
from facegate.engine.networks.frame_enhance import FRAME_ENHANCERS, forward_ncnn_realesrgan
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore

hub = ModelHub(ModelStore(Path("/nonexistent")))
net, _ = hub.ncnn(name)
spec = FRAME_ENHANCERS[name]
calls = []
def run(part):
    calls.append(part.shape[0] * part.shape[1])
    return forward_ncnn_realesrgan(net, part)
def old(frame, tile_, overlap_, scale, run_tile, on_tile=None):
    # The previous code: FaceFusion's fixed tiles (the frame padded up to whole tiles).
    return tiling.enhance_tiled(frame, (tile_, 0, overlap_), scale, run_tile, "reflect", on_tile)
enhance = old if mode == "fixed" else tiling.enhance_fitted
if kind == "face":
    from facegate.engine.faces import FaceAnalyser
    from facegate.engine.processors import face_enhancer
    from facegate.engine.processors.base import JobContext
    if mode == "fixed":
        face_enhancer.enhance_fitted = old
    frame = cv2.imread(sys.argv[8])
    faces = FaceAnalyser().analyse(frame)[:1]
    processor = face_enhancer.FaceEnhancer(hub)
    ctx = JobContext(options={"face_enhancer": processor.validate_options({"model": name})})
    processor.prepare(ctx)
    ctx.target_faces = faces
    processor.process_frame(frame, ctx)  # warm-up
    times = []
    for _ in range(3):
        start = time.perf_counter()
        processor.process_frame(frame, ctx)
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": round(min(times), 3), "faces": len(faces)}))
    raise SystemExit
frame = np.random.default_rng(1).integers(0, 255, (size, size, 3), dtype=np.uint8)
start = time.perf_counter()
out = enhance(frame, tile, overlap, spec.scale, run)
seconds = time.perf_counter() - start
assert out.shape[0] == size * spec.scale
print(json.dumps({
    "s_per_mp": seconds / (size * size / 1e6), "tiles": len(calls),
    "tile_pixels": sum(calls), "load": round(os.getloadavg()[0], 1),
    "rss_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
}))
"""


def number(result: dict[str, object], key: str) -> float:
    """A figure of a child process's JSON line."""
    value = result[key]
    if not isinstance(value, int | float):
        raise SystemExit(f"{key} is {value!r}, not a number")
    return float(value)


def run_child(code: str, *args: str) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def esrgan_child(args: list[str], policy: str) -> dict[str, object]:
    """Run ESRGAN in a fresh process: libgomp reads OMP_WAIT_POLICY only when ncnn loads."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ESRGAN, policy, *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def compare_esrgan(size: int, rounds: int) -> None:
    """Old settings (fixed FaceFusion tiles, spinning OpenMP) vs the chosen ones, interleaved
    in the same run so shared-machine load hits both alike."""
    from facegate.engine.networks.frame_enhance import FRAME_ENHANCERS  # imports no ncnn

    print(f"load average {os.getloadavg()}")
    for name, old_tile in OLD_TILES.items():
        new_tile, _, overlap = FRAME_ENHANCERS[name].size
        configs = {
            f"old (tile {old_tile}, fixed, spin)": ("fixed", old_tile, "spin"),
            f"new (tile {new_tile}, fitted, passive)": ("fitted", new_tile, "passive"),
        }
        best: dict[str, dict[str, object]] = {}
        for _ in range(rounds):
            for label, (mode, tile, policy) in configs.items():
                args = ["frame", name, str(size), mode, str(tile), str(overlap)]
                got = esrgan_child(args, policy)
                if label not in best or number(got, "s_per_mp") < number(best[label], "s_per_mp"):
                    best[label] = got
        old, new = (best[label] for label in configs)
        for label, got in best.items():
            print(
                f"  {name} {label}: {number(got, 's_per_mp'):,.1f} s per input MP "
                f"({size}² input, {got['tiles']} tiles of {got['tile_pixels']} px, peak RSS "
                f"{got['rss_peak_mb']} MB, load {got['load']})"
            )
        ratio = number(old, "s_per_mp") / number(new, "s_per_mp")
        print(f"  {name}: new is {ratio:.1f}x faster than old")
    face = {
        policy: esrgan_child(
            ["face", "realesr_animevideov3_x4", "0", mode, "192", "8", str(FACE_PHOTO)], policy
        )
        for mode, policy in (("fixed", "spin"), ("fitted", "passive"))
    }
    print(
        f"face_enhancer (built-in, 1 face, {FACE_PHOTO}): old {face['spin']['seconds']} s, "
        f"new {face['passive']['seconds']} s, load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-dir", default="./var/models")
    parser.add_argument("--esrgan-size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repeats (best kept)")
    parser.add_argument("--only-esrgan", action="store_true")
    args = parser.parse_args()
    source = str(FACES / "woman_a_selfie_frontal_01.jpg")
    target = str(FACES / "man_frontal_glasses.jpg")
    if args.only_esrgan:
        compare_esrgan(args.esrgan_size, args.rounds)
        return
    cold = run_child(COLD_START, args.models_dir, json.dumps(WARM_UP), source, target)
    print(
        f"cold start (process start -> first swap done): {cold['process_wall_s']:.2f} s "
        f"(in-process {cold['first_swap_s']:.2f} s, of which store + warm-up "
        f"{cold['warm_up_s']:.2f} s; loads {cold['loads']})"
    )
    rss = run_child(RSS, args.models_dir)
    ratio = number(rss, "rss_ten_mb") / number(rss, "rss_one_mb")
    print(
        f"RSS one tenant {rss['rss_one_mb']:.0f} MB, ten tenants {rss['rss_ten_mb']:.0f} MB: "
        f"{ratio:.3f}x (goal <= 1.1x), {rss['sessions']} pooled models"
    )
    compare_esrgan(args.esrgan_size, args.rounds)


if __name__ == "__main__":
    main()
