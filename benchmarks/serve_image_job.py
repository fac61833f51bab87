"""One image job through a real ``facegate serve`` (embedded shape: SQLite, a local folder,
its worker processes), one at a time: POST sent -> the job's ``finished_at`` (the server's
clock, the same machine), started -> finished, and the runner's own ``compute_seconds``.
Prints numbers; asserts nothing.

The job is the engine benchmark's close-up (``engine_bench.py --cases job``): the bearded man
fitted into 1920x1080 as a JPEG target, the selfie as the source, default options, so the
quality report and the moderation of inputs and output run. ``--source new`` re-encodes the
selfie for every job (another sha256: the workers have not seen it, so its analysis,
moderation and report descriptor are made in the job); ``same`` sends one source throughout
(cached after the first job). The first ``--warm`` jobs are not counted (each worker process
builds its graphs on its first job). The client polls every ``--poll`` seconds: polling
often is CPU taken from the job on a 2-core machine.

``--baseline SRC`` runs a second source tree (e.g. a worktree of main) as its own server,
alternating with this one ``--rounds`` times, so both see the same machine.

    .venv/bin/python benchmarks/serve_image_job.py [--jobs 16] [--source new|same]
        [--rounds 3] [--baseline OTHER/src]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import httpx

import noisy_neighbour as nn
from benchkit import FACES, load_average, read_frame, source_trees
from engine_bench import at_1080p


def inputs(jobs: int, new_source: bool) -> tuple[bytes, list[bytes]]:
    """The target's bytes and one source's per job."""
    closeup = at_1080p(read_frame(FACES / "man_frontal_beard_closeup.jpg"))
    target = cv2.imencode(".jpg", closeup, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()
    selfie = read_frame(FACES / "woman_a_selfie_frontal_01.jpg")
    # JPEG qualities 70..99 give other bytes each (the service keys a source by its sha256)
    qualities = [70 + (n % 30) for n in range(jobs)] if new_source else [90] * jobs
    sources = [
        cv2.imencode(".jpg", selfie, [cv2.IMWRITE_JPEG_QUALITY, q])[1].tobytes() for q in qualities
    ]
    return target, sources


def wait_finished(client: httpx.Client, key: str, job: str, poll: float) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        body = client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {key}"}).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return dict(body)
        time.sleep(poll)
    raise TimeoutError(job)


def run(src: Path, args: argparse.Namespace) -> dict[str, float]:
    """The medians (ms) of one server of the tree ``src``."""
    target, sources = inputs(args.warm + args.jobs, args.source == "new")
    with tempfile.TemporaryDirectory(prefix="facegate-serve-job-") as folder:
        tmp = Path(folder)
        port = nn.free_port()
        base = f"http://127.0.0.1:{port}"
        url = f"sqlite:///{tmp}/facegate.db"
        keys = nn.make_tenants(url)
        env = nn.base_env(tmp, url) | {"PYTHONPATH": str(src)}
        server = nn.facegate("serve", "--port", str(port), env=env, log=tmp / "service.log")
        sent_to_end, started_to_end, compute = [], [], []
        try:
            nn.wait_healthy(base)
            key = keys["light"]
            with httpx.Client(base_url=base, timeout=60) as client:
                for n, source in enumerate(sources):
                    sent = time.time()
                    answer = client.post(
                        "/v1/jobs",
                        headers={"Authorization": f"Bearer {key}"},
                        files={"target": ("target.jpg", target), "source": ("source.jpg", source)},
                    )
                    if answer.status_code != 202:
                        raise RuntimeError(f"POST /v1/jobs {answer.status_code}: {answer.text}")
                    body = wait_finished(client, key, answer.json()["id"], args.poll)
                    if body["status"] != "succeeded":
                        raise RuntimeError(f"job {body['status']}: {body.get('error')}")
                    if n >= args.warm:
                        sent_to_end.append(nn.epoch(body) - sent)
                        started_to_end.append(nn.epoch(body) - nn.epoch(body, "started_at"))
                        compute.append(float(body["result"]["compute_seconds"]))
        finally:
            nn.stop_all([server])

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    return {
        "sent -> finished": ms(sent_to_end),
        "started -> finished": ms(started_to_end),
        "compute": ms(compute),
        "sent min": min(sent_to_end) * 1000,
        "sent max": max(sent_to_end) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--warm", type=int, default=6, help="first jobs not counted")
    parser.add_argument("--source", choices=["new", "same"], default="new")
    parser.add_argument("--poll", type=float, default=0.3, help="seconds between GETs")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another src/ folder, run alternating")
    args = parser.parse_args()
    trees = source_trees(args.baseline)
    print(f"{args.jobs} jobs a server ({args.source} source each job), cpus {os.cpu_count()}")
    for round_ in range(args.rounds):
        for label, src in trees.items():
            found = run(src, args)
            print(
                f"round {round_ + 1} {label:9s}: POST sent -> finished p50 "
                f"{found['sent -> finished']:.0f} ms (min {found['sent min']:.0f}, max "
                f"{found['sent max']:.0f}), started -> finished {found['started -> finished']:.0f} "
                f"ms, the runner's compute {found['compute']:.0f} ms, {load_average()}"
            )


if __name__ == "__main__":
    main()
