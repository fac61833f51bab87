"""Peak memory of real jobs on the CPU, beside the memory model's estimate (jobs/cost.py).

Each case runs in a fresh process (so its high-water mark is its own): the engine is built
and its models loaded by a small warm-up job of the same processors (a worker's models are
loaded once and shared by its jobs), then one job runs through the worker's real path
(``EngineRunner.run``: the inputs fetched from a tenant store and decoded, moderation, the
pipeline, the watermark, the encode). Reported: the process's resident set after the
warm-up (``VmRSS``), its peak during the job (``VmHWM`` of /proc/self/status: native memory
of numpy, OpenCV, ncnn, onnxruntime, PyAV included), the job's share (peak minus the warmed
resident set) and the estimate ``estimate_cost`` gives the job at submission.

"beside" runs a 4K enhance job and a 1080p swap at once, as two threads of one process (two
workers of one pool share their models), and reports the process's peak.

    .venv/bin/python benchmarks/memory_bench.py [--cases anime4k,swap1080,...]

Slow cases: x4plus4k is Real-ESRGAN x4plus from 960x540 to 4K on the CPU (minutes).
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from benchkit import FACES, engine_runtime, like_a_facegate_process, load_average, read_frame
from facegate.database import create_engine_from_url, create_session_factory, migrate
from facegate.engine.image import encode_image
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.jobs.cost import TargetShape, estimate_cost
from facegate.jobs.tables import Job
from facegate.provenance.marker import JobMark
from facegate.storage.memory import MemoryStore
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy, Tenant
from facegate.worker.runner import EngineRunner

TARGET = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE = FACES / "man_frontal_glasses.jpg"
MIB = 2**20


@dataclass(frozen=True)
class Case:
    """One job: its processors and options, and its target (an image of width x height, or
    a clip of that size and ``seconds``)."""

    processors: tuple[str, ...]
    width: int
    height: int
    options: dict[str, dict[str, Any]]
    seconds: float = 0.0  # > 0: a video

    @property
    def video(self) -> bool:
        return self.seconds > 0


def enhancer(model: str) -> dict[str, dict[str, Any]]:
    return {"frame_enhancer": {"model": model}}


CASES: dict[str, Case] = {
    "swap1080": Case(("face_swapper",), 1920, 1080, {}),
    "swap4k": Case(("face_swapper",), 3840, 2160, {}),
    "anime4k": Case(("frame_enhancer",), 1920, 1080, enhancer("realesr_animevideov3_x2")),
    "anime8k": Case(("frame_enhancer",), 3840, 2160, enhancer("realesr_animevideov3_x2")),
    "x4plus1k": Case(("frame_enhancer",), 240, 135, enhancer("real_esrgan_x4plus")),
    "x4plus2k": Case(("frame_enhancer",), 480, 270, enhancer("real_esrgan_x4plus")),
    "x4plus4k": Case(("frame_enhancer",), 960, 540, enhancer("real_esrgan_x4plus")),
    "video720": Case(("face_swapper",), 1280, 720, {}, seconds=4.0),
    "video1080": Case(("face_swapper",), 1920, 1080, {}, seconds=4.0),
}
DEFAULT = "swap1080,anime4k,x4plus1k,x4plus2k,video720,video1080,beside"


def status_bytes(field: str) -> int:
    """A ``kB`` field of /proc/self/status in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Start a new high-water mark from the current resident set (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def target_bytes(case: Case, folder: Path) -> bytes:
    """The case's target as uploaded: a JPEG of the face photo on a canvas of its size, or
    an H.264 clip."""
    if case.video:
        path = folder / f"clip-{uuid.uuid4().hex}.mp4"
        make_face_clip(path, TARGET, ClipSpec(case.seconds, 30, case.width, case.height))
        return path.read_bytes()
    photo = read_frame(TARGET)
    scale = min(case.width / photo.shape[1], case.height / photo.shape[0])
    size = (round(photo.shape[1] * scale), round(photo.shape[0] * scale))
    canvas = np.zeros((case.height, case.width, 3), np.uint8)
    resized = cv2.resize(photo, size, interpolation=cv2.INTER_AREA)
    top, left = (case.height - size[1]) // 2, (case.width - size[0]) // 2
    canvas[top : top + size[1], left : left + size[0]] = resized
    return encode_image(canvas, "jpeg", 92)


class Bench:
    """A tenant with the default policy (plus the frame enhancer and 8K output), a tenant
    store in memory and the worker's runner on the real engine."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        url = f"sqlite:///{folder}/bench.db"
        migrate(url)
        sessions = create_session_factory(create_engine_from_url(url))
        with sessions() as session:
            tenant = Tenant(id="bench", name="bench")
            tenant.policy = Policy(
                max_output_resolution="8k",
                allowed_processors=["face_swapper", "frame_enhancer"],
            )
            session.add(tenant)
            session.commit()
            policy = session.get(Policy, "bench")
            assert policy is not None
            session.expunge(policy)
        self.policy = policy
        self.store = TenantStore(MemoryStore())
        self.runner = EngineRunner(self.store, engine_runtime())
        self.source = encode_image(read_frame(SOURCE), "jpeg", 92)
        self.mark = JobMark(1, 1, "bench", b"k" * 32)

    def job(self, case: Case, target: bytes) -> Job:
        spec = PipelineSpec.model_validate(
            {"processors": list(case.processors), "processor_options": case.options}
        )
        job = Job(
            id=uuid.uuid4(),
            tenant_id="bench",
            status="running",
            kind="video" if case.video else "image",
            spec=spec.model_dump(mode="json"),
            inputs=["source-0", "target"],
        )
        for name, data in (("source-0", self.source), ("target", target)):
            self.store.write_new(
                tenant_id="bench",
                kind="inputs",
                job_id=job.id,
                name=name,
                data=data,
                content_type="application/octet-stream",
            )
        return job

    def run(self, job: Job) -> float:
        started = time.perf_counter()
        output = self.runner.run(job, self.policy, threading.Event(), _quiet, self.mark)
        output.discard()
        return time.perf_counter() - started


def _quiet(fraction: float, stage: str, detail: dict[str, Any] | None = None) -> None:
    return None


def estimate(case: Case) -> int:
    shape = TargetShape(case.width, case.height, round(case.seconds * 30) or 1)
    return estimate_cost(case.processors, case.options, shape, video=case.video).memory_bytes


def warm(bench: Bench, case: Case) -> None:
    """Load the case's models with a small job of the same processors."""
    small = Case(case.processors, 640, 360, case.options, seconds=1.0 if case.video else 0.0)
    if "real_esrgan_x4plus" in str(case.options):
        small = Case(case.processors, 64, 64, case.options)
    bench.run(bench.job(small, target_bytes(small, bench.folder)))


def measure(names: list[str], results: Any) -> None:
    """In a fresh process: warm up, then run the named cases at once (threads)."""
    like_a_facegate_process()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp))
        cases = [CASES[name] for name in names]
        for case in cases:
            warm(bench, case)
        jobs = [bench.job(case, target_bytes(case, bench.folder)) for case in cases]
        warmed = status_bytes("VmRSS")
        reset_peak()
        seconds: list[float] = [0.0] * len(jobs)

        def run(index: int) -> Callable[[], None]:
            return lambda: seconds.__setitem__(index, bench.run(jobs[index]))

        threads = [threading.Thread(target=run(i)) for i in range(len(jobs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results.put((warmed, status_bytes("VmHWM"), seconds))


def in_process(names: list[str]) -> tuple[int, int, list[float]]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=measure, args=(names, results))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"case {'+'.join(names)} failed (exit {child.exitcode})")
    got: tuple[int, int, list[float]] = results.get()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=DEFAULT, help=f"comma-separated, of {list(CASES)}")
    args = parser.parse_args()
    print(f"{load_average()} (a shared 2-core machine: seconds are noisy, memory is not)")
    print(f"{'case':<12}{'warmed MiB':>11}{'peak MiB':>10}{'job MiB':>9}{'estimate MiB':>14}  s")
    for name in args.cases.split(","):
        names = ["anime4k", "swap1080"] if name == "beside" else [name]
        warmed, peak, seconds = in_process(names)
        estimated = sum(estimate(CASES[n]) for n in names)
        label = "+".join(names) if name == "beside" else name
        print(
            f"{label:<12}{warmed / MIB:>11.0f}{peak / MIB:>10.0f}{(peak - warmed) / MIB:>9.0f}"
            f"{estimated / MIB:>14.0f}  {' '.join(f'{s:.1f}' for s in seconds)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
