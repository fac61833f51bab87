"""Batches through the API: cancel, the queue cap counting every item (a batch over it is
refused whole), idempotency, refusals; a batch's items analyse their source once. The
specification's studio flow with batches, faces, roles and webhooks end to end is
tests/studio/test_studio_flow.py."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from PIL import Image
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, count_jobs, count_objects, photo

from facegate.engine.faces import FaceAnalyser
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(400)

SWAP = json.dumps({"processors": ["face_swapper"]})
DEBUG = json.dumps({"processors": ["face_debugger"]})
TARGETS = [
    "woman_astronaut_frontal.jpg",
    "man_frontal_glasses.jpg",
    "woman_b_frontal_dark_background.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "man_frontal_beard_closeup.jpg",
]


def batch_files(targets: list[bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("target", (f"t{i}.jpg", data, "image/jpeg")) for i, data in enumerate(targets)]


async def test_cancel_caps_and_refusals(make_client: Any) -> None:
    async with make_client() as h:  # no workers: items stay queued until cancelled
        h.create_tenant("studio", **DEBUG_TENANT_POLICY, max_queued_jobs=4)
        editor = h.headers("studio", ("editor",))
        targets = [photo(name) for name in TARGETS[:3]]
        submitted = await h.client.post(
            "/v1/batches",
            headers={**editor, "Idempotency-Key": "k1"},
            files=batch_files(targets),
            data={"options": DEBUG},
        )
        assert submitted.status_code == 202, submitted.text
        batch = submitted.json()
        assert batch["status"] == "running"
        assert batch["counts"]["queued"] == 3
        none_yet = await h.client.get(f"/v1/batches/{batch['id']}/archive", headers=editor)
        assert none_yet.status_code == 409

        reused = await h.client.post(
            "/v1/batches",
            headers={**editor, "Idempotency-Key": "k1"},
            files=batch_files(targets[:2]),
            data={"options": DEBUG},
        )
        assert reused.status_code == 422
        assert reused.json()["type"].endswith("idempotency-key-reused")

        # 3 queued + 3 more is over max_queued_jobs 4: refused whole, nothing stored.
        jobs, objects = count_jobs(h.state), count_objects(h.state)
        over = await h.client.post(
            "/v1/batches", headers=editor, files=batch_files(targets), data={"options": DEBUG}
        )
        assert over.status_code == 429
        assert over.json()["limit"] == "max_queued_jobs"
        assert (count_jobs(h.state), count_objects(h.state)) == (jobs, objects)

        both = await h.client.post(
            "/v1/batches",
            headers=editor,
            files=[("source", ("s.jpg", photo(), "image/jpeg")), *batch_files(targets[:1])],
            data={"options": DEBUG, "source_face_id": "6f1c1f7e-4d7a-4a8e-9c55-0d5d2b8e1a10"},
        )
        assert both.status_code == 422

        cancelled = await h.client.delete(f"/v1/batches/{batch['id']}", headers=editor)
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "completed"
        assert cancelled.json()["counts"]["cancelled"] == 3
        viewer = h.headers("studio", ("viewer",))
        assert (
            await h.client.delete(f"/v1/batches/{batch['id']}", headers=viewer)
        ).status_code == 403
        listed = (await h.client.get("/v1/batches", headers=viewer)).json()
        assert [b["id"] for b in listed] == [batch["id"]]


async def test_a_batch_analyses_its_source_once(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = photo("woman_a_selfie_frontal_01.jpg", width=200)
    source_shape = photo_shape(source)
    analysed: list[tuple[int, ...]] = []
    real = FaceAnalyser.analyse

    def counting(self: FaceAnalyser, frame: Any) -> Any:
        analysed.append(frame.shape)
        return real(self, frame)

    monkeypatch.setattr(FaceAnalyser, "analyse", counting)
    overrides = {"workers": 2, "job_poll_seconds": 0.05}
    async with make_client(services=[workers_service], **overrides) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        editor = h.headers("studio", ("editor",))
        targets = [photo(name) for name in TARGETS[:4]]
        submitted = await h.client.post(
            "/v1/batches",
            headers=editor,
            files=[("source", ("s.jpg", source, "image/jpeg")), *batch_files(targets)],
            data={"options": SWAP},
        )
        assert submitted.status_code == 202, submitted.text
        for _ in range(1200):
            batch = await h.client.get(f"/v1/batches/{submitted.json()['id']}", headers=editor)
            if batch.json()["status"] == "completed":
                break
            await asyncio.sleep(0.1)
        assert batch.json()["counts"]["succeeded"] == 4, batch.json()
    assert all(shape != source_shape for shape in (photo_shape(t) for t in targets))
    assert analysed.count(source_shape) == 1  # four items, one analysis of their source
    assert len(analysed) == 1 + 4  # and each target once


def photo_shape(data: bytes) -> tuple[int, ...]:
    return (*Image.open(io.BytesIO(data)).size[::-1], 3)
