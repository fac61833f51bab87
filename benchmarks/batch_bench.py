"""Batch throughput against separate jobs, in-process, one run: ``--items`` one-face 1080p
targets (default 20) swapped with one source face, submitted as one ``POST /v1/batches``
and as that many ``POST /v1/jobs``, each until every result is stored, by the same embedded
workers. Rounds alternate the order (separate, batch, batch, separate...) so drift on a
shared machine hits both; wall time and the process's CPU time are printed, the ratio
batch / separate (target <= 1.2), and how many times each run analysed the source image (the
workers' source cache: once per run for the batch; the separate jobs send the same bytes, so
they share it too).

    .venv/bin/python benchmarks/batch_bench.py [--items 20] [--rounds 2] [--workers 2]

Measured on the shared 2-core development VM (other test runs beside it, load 5 to 11; the
wall times move with it, the CPU times much less), per 20 items:

- before the source cache: separate 10.4 s wall / 8.8 s CPU, batch 11.1 s / 8.9 s: 1.07 wall,
  1.01 CPU, the source analysed 20 times by each;
- with it (2 rounds): separate 14.6 s / 10.5 s, batch 11.4 s / 8.7 s: 0.78 wall, 0.83 CPU;
  (3 rounds) separate 21.0 s / 10.3 s, batch 19.9 s / 9.3 s: 0.95 wall, 0.91 CPU; the source
  analysed once per run by each.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from benchkit import FACES, bench_settings, like_a_facegate_process
from facegate.api.app import create_app
from facegate.database import session_scope
from facegate.engine.faces import FaceAnalyser
from facegate.engine.types import Face, Frame
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

TARGET_RATIO = 1.2
TARGET_SHAPE = (1080, 1920, 3)
# Frames the analyser saw that are not a 1080p target: the source image's analyses.
source_analyses = [0]


def count_source_analyses() -> None:
    real = FaceAnalyser.analyse

    def counting(
        self: FaceAnalyser, frame: Frame, timings: dict[str, float] | None = None
    ) -> list[Face]:
        if frame.shape != TARGET_SHAPE:
            source_analyses[0] += 1
        return real(self, frame, timings)

    # The app builds its analyser inside; the class's method is wrapped for this process.
    FaceAnalyser.analyse = counting  # type: ignore[method-assign]  # mypy: methods are read-only


OPTIONS = json.dumps({"processors": ["face_swapper"]})
TARGETS = [
    "woman_astronaut_frontal.jpg",
    "man_frontal_glasses.jpg",
    "woman_b_frontal_dark_background.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "man_frontal_beard_closeup.jpg",
]


def source_variant(source: bytes, run: int) -> bytes:
    """The source photo re-encoded for one run: other bytes, so each run starts with the
    workers' source cache cold, as a new batch would."""
    out = io.BytesIO()
    Image.open(io.BytesIO(source)).convert("RGB").save(out, "JPEG", quality=95 - run)
    return out.getvalue()


def target_1080p(name: str) -> bytes:
    """A one-face photo letterboxed into 1920x1080."""
    photo = Image.open(FACES / name).convert("RGB")
    photo.thumbnail((1920, 1080))
    canvas = Image.new("RGB", (1920, 1080), (40, 40, 40))
    canvas.paste(photo, ((1920 - photo.width) // 2, (1080 - photo.height) // 2))
    out = io.BytesIO()
    canvas.save(out, "JPEG", quality=90)
    return out.getvalue()


async def wait_jobs(client: httpx.AsyncClient, headers: dict[str, str], ids: list[str]) -> None:
    pending = set(ids)
    while pending:
        for job_id in list(pending):
            status = (await client.get(f"/v1/jobs/{job_id}", headers=headers)).json()["status"]
            if status in {"succeeded", "failed", "cancelled"}:
                if status != "succeeded":
                    raise SystemExit(f"job {job_id} ended {status}")
                pending.discard(job_id)
        await asyncio.sleep(0.1)


async def separate(
    client: httpx.AsyncClient, headers: dict[str, str], source: bytes, targets: list[bytes]
) -> None:
    ids = []
    for target in targets:
        answer = await client.post(
            "/v1/jobs",
            headers=headers,
            files=[
                ("source", ("s.jpg", source, "image/jpeg")),
                ("target", ("t.jpg", target, "image/jpeg")),
            ],
            data={"options": OPTIONS},
        )
        ids.append(answer.json()["id"])
    await wait_jobs(client, headers, ids)


async def batch(
    client: httpx.AsyncClient, headers: dict[str, str], source: bytes, targets: list[bytes]
) -> None:
    files = [("source", ("s.jpg", source, "image/jpeg"))]
    files += [("target", (f"t{i}.jpg", data, "image/jpeg")) for i, data in enumerate(targets)]
    answer = await client.post(
        "/v1/batches", headers=headers, files=files, data={"options": OPTIONS}
    )
    if answer.status_code != 202:
        raise SystemExit(f"the batch was refused: {answer.text}")
    batch_id = answer.json()["id"]
    while True:
        state = (await client.get(f"/v1/batches/{batch_id}", headers=headers)).json()
        if state["status"] == "completed":
            if state["counts"]["succeeded"] != len(targets):
                raise SystemExit(f"batch ended {state['counts']}")
            return
        await asyncio.sleep(0.1)


async def main(items: int, rounds: int, workers: int) -> None:
    print(like_a_facegate_process())
    count_source_analyses()
    source = (FACES / "woman_a_selfie_frontal_01.jpg").read_bytes()
    targets = [target_1080p(TARGETS[i % len(TARGETS)]) for i in range(items)]
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(
            Path(tmp), workers=workers, job_poll_seconds=0.05, rate_limit_enabled=False
        )
        app = create_app(settings)
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app):
            state = app.state.facegate
            policy: dict[str, Any] = {"max_concurrent_jobs": workers, "max_queued_jobs": 1000}
            spec = TenantSpec.model_validate(
                {"id": "bench", "policy": PolicySpec.model_validate(policy)}
            )
            with session_scope(state.session_factory) as session:
                service = TenancyService(session)
                service.create_tenant(spec)
                token = service.create_key(
                    "bench", KeyCreate(scopes=["jobs:write", "jobs:read"])
                ).token
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                warm = source_variant(source, 0)
                await separate(client, headers, warm, targets[:1])  # warm the models
                totals = {"separate": [0.0, 0.0], "batch": [0.0, 0.0]}
                order = ["separate", "batch"]
                for round_ in range(rounds):
                    for name in order if round_ % 2 == 0 else order[::-1]:
                        run = separate if name == "separate" else batch
                        fresh = source_variant(source, 1 + round_ * 2 + (name == "batch"))
                        analyses = source_analyses[0]
                        wall, cpu = time.perf_counter(), time.process_time()
                        await run(client, headers, fresh, targets)
                        totals[name][0] += time.perf_counter() - wall
                        totals[name][1] += time.process_time() - cpu
                        print(
                            f"round {round_ + 1} {name:8s}: {totals[name][0]:.1f} s wall so far, "
                            f"source analysed {source_analyses[0] - analyses}x in this run"
                        )
    for name, (wall, cpu) in totals.items():
        print(
            f"{name:8s}: {wall / rounds:6.1f} s wall, {cpu / rounds:6.1f} s CPU per {items} items"
        )
    ratio = totals["batch"][0] / totals["separate"][0]
    cpu_ratio = totals["batch"][1] / totals["separate"][1]
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
    print(
        f"batch / separate: {ratio:.2f} wall, {cpu_ratio:.2f} CPU "
        f"(target <= {TARGET_RATIO}: {verdict})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.items, args.rounds, args.workers))
