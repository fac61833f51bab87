"""Model store / inference pool benchmark (issue 5). Prints numbers; asserts nothing.

1. Cold start: a fresh process (import, model store, warm-up list loaded, face analysis)
   until its first swap is done (built-in mesh_warp on a test photo).
2. Real-ESRGAN x4plus (built-in ncnn, CPU, tiled) in ms per input megapixel, with
   realesr-animevideov3-x4 measured in the same run as the baseline.
3. RSS with 10 tenants using the same models vs one tenant (shared session pool); goal
   <= 1.1x.

Run: ``.venv/bin/python benchmarks/models_bench.py [--esrgan-size 128]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

FACES = Path("/work/shared/data/faces")
WARM_UP = ["open_nsfw", "realesr_animevideov3_x2"]

COLD_START = r"""
import time, json, sys
start = time.perf_counter()
from pathlib import Path
import cv2
from facegate.engine.models.hub import configure_default_hub
hub = configure_default_hub(Path(sys.argv[1]), warm_up=json.loads(sys.argv[2]))
warm = time.perf_counter() - start
from facegate.engine.pipeline import Pipeline, PipelineSpec
src = cv2.imread(sys.argv[3]); dst = cv2.imread(sys.argv[4])
Pipeline(PipelineSpec()).run_image([src], dst)
print(json.dumps({"warm_up_s": warm, "first_swap_s": time.perf_counter() - start,
                  "loads": hub.pool.stats.loaded}))
"""

RSS = r"""
import json, resource, sys
import numpy as np
from pathlib import Path
from facegate.engine.models.hub import ModelHub
from facegate.engine.models.store import ModelStore
from facegate.engine.models.tags import ModelRequest
from facegate.engine.moderation import preprocess, forward_open_nsfw
from facegate.engine.models.frame_enhance import forward_ncnn_realesrgan

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


def run_child(code: str, *args: str) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def esrgan_ms_per_mp(name: str, size: int) -> float:
    import numpy as np

    from facegate.engine.models.frame_enhance import FRAME_ENHANCERS, forward_ncnn_realesrgan
    from facegate.engine.models.hub import ModelHub
    from facegate.engine.models.store import ModelStore
    from facegate.engine.models.tiling import enhance_tiled

    hub = ModelHub(ModelStore(Path("/nonexistent")))
    net, _ = hub.ncnn(name)
    spec = FRAME_ENHANCERS[name]
    frame = np.random.default_rng(1).integers(0, 255, (size, size, 3), dtype=np.uint8)
    start = time.perf_counter()
    out = enhance_tiled(
        frame, spec.size, spec.scale, lambda t: forward_ncnn_realesrgan(net, t), mode="reflect"
    )
    seconds = time.perf_counter() - start
    assert out.shape[0] == size * spec.scale
    return seconds * 1000 / (size * size / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-dir", default="./var/models")
    parser.add_argument("--esrgan-size", type=int, default=128)
    args = parser.parse_args()
    source = str(FACES / "woman_a_selfie_frontal_01.jpg")
    target = str(FACES / "man_frontal_glasses.jpg")
    cold = run_child(COLD_START, args.models_dir, json.dumps(WARM_UP), source, target)
    print(
        f"cold start (process start -> first swap done): {cold['process_wall_s']:.2f} s "
        f"(in-process {cold['first_swap_s']:.2f} s, of which store + warm-up "
        f"{cold['warm_up_s']:.2f} s; loads {cold['loads']})"
    )
    rss = run_child(RSS, args.models_dir)
    ratio = float(rss["rss_ten_mb"]) / float(rss["rss_one_mb"])  # type: ignore[arg-type]
    print(
        f"RSS one tenant {rss['rss_one_mb']:.0f} MB, ten tenants {rss['rss_ten_mb']:.0f} MB: "
        f"{ratio:.3f}x (goal <= 1.1x), {rss['sessions']} pooled models"
    )
    base = esrgan_ms_per_mp("realesr_animevideov3_x4", args.esrgan_size)
    x4plus = esrgan_ms_per_mp("real_esrgan_x4plus", args.esrgan_size)
    print(
        f"Real-ESRGAN x4plus (ncnn CPU, tiles 96, overlap 8): {x4plus:,.0f} ms per input MP "
        f"({args.esrgan_size}² input); animevideov3-x4 baseline {base:,.0f} ms/MP; "
        f"ratio {x4plus / base:.1f}x"
    )


if __name__ == "__main__":
    main()
