"""The specification's studio flow, end to end through the API, on SQLite and PostgreSQL:
a director key saves two faces; an editor key runs a batch of 20 targets with them; a
viewer key sees the results but can't delete a face (403, problem+json); the webhook
receiver (a real HTTP server on an allow-listed loopback address) gets one signed event per
item and ``batch.completed``, each verified with ``facegate.client.verify_webhook``; the
audit names the acting key of each step; another tenant sees none of it (404s, empty
lists, its own receiver gets nothing)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo, wait_batch
from tests.webhooks.receiver import receiving

from dbkit import drop_database, fresh_database
from facegate.client import InvalidSignature, verify_webhook
from facegate.database import create_engine_from_url
from facegate.webhooks.runtime import deliveries_service
from facegate.webhooks.signing import new_secret
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(400)

SWAP = json.dumps({"processors": ["face_swapper"], "selector": {"mode": "many"}})
TARGETS = [
    "woman_astronaut_frontal.jpg",
    "man_frontal_glasses.jpg",
    "woman_b_frontal_dark_background.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "man_frontal_beard_closeup.jpg",
]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    engine, url, schema = fresh_database(request.param, tmp_path, name="studio", what="studio")
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
        data={"name": name, "labels": '["s01"]'},
    )
    assert saved.status_code == 201, saved.text
    face_id: str = saved.json()["id"]
    return face_id


async def actor_of(h: Any, headers: dict[str, str]) -> str:
    actor: str = (await h.client.get("/v1/me", headers=headers)).json()["actor"]
    return actor


def assert_forbidden(response: Any) -> None:
    assert response.status_code == 403, response.text
    assert is_problem(response)
    assert response.json()["type"].endswith("forbidden")


async def test_the_studio_flow(make_client: Any, database_url: str) -> None:
    overrides = {
        "database_url": database_url,
        "workers": 2,
        "job_poll_seconds": 0.05,
        "webhook_poll_seconds": 0.05,
        "webhook_allowed_networks": ["127.0.0.1/32:*"],  # receivers on free ports
    }
    services = [workers_service, deliveries_service]
    with receiving() as receiver, receiving() as rival_receiver:
        async with make_client(services=services, **overrides) as h:
            policy = {**DEBUG_TENANT_POLICY, "max_concurrent_jobs": 2}
            h.create_tenant("studio", **policy)
            h.create_tenant("rival", **policy)
            director = h.headers("studio", ("director",))
            editor = h.headers("studio", ("editor",))
            viewer = h.headers("studio", ("viewer",))
            admin = h.headers("studio", ("tenant:admin",))
            rival = h.headers("rival", ("director", "tenant:admin"))
            created = await h.client.post("/v1/webhooks", headers=admin, json={"url": receiver.url})
            assert created.status_code == 201, created.text
            secret = created.json()["secret"]
            rival_hook = await h.client.post(
                "/v1/webhooks", headers=rival, json={"url": rival_receiver.url}
            )
            assert rival_hook.status_code == 201, rival_hook.text

            # The director saves two faces; the editor may not save, export or delete one.
            faces = [
                await save_face(h, director, "Lead", photo("woman_a_selfie_frontal_01.jpg")),
                await save_face(h, director, "Double", photo("man_frontal_glasses.jpg")),
            ]
            assert_forbidden(
                await h.client.post(
                    "/v1/faces/library",
                    headers=editor,
                    files={"image": ("f.jpg", photo(), "image/jpeg")},
                    data={"name": "Extra"},
                )
            )
            for refused in (
                await h.client.delete(f"/v1/faces/library/{faces[0]}", headers=editor),
                await h.client.get(f"/v1/faces/library/{faces[0]}/image", headers=editor),
            ):
                assert_forbidden(refused)

            # The editor runs a batch of 20 targets with both faces.
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
            assert submitted.headers["location"] == f"/v1/batches/{batch_id}"

            # The viewer follows it, reads every result and the archive...
            batch = await wait_batch(h.client, viewer, batch_id)
            assert batch["counts"]["succeeded"] == 20, batch["counts"]
            assert batch["progress"] == 1.0
            assert [item["position"] for item in batch["items"]] == list(range(20))
            job_ids = [item["job_id"] for item in batch["items"]]
            results = {}
            for item in batch["items"]:
                result = await h.client.get(item["result"], headers=viewer)
                assert result.status_code == 200
                assert result.content[:2] == b"\xff\xd8"  # a JPEG
                results[item["job_id"]] = result.content
            job = (await h.client.get(f"/v1/jobs/{job_ids[0]}", headers=viewer)).json()
            assert job["status"] == "succeeded"
            listed = (await h.client.get("/v1/jobs?limit=100", headers=viewer)).json()
            assert {j["id"] for j in listed["items"]} == set(job_ids)
            archive = await h.client.get(f"/v1/batches/{batch_id}/archive", headers=viewer)
            assert archive.status_code == 200
            assert archive.headers["content-type"] == "application/zip"
            with zipfile.ZipFile(io.BytesIO(archive.content)) as zipped:
                names = zipped.namelist()
                assert names == [f"{i:03d}-{jid}.jpg" for i, jid in enumerate(job_ids)]
                for name, job_id in zip(names, job_ids, strict=True):
                    assert zipped.read(name) == results[job_id]
            # ... but can't delete a face, nor list the library, submit or cancel.
            assert_forbidden(await h.client.delete(f"/v1/faces/library/{faces[0]}", headers=viewer))
            assert_forbidden(await h.client.get("/v1/faces/library", headers=viewer))
            assert_forbidden(
                await h.client.post(
                    "/v1/batches",
                    headers=viewer,
                    files=batch_files(targets[:1]),
                    data={"options": SWAP, "source_face_id": faces},
                )
            )
            assert_forbidden(await h.client.delete(f"/v1/batches/{batch_id}", headers=viewer))
            library = (await h.client.get("/v1/faces/library", headers=director)).json()
            assert {face["id"] for face in library} == set(faces)

            # The receiver got one signed event per item and batch.completed; each verifies
            # with the client's helper under the tenant's secret, and only under it.
            messages = receiver.wait_for(21, timeout=60)
            assert len(messages) == 21
            for message in messages:
                verify_webhook(secret, message.headers, message.body)
                with pytest.raises(InvalidSignature):
                    verify_webhook(new_secret(), message.headers, message.body)
                with pytest.raises(InvalidSignature):
                    verify_webhook(secret, message.headers, message.body.replace(b"}", b" }", 1))
            events = [json.loads(m.body) for m in messages]
            assert sorted(e["type"] for e in events) == ["batch.completed"] + ["job.succeeded"] * 20
            [done] = [e for e in events if e["type"] == "batch.completed"]
            assert done["data"]["id"] == batch_id
            assert done["data"]["counts"]["succeeded"] == 20
            assert {e["data"]["id"] for e in events if e["type"] == "job.succeeded"} == set(job_ids)
            assert len({m.headers["webhook-id"] for m in messages}) == 21

            # The audit names the acting key of each step.
            audit = (await h.client.get("/v1/audit?limit=1000", headers=admin)).json()["events"]
            actors = {(event["action"], event["actor"]) for event in audit}
            assert ("face.save", await actor_of(h, director)) in actors
            assert ("batch.submit", await actor_of(h, editor)) in actors
            assert not any(event["tenant_id"] == "rival" for event in audit)

            # Another tenant sees none of it.
            paths = [
                f"/v1/batches/{batch_id}",
                f"/v1/batches/{batch_id}/archive",
                f"/v1/jobs/{job_ids[0]}",
                f"/v1/jobs/{job_ids[0]}/result",
                f"/v1/faces/library/{faces[0]}",
                f"/v1/faces/library/{faces[0]}/image",
            ]
            for path in paths:
                answer = await h.client.get(path, headers=rival)
                assert answer.status_code == 404, path
                assert is_problem(answer)
            for answer in (
                await h.client.delete(f"/v1/faces/library/{faces[0]}", headers=rival),
                await h.client.patch(
                    f"/v1/faces/library/{faces[0]}", headers=rival, json={"name": "Mine"}
                ),
                await h.client.delete(f"/v1/batches/{batch_id}", headers=rival),
                await h.client.delete(f"/v1/jobs/{job_ids[0]}", headers=rival),
            ):
                assert answer.status_code == 404
            for path in ("/v1/batches", "/v1/faces/library", "/v1/webhooks/deliveries"):
                assert (await h.client.get(path, headers=rival)).json() == [], path
            assert (await h.client.get("/v1/jobs", headers=rival)).json()["items"] == []
            stolen = await h.client.post(
                "/v1/batches",
                headers=rival,
                files=batch_files(targets[:1]),
                data={"options": SWAP, "source_face_id": faces[:1]},
            )
            assert stolen.status_code == 404
            assert rival_receiver.received == []

            # The same Idempotency-Key and content: the same batch, nothing new queued.
            again = await h.client.post(
                "/v1/batches",
                headers={**editor, "Idempotency-Key": "shoot-01"},
                files=batch_files(targets),
                data={"options": SWAP, "source_face_id": faces},
            )
            assert again.status_code == 200
            assert again.json()["id"] == batch_id
            listed = (await h.client.get("/v1/jobs?limit=100", headers=viewer)).json()
            assert len(listed["items"]) == 20
