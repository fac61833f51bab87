"""Batches through the API, and the specification's studio flow end to end: a director key
saves two faces; an editor key runs a batch of 20 targets with them; a viewer key sees the
results but can't delete a face; the webhook receiver gets signed, verifiable events (each
job and batch.completed); another tenant sees none of it. Then cancel, the queue cap
counting every item (a batch over it is refused whole), idempotency."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, count_jobs, count_objects, photo
from tests.webhooks.receiver import receiving

from dbkit import drop_database, fresh_database
from facegate.database import create_engine_from_url
from facegate.webhooks.runtime import deliveries_service
from facegate.webhooks.signing import verify
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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    engine, url, schema = fresh_database(request.param, tmp_path, name="batches", what="batch")
    engine.dispose()
    yield url
    drop_database(create_engine_from_url(url), schema)


def batch_files(targets: list[bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("target", (f"t{i}.jpg", data, "image/jpeg")) for i, data in enumerate(targets)]


async def save_face(h: Any, headers: dict[str, str], name: str, image: bytes) -> str:
    saved = await h.client.post(
        "/v1/faces/library",
        headers=headers,
        files={"image": ("f.jpg", image, "image/jpeg")},
        data={"name": name},
    )
    assert saved.status_code == 201, saved.text
    face_id: str = saved.json()["id"]
    return face_id


async def wait_batch(h: Any, headers: dict[str, str], batch_id: str) -> dict[str, Any]:
    for _ in range(3000):
        batch: dict[str, Any] = (
            await h.client.get(f"/v1/batches/{batch_id}", headers=headers)
        ).json()
        if batch["status"] == "completed":
            return batch
        await asyncio.sleep(0.1)
    raise AssertionError(f"batch {batch_id} did not complete: {batch['counts']}")


async def test_the_studio_flow(make_client: Any, database_url: str) -> None:
    overrides = {
        "database_url": database_url,
        "workers": 2,
        "job_poll_seconds": 0.05,
        "webhook_poll_seconds": 0.05,
        "webhook_allowed_networks": ["127.0.0.1/32"],
    }
    with receiving() as receiver:
        async with make_client(services=[workers_service, deliveries_service], **overrides) as h:
            policy = {**DEBUG_TENANT_POLICY, "max_concurrent_jobs": 2}
            h.create_tenant("studio", **policy)
            h.create_tenant("rival", **policy)
            director = h.headers("studio", ("director",))
            editor = h.headers("studio", ("editor",))
            viewer = h.headers("studio", ("viewer",))
            admin = h.headers("studio", ("tenant:admin",))
            rival = h.headers("rival", ("director", "tenant:admin"))
            secret = (
                await h.client.post("/v1/webhooks", headers=admin, json={"url": receiver.url})
            ).json()["secret"]

            faces = [
                await save_face(h, director, "Lead", photo("woman_a_selfie_frontal_01.jpg")),
                await save_face(h, director, "Double", photo("man_frontal_glasses.jpg")),
            ]
            targets = [photo(TARGETS[i % len(TARGETS)], width=160 + i) for i in range(20)]
            submitted = await h.client.post(
                "/v1/batches",
                headers={**editor, "Idempotency-Key": "shoot-01"},
                files=batch_files(targets),
                data={"options": SWAP, "source_face_id": faces},
            )
            assert submitted.status_code == 202, submitted.text
            batch_id = submitted.json()["id"]
            assert submitted.json()["total"] == 20
            batch = await wait_batch(h, viewer, batch_id)
            assert batch["counts"]["succeeded"] == 20, batch["counts"]
            assert batch["progress"] == 1.0
            assert [item["position"] for item in batch["items"]] == list(range(20))

            # The viewer downloads the archive: each entry is that item's result.
            archive = await h.client.get(f"/v1/batches/{batch_id}/archive", headers=viewer)
            assert archive.status_code == 200
            assert archive.headers["content-type"] == "application/zip"
            with zipfile.ZipFile(io.BytesIO(archive.content)) as zipped:
                names = zipped.namelist()
                assert len(names) == 20
                first = batch["items"][0]
                assert names[0] == f"000-{first['job_id']}.jpg"
                result = await h.client.get(first["result"], headers=viewer)
                assert zipped.read(names[0]) == result.content
            # ... but may not delete a face; the editor may not either.
            for headers in (viewer, editor):
                refused = await h.client.delete(f"/v1/faces/library/{faces[0]}", headers=headers)
                assert refused.status_code == 403

            # Another tenant sees none of it.
            for path in (f"/v1/batches/{batch_id}", f"/v1/batches/{batch_id}/archive"):
                assert (await h.client.get(path, headers=rival)).status_code == 404
            assert (await h.client.get("/v1/batches", headers=rival)).json() == []
            assert (await h.client.get("/v1/faces/library", headers=rival)).json() == []
            assert (await h.client.get("/v1/webhooks/deliveries", headers=rival)).json() == []
            stolen = await h.client.post(
                "/v1/batches",
                headers=rival,
                files=batch_files(targets[:1]),
                data={"options": SWAP, "source_face_id": faces[:1]},
            )
            assert stolen.status_code == 404

            # The receiver got 20 job events and one batch.completed, all signed.
            messages = receiver.wait_for(21, timeout=60)
            assert len(messages) == 21
            for message in messages:
                verify(secret, message.headers, message.body)
            events = [json.loads(m.body) for m in messages]
            types = sorted(event["type"] for event in events)
            assert types == ["batch.completed"] + ["job.succeeded"] * 20
            [done] = [event for event in events if event["type"] == "batch.completed"]
            assert done["data"]["id"] == batch_id
            assert done["data"]["counts"]["succeeded"] == 20
            job_ids = {item["job_id"] for item in batch["items"]}
            assert {e["data"]["id"] for e in events if e["type"] != "batch.completed"} == job_ids

            # The same Idempotency-Key and content: the same batch, nothing new queued.
            again = await h.client.post(
                "/v1/batches",
                headers={**editor, "Idempotency-Key": "shoot-01"},
                files=batch_files(targets),
                data={"options": SWAP, "source_face_id": faces},
            )
            assert again.status_code == 200
            assert again.json()["id"] == batch_id


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
