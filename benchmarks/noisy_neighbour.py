"""One tenant's heavy work beside another's light jobs: the specification's first pain point.

Tenant *heavy* keeps its cap (``max_concurrent_jobs`` 2) full of long work: face-swapped
videos (``--videos``, e.g. 60 s at 720p and 1080p) and 4K frame enhancement (``--enhance``).
Tenant *light* submits one-face image swaps, one at a time (one a second by default,
``--light-every``: an interactive user, not a second flood). A poller GETs a job all along.
Three phases per service, in one run:

1. light alone: ``--light`` jobs, one after another;
2. heavy alone: the heavy work, all submitted at once; its makespan;
3. together: the same heavy work again, while light submits job after job until it ends.

Printed per service: the light job's latency (POST sent -> the job's ``finished_at``,
same clock) p50/p95 alone and beside heavy with their ratios — over all its jobs, and over
those sent while heavy's cap was full (a one-at-a-time client sends few jobs while it
waits, so the waits hide among all its jobs), the API's GET p99 in each
phase, and the heavy tenant's throughput beside light over alone. The goals (issue 27):
light p50 <= 1.5x and p95 <= 2x its idle latency, GET p99 <= 100 ms, heavy >= 0.8x.

Services (``--shape``):
- ``embedded``: ``facegate serve`` with its defaults (SQLite, a local folder; 2 workers and
  the short-job lane in child processes);
- ``cluster``: ``facegate api`` + ``facegate worker`` (any job, concurrency 2) +
  ``facegate worker --lane short`` on a fresh PostgreSQL database (``--postgres``);
- ``--before``: each shape also as the code ran before the scheduling work, in the same
  run: embedded with its workers as threads of the API process and no short lane
  (``FACEGATE_WORKER_PROCESSES=false FACEGATE_SHORT_LANE_WORKERS=0``); cluster with two
  ``facegate worker --concurrency 2`` at nice 0.

    .venv/bin/python benchmarks/noisy_neighbour.py --shape both --before
    .venv/bin/python benchmarks/noisy_neighbour.py --videos 720p:10 --enhance 0   # quick
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import cv2
import httpx
import psycopg
from sqlalchemy.engine import make_url

from benchkit import FACES, load_average
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

SIZES = {"720p": (1280, 720), "1080p": (1920, 1080)}
LIGHT_SOURCE = FACES / "woman_a_selfie_frontal_01.jpg"
LIGHT_TARGET = FACES / "man_frontal_glasses.jpg"
HEAVY_SOURCE = FACES / "woman_b_frontal_dark_background.jpg"


@dataclass
class Phase:
    light: list[float] = field(default_factory=list)
    gets: list[float] = field(default_factory=list)
    heavy_seconds: float | None = None
    failures: int = 0
    #: (started, finished) of each job, epoch seconds
    heavy_spans: list[tuple[float, float]] = field(default_factory=list)
    #: (sent, latency) of each light job
    light_sent: list[tuple[float, float]] = field(default_factory=list)

    def light_at_full_cap(self, cap: int = 2) -> list[float]:
        """The latencies of the light jobs sent while ``cap`` heavy jobs were running: a
        one-at-a-time client sends few jobs while it waits, so the waits are under-sampled
        among all its jobs; these are the ones the scenario is about."""
        return [
            latency
            for sent, latency in self.light_sent
            if sum(start <= sent < end for start, end in self.heavy_spans) >= cap
        ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_tenants(url: str) -> dict[str, str]:
    """Tenants heavy and light with the default caps (2 running); a key of each."""
    migrate(url)
    engine = create_engine_from_url(url)
    keys = {}
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        for tenant in ("heavy", "light"):
            policy = PolicySpec(
                requests_per_minute=1_000_000,
                max_video_seconds=600,
                max_output_resolution="8k",
                max_input_pixels=40_000_000,
                max_input_bytes=1 << 30,
                storage_quota_bytes=1 << 40,
                allowed_processors=["face_swapper", "face_enhancer", "frame_enhancer"],
            )
            service.create_tenant(TenantSpec(id=tenant, policy=policy))
            keys[tenant] = service.create_key(
                tenant, KeyCreate(scopes=["jobs:write", "jobs:read"])
            ).token
    engine.dispose()
    return keys


def heavy_inputs(tmp: Path, videos: list[str], enhance: int) -> list[tuple[Path, dict[str, str]]]:
    """The heavy tenant's work: (target file, form fields) per job."""
    work: list[tuple[Path, dict[str, str]]] = []
    for entry in videos:
        name, _, seconds = entry.partition(":")
        width, height = SIZES[name]
        path = tmp / f"heavy-{name}-{seconds}s.mp4"
        if not path.exists():
            make_face_clip(
                path, HEAVY_SOURCE, ClipSpec(seconds=float(seconds), width=width, height=height)
            )
        work.append((path, {}))
    for n in range(enhance):
        path = tmp / f"heavy-4k-{n}.jpg"
        photo = cv2.imread(str(HEAVY_SOURCE))
        cv2.imwrite(str(path), cv2.resize(photo, (3840, 2160)), [cv2.IMWRITE_JPEG_QUALITY, 90])
        work.append((path, {"options": '{"processors": ["frame_enhancer"]}'}))
    return work


def submit(
    client: httpx.Client, key: str, target: Path, fields: dict[str, str], source: Path | None
) -> str:
    files = {"target": target.read_bytes()}
    if source is not None:
        files["source"] = source.read_bytes()
    answer = client.post(
        "/v1/jobs",
        headers={"Authorization": f"Bearer {key}"},
        files={name: (name, data) for name, data in files.items()},
        data=fields,
    )
    if answer.status_code != 202:
        raise RuntimeError(f"POST /v1/jobs {answer.status_code}: {answer.text}")
    return str(answer.json()["id"])


def wait_finished(
    client: httpx.Client, key: str, job: str, timeout: float = 3600
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {key}"}).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return dict(body)
        time.sleep(0.02)
    raise TimeoutError(job)


def epoch(body: dict[str, Any], name: str = "finished_at") -> float:
    return datetime.fromisoformat(body[name].replace("Z", "+00:00")).timestamp()


def span(body: dict[str, Any]) -> tuple[float, float]:
    """(started, finished) of a finished job."""
    return epoch(body, "started_at"), epoch(body)


def light_job(client: httpx.Client, key: str, phase: Phase) -> None:
    sent = time.time()
    job = submit(client, key, LIGHT_TARGET, {}, LIGHT_SOURCE)
    body = wait_finished(client, key, job)
    if body["status"] != "succeeded":
        phase.failures += 1
        return
    phase.light.append(epoch(body) - sent)
    phase.light_sent.append((sent, epoch(body) - sent))


def heavy_run(
    client: httpx.Client, key: str, work: list[tuple[Path, dict[str, str]]], phase: Phase
) -> float:
    """Submit all the heavy work at once; seconds from the first POST to the last end."""
    sent = time.time()
    jobs = [
        submit(client, key, target, fields, None if fields else HEAVY_SOURCE)
        for target, fields in work
    ]
    ends = []
    for job in jobs:
        body = wait_finished(client, key, job)
        if body["status"] != "succeeded":
            raise RuntimeError(f"heavy job {job} {body['status']}: {body.get('error')}")
        ends.append(epoch(body))
        phase.heavy_spans.append(span(body))
    return max(ends) - sent


@contextmanager
def polling(base: str, key: str, phase: Phase) -> Iterator[None]:
    """GET one of the light tenant's jobs every 50 ms, timing each, while the block runs."""
    stop = threading.Event()
    with httpx.Client(base_url=base, timeout=60) as client:
        job = submit(client, key, LIGHT_TARGET, {}, LIGHT_SOURCE)
        wait_finished(client, key, job)

        def loop() -> None:
            while not stop.wait(0.05):
                began = time.perf_counter()
                client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {key}"})
                phase.gets.append(time.perf_counter() - began)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def paced(every: float) -> Iterator[None]:
    """Yield at most once per ``every`` seconds (a user submitting one job at a time)."""
    while True:
        began = time.monotonic()
        yield
        time.sleep(max(0.0, every - (time.monotonic() - began)))


def run_phases(
    base: str,
    keys: dict[str, str],
    work: list[tuple[Path, dict[str, str]]],
    light: int,
    every: float,
) -> dict[str, Phase]:
    phases = {"light alone": Phase(), "heavy alone": Phase(), "together": Phase()}
    with httpx.Client(base_url=base, timeout=120) as client:
        # Warm-up: models loaded in every worker process (the short lane and the general
        # workers: jobs sent at once, so that more than one worker takes one), twice.
        for _ in range(2):
            warm = [submit(client, keys["light"], LIGHT_TARGET, {}, LIGHT_SOURCE) for _ in range(4)]
            for job in warm:
                wait_finished(client, keys["light"], job)
        phase = phases["light alone"]
        with polling(base, keys["light"], phase):
            for _, _tick in zip(range(light), paced(every), strict=False):
                light_job(client, keys["light"], phase)
        phase = phases["heavy alone"]
        with polling(base, keys["light"], phase):
            phase.heavy_seconds = heavy_run(client, keys["heavy"], work, phase)
        phase = phases["together"]
        done = threading.Event()

        def heavy() -> None:
            with httpx.Client(base_url=base, timeout=120) as heavy_client:
                phase.heavy_seconds = heavy_run(heavy_client, keys["heavy"], work, phase)
            done.set()

        with polling(base, keys["light"], phase):
            thread = threading.Thread(target=heavy, daemon=True)
            thread.start()
            time.sleep(1.0)  # the heavy work is claimed and running
            for _tick in paced(every):
                if done.is_set():
                    break
                light_job(client, keys["light"], phase)
            thread.join()
    return phases


def base_env(tmp: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "FACEGATE_DATABASE_URL": database_url,
        "FACEGATE_STORAGE_URL": f"file://{tmp}/storage",
        "FACEGATE_DATA_DIR": str(tmp),
        "FACEGATE_MODELS_DIR": str(tmp / "models"),
        "FACEGATE_PROVENANCE_DIR": str(tmp / "provenance"),
        "FACEGATE_LOG_LEVEL": "warning",
        "FACEGATE_ACCESS_LOG": "false",
        "FACEGATE_RATE_LIMIT_ENABLED": "false",
    }


def facegate(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-c", "from facegate.cli import main; main()", *args],
            env=env,
            stdout=output,
            stderr=output,
        )


def wait_healthy(base: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{base} did not start")


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def fresh_postgres(url: str, name: str) -> str:
    admin = make_url(url).set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def measure(shape: str, before: bool, args: argparse.Namespace, media: Path) -> dict[str, Phase]:
    work = heavy_inputs(media, args.videos, args.enhance)
    with tempfile.TemporaryDirectory(prefix="facegate-nn-") as folder:
        tmp = Path(folder)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp / "service.log"
        processes: list[subprocess.Popen[bytes]] = []
        try:
            if shape == "embedded":
                url = f"sqlite:///{tmp}/facegate.db"
                keys = make_tenants(url)
                env = base_env(tmp, url)
                if before:
                    env |= {
                        "FACEGATE_WORKER_PROCESSES": "false",
                        "FACEGATE_SHORT_LANE_WORKERS": "0",
                    }
                processes.append(facegate("serve", "--port", str(port), env=env, log=log))
            else:
                url = fresh_postgres(args.postgres, "facegate_noisy_neighbour")
                keys = make_tenants(url)
                env = base_env(tmp, url)
                facegate("provenance", "init", env=env, log=log).wait(60)
                processes.append(
                    facegate(
                        "api", "--port", str(port), env=env | {"FACEGATE_WORKERS": "0"}, log=log
                    )
                )
                if before:
                    nice0 = env | {"FACEGATE_WORKER_NICE": "0"}
                    lanes = [["--concurrency", "2"], ["--concurrency", "2"]]
                else:
                    nice0 = env
                    lanes = [["--concurrency", "2"], ["--lane", "short", "--concurrency", "1"]]
                processes += [facegate("worker", *lane, env=nice0, log=log) for lane in lanes]
            wait_healthy(base)
            return run_phases(base, keys, work, args.light, args.light_every)
        finally:
            stop_all(processes)
            errors = [line for line in log.read_text().splitlines() if '"error"' in line]
            for line in errors[:5]:
                print("  log:", line[:300])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, phases: dict[str, Phase]) -> None:
    alone, heavy, together = phases["light alone"], phases["heavy alone"], phases["together"]
    p50a, p95a = statistics.median(alone.light), pct(alone.light, 0.95)
    full = together.light_at_full_cap()
    throughput = (heavy.heavy_seconds or 0) / (together.heavy_seconds or float("inf"))
    get99 = max(pct(p.gets, 0.99) for p in phases.values())
    print(f"\n== {name}  ({load_average()})")
    print(f"  light job   {'alone':<17} p50 {p50a:.3f} s  p95 {p95a:.3f} s  (n={len(alone.light)})")
    for label, values in (("beside heavy, all", together.light), ("heavy's cap full", full)):
        if not values:
            print(f"  light job   {label:<17} none sent")
            continue
        p50, p95 = statistics.median(values), pct(values, 0.95)
        print(
            f"  light job   {label:<17} p50 {p50:.3f} s  p95 {p95:.3f} s  (n={len(values)}): "
            f"x{p50 / p50a:.2f} / x{p95 / p95a:.2f} (goals <= 1.5 / 2), max {max(values):.1f} s"
        )
    print(f"  light fails {together.failures}")
    print(
        "  GET p99     "
        + "  ".join(f"{k}: {pct(p.gets, 0.99) * 1000:.0f} ms" for k, p in phases.items())
        + f"   max {get99 * 1000:.0f} ms (goal <= 100)"
    )
    print(
        f"  heavy       alone {heavy.heavy_seconds:.1f} s, beside light "
        f"{together.heavy_seconds:.1f} s: throughput x{throughput:.2f} (goal >= 0.8)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=["embedded", "cluster", "both"], default="both")
    parser.add_argument(
        "--videos",
        nargs="*",
        default=["720p:60", "1080p:60"],
        help="heavy videos as RESOLUTION:SECONDS (720p, 1080p)",
    )
    parser.add_argument("--enhance", type=int, default=1, help="4K frame-enhance jobs of heavy")
    parser.add_argument("--light", type=int, default=20, help="light jobs in the idle phase")
    parser.add_argument(
        "--light-every",
        type=float,
        default=1.0,
        help="seconds between the light tenant's submissions (one job at a time; 0: back to back)",
    )
    parser.add_argument("--before", action="store_true", help="also the pre-change set-up")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    shapes = ["embedded", "cluster"] if args.shape == "both" else [args.shape]
    print(f"heavy: videos {args.videos}, 4K enhance x{args.enhance}; light: one-face image swaps")
    with tempfile.TemporaryDirectory(prefix="facegate-nn-media-") as media:
        for shape in shapes:
            for before in [True, False] if args.before else [False]:
                label = f"{shape}, {'before (threads / no lane)' if before else 'now'}"
                report(label, measure(shape, before, args, Path(media)))


if __name__ == "__main__":
    main()
