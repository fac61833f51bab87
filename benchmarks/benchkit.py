"""Shared set-up of the benchmarks: where the test photos are, the process set-up of a
facegate command, and the in-process service (api, gateway, observability)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from facegate.allocator import tune_allocator
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import Frame
from facegate.settings import Settings

#: The face photos of ../shared/data/faces (see their SOURCES.md), beside this checkout.
FACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "faces"
#: This checkout's source tree (what a subprocess imports, as PYTHONPATH).
SRC = Path(__file__).resolve().parents[1] / "src"


def source_trees(baseline: Path | None) -> dict[str, Path]:
    """The source trees a benchmark runs, by label: this one, and ``--baseline`` (another
    checkout's ``src``, e.g. a worktree of the code before a change) when given."""
    trees = {"this tree": SRC}
    if baseline is not None:
        trees["baseline"] = baseline.resolve()
    return trees


def read_frame(path: Path) -> Frame:
    """The image at ``path`` as a BGR uint8 frame (OpenCV's decoder); exits naming the file
    when OpenCV cannot read it."""
    frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if frame is None:
        raise SystemExit(f"cannot read {path}")
    return np.asarray(frame, dtype=np.uint8)


def read_frames(folder: Path) -> dict[str, Frame]:
    """Every file of ``folder`` that OpenCV reads as an image, by name, in name order (the
    photos of a faces folder without its SOURCES.md)."""
    frames = {p.name: cv2.imread(str(p), cv2.IMREAD_COLOR) for p in sorted(folder.iterdir())}
    return {name: np.asarray(f, dtype=np.uint8) for name, f in frames.items() if f is not None}


def load_average() -> str:
    """The machine's load average (1, 5, 15 min), printed beside timings taken on a shared
    machine."""
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def like_a_facegate_process(default_allocator: bool = False) -> str:
    """Set this process up as the ``facegate`` command sets up its own (the allocator
    tuning of :mod:`facegate.allocator`) unless ``default_allocator``; a line saying which."""
    if default_allocator:
        return "allocator: glibc defaults (--default-allocator)"
    tuned = tune_allocator()
    return f"allocator: {'tuned as in facegate processes' if tuned else 'defaults (no glibc)'}"


def engine_runtime(models_dir: Path = Path("var/models")) -> EngineRuntime:
    """The engine as a facegate process builds it: the built-in models, and any installed
    in ``models_dir`` (the embedded shape's default folder)."""
    return EngineRuntime.create(models_dir)


def bench_settings(tmp: Path, **overrides: Any) -> Settings:
    """An embedded-shape service in ``tmp`` with no workers and quiet logs (request logs
    would measure the terminal, not the service); ``overrides`` win."""
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp}/facegate.db",
        "storage_url": f"file://{tmp}/storage",
        "data_dir": tmp,
        "models_dir": tmp / "models",
        "workers": 0,
        "log_level": "warning",
        **overrides,
    }
    return Settings(_env_file=None, **values)


def median_seconds(call: Callable[[], object], runs: int) -> float:
    """The median wall time of ``runs`` calls."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
