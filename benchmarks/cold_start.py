"""Cold start of ``facegate swap``: one 1080p image, process start -> result file written
(issue 28: <= 1.5 s). Prints numbers; asserts nothing.

Each run is a fresh ``facegate swap SOURCE TARGET -o OUT`` process (the command's own entry
point, built-in swapper, no model store). Per run: the wall time from the spawn to the
result's mtime (``written``) and to the process's exit, and the CPU seconds of the process
(user + system, all threads: steadier than the wall clock on a shared machine). Then, in a
separate run each, where the time went: the same command under a probe that stamps each
stage (interpreter up, the CLI, the swap command's imports, reading the images, the engine,
the swap with its first model use, encoding, exit).

``--baseline SRC`` runs a second source tree (e.g. ``../main/src``) interleaved with this
one, with the same interpreter and virtualenv, so both are measured under the same load.

    .venv/bin/python benchmarks/cold_start.py [--runs 7] [--baseline ../main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from benchkit import FACES, load_average, source_trees

SOURCE = FACES / "woman_a_selfie_frontal_01.jpg"
TARGET = FACES / "man_frontal_beard_closeup.jpg"
COMMAND = "from facegate.cli import main; main()"

# The command under a probe: each stage's end in ms since the parent's spawn (argv[1]),
# written to argv[2] at exit (the command filters its own stderr: see observability/nativelog.py).
PROBE = r"""
import atexit, json, sys, time
t0 = float(sys.argv[1]); stages_file = sys.argv.pop(2); marks = {}
def mark(name): marks[name] = round((time.time() - t0) * 1000)
mark("interpreter up")
import facegate.cli as cli
mark("facegate.cli imported")
import facegate.cli.swap as swap
mark("swap command imported")
def stamped(name, function):
    def call(*args, **kwargs):
        result = function(*args, **kwargs); mark(name); return result
    return call
swap.installation_engine = stamped("engine built", swap.installation_engine)
swap.encode_image = stamped("result encoded", swap.encode_image)
load = swap.load_image_file
def load_image_file(path, limits):
    result = load(path, limits)
    if str(path) == sys.argv[-3]:
        mark("images read")
    return result
swap.load_image_file = load_image_file
import facegate.engine.pipeline as pipeline
pipeline.Pipeline.run_image = stamped("swapped (first model use)", pipeline.Pipeline.run_image)
atexit.register(lambda: open(stages_file, "w").write(json.dumps(marks)))
try:
    cli.main(sys.argv[2:])
finally:
    mark("command returned")
"""


STAGES = [
    "interpreter up",
    "facegate.cli imported",
    "swap command imported",
    "images read",
    "engine built",
    "swapped (first model use)",
    "result encoded",
    "command returned",
    "process exited",
]


def make_target(folder: Path) -> Path:
    """The one-face test photo scaled and padded to a 1920x1080 canvas (a 1080p image)."""
    frame = cv2.imread(str(TARGET), cv2.IMREAD_COLOR)
    h, w = frame.shape[:2]
    scale = min(1920 / w, 1080 / h)
    resized = cv2.resize(frame, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((1080, 1920, 3), np.uint8)
    y, x = (1080 - resized.shape[0]) // 2, (1920 - resized.shape[1]) // 2
    canvas[y : y + resized.shape[0], x : x + resized.shape[1]] = resized
    path = folder / "target_1080p.jpg"
    cv2.imwrite(str(path), canvas, [cv2.IMWRITE_JPEG_QUALITY, 92])
    return path


def environment(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    return env


def one_run(src: Path, target: Path, output: Path) -> dict[str, float]:
    """Spawn ``facegate swap``; seconds to the result's mtime, to exit, and CPU seconds."""
    output.unlink(missing_ok=True)
    argv = [sys.executable, "-c", COMMAND, "swap", str(SOURCE), str(target), "-o", str(output)]
    spawned = time.time()
    process = subprocess.Popen(argv, env=environment(src), stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    exited = time.time()
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"facegate swap failed ({process.returncode}): {stderr.strip()}")
    return {
        "written": output.stat().st_mtime - spawned,
        "exit": exited - spawned,
        "cpu": usage.ru_utime + usage.ru_stime,
    }


def probe_run(src: Path, target: Path, output: Path) -> dict[str, int]:
    """One run under :data:`PROBE`: each stage's end in ms since the spawn."""
    output.unlink(missing_ok=True)
    spawned = time.time()
    stages = output.with_suffix(".json")
    argv = [
        sys.executable,
        "-c",
        PROBE,
        str(spawned),
        str(stages),
        "swap",
        str(SOURCE),
        str(target),
    ]
    done = subprocess.run(
        [*argv, "-o", str(output)], env=environment(src), capture_output=True, text=True
    )
    exited = round((time.time() - spawned) * 1000)
    if done.returncode != 0:
        raise SystemExit(f"probe failed: {done.stderr.strip()[-2000:]}")
    marks: dict[str, int] = json.loads(stages.read_text())
    marks["process exited"] = exited
    return marks


def summary(name: str, runs: list[dict[str, float]]) -> str:
    def spread(key: str) -> str:
        values = sorted(run[key] for run in runs)
        return f"{statistics.median(values):.2f} s ({values[0]:.2f}-{values[-1]:.2f})"

    return (
        f"{name:>9}: written {spread('written')}, exit {spread('exit')}, "
        f"CPU {spread('cpu')}  [{len(runs)} runs]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another src/ folder, run interleaved")
    args = parser.parse_args()
    trees = source_trees(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        target = make_target(folder)
        print(f"facegate swap {SOURCE.name} <1920x1080 {target.stat().st_size // 1024} KB JPEG>")
        print(load_average())
        for name, src in trees.items():  # compile each tree's bytecode before timing
            one_run(src, target, folder / f"warm-{len(name)}.jpg")
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                results[name].append(one_run(src, target, folder / "out.jpg"))
        for name, runs in results.items():
            print(summary(name, runs))
        print(load_average())
        print("stages (ms since the spawn, median of 3 probed runs):")
        probes: dict[str, list[dict[str, int]]] = {name: [] for name in trees}
        for _ in range(3):
            for name, src in trees.items():
                probes[name].append(probe_run(src, target, folder / "probe.jpg"))
        # A tree whose command ends its process itself never returns from it: "-" there.
        stages = sorted({s for runs in probes.values() for s in runs[0]}, key=STAGES.index)
        print(f"  {'':28}" + "".join(f"{name:>12}" for name in trees))
        for stage in stages:
            row = [
                f"{statistics.median(run[stage] for run in runs):.0f}"
                if all(stage in run for run in runs)
                else "-"
                for runs in probes.values()
            ]
            print(f"  {stage:28}" + "".join(f"{value:>12}" for value in row))
        print(load_average())


if __name__ == "__main__":
    main()
