"""The face library through the API: a director saves faces (the chosen face found and
described once, its prepared source stored under the tenant's prefix), lists, renames and
deletes them (stored objects gone, audited); jobs name saved faces instead of uploading a
source; consent comes with the face where the policy asks; another tenant sees none of it
(404); the retention purge leaves the library alone."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo, wait_terminal

from dbkit import drop_database, fresh_database
from facegate.database import create_engine_from_url, session_scope, utcnow
from facegate.engine.swap.mesh_warp import Tuning
from facegate.jobs.runtime import tenant_store_for
from facegate.library.tables import LibraryFace
from facegate.storage.tables import StoredObject
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(240)

DIRECTOR = ("director",)
EDITOR = ("editor",)
VIEWER = ("viewer",)
SWAP = json.dumps({"processors": ["face_swapper"]})
CONSENT = json.dumps({"attested_by": "Jane Roe (casting)", "statement_version": "2026-11"})


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    engine, url, schema = fresh_database(request.param, tmp_path, name="library", what="library")
    engine.dispose()
    yield url
    drop_database(create_engine_from_url(url), schema)


async def save(h: Any, headers: dict[str, str], image: bytes, name: str, **data: Any) -> Any:
    return await h.client.post(
        "/v1/faces/library",
        headers=headers,
        files={"image": ("face.jpg", image, "image/jpeg")},
        data={"name": name, **{k: str(v) for k, v in data.items()}},
    )


async def swap_with(h: Any, headers: dict[str, str], face_ids: list[str], **data: str) -> Any:
    return await h.client.post(
        "/v1/jobs",
        headers=headers,
        files=[("target", ("t.jpg", photo("man_frontal_glasses.jpg"), "image/jpeg"))],
        data={"options": SWAP, "source_face_id": face_ids, **data},
    )


def face_objects(h: Any, tenant_id: str) -> list[StoredObject]:
    with session_scope(h.state.session_factory) as session:
        return list(
            session.scalars(
                select(StoredObject).where(
                    StoredObject.tenant_id == tenant_id, StoredObject.kind == "faces"
                )
            )
        )


async def test_a_saved_face_is_used_by_jobs_and_deleted_with_all_it_derived(
    make_client: Any, database_url: str
) -> None:
    overrides = {"workers": 1, "job_poll_seconds": 0.05, "database_url": database_url}
    async with make_client(services=[workers_service], **overrides) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        h.create_tenant("rival", **DEBUG_TENANT_POLICY)
        director, editor = h.headers("studio", DIRECTOR), h.headers("studio", EDITOR)
        rival = h.headers("rival", DIRECTOR)

        group = photo("group_2_women_laughing_angled.jpg", width=480)
        found = (
            await h.client.post(
                "/v1/faces", headers=director, files={"image": ("g.jpg", group, "image/jpeg")}
            )
        ).json()["faces"]
        assert len(found) >= 2
        saved = await save(h, director, group, "Lead", labels='["s01", "lead"]', face_index=1)
        assert saved.status_code == 201, saved.text
        face = saved.json()
        assert face["labels"] == ["lead", "s01"]
        assert face["face_index"] == 1
        assert face["face_box"] == pytest.approx(found[1]["box"], abs=1.0)
        assert face["embedding_kind"] in {"dlib_resnet", "geometric"}
        assert "embedding" not in face
        assert face["image_sha256"] == hashlib.sha256(group).hexdigest()
        assert face["created_by"].startswith("key:")
        second = (await save(h, director, photo(), "Astronaut")).json()

        objects = {o.name: o for o in face_objects(h, "studio")}
        assert set(objects) == {"image", "face"}  # two faces, same names, two prefixes
        keys = sorted(o.key for o in face_objects(h, "studio"))
        assert all(key.startswith("tenants/studio/faces/") for key in keys)
        assert len(keys) == 4

        listed = (await h.client.get("/v1/faces/library", headers=editor)).json()
        assert [f["name"] for f in listed] == ["Astronaut", "Lead"]
        labelled = await h.client.get("/v1/faces/library?label=lead", headers=editor)
        assert [f["id"] for f in labelled.json()] == [face["id"]]
        renamed = await h.client.patch(
            f"/v1/faces/library/{face['id']}", headers=director, json={"name": "Lead (S01)"}
        )
        assert renamed.json()["name"] == "Lead (S01)"

        # The editor runs a swap with the saved face: no source uploaded.
        submitted = await swap_with(h, editor, [face["id"]])
        assert submitted.status_code == 202, submitted.text
        job = await wait_terminal(h.client, editor, submitted.json()["id"])
        assert job["status"] == "succeeded", job
        store = tenant_store_for(h.state.settings)
        used = store.get("studio", "inputs", uuid.UUID(job["id"]), "source-0")
        prepared = store.get("studio", "faces", uuid.UUID(face["id"]), "face")
        assert used == prepared
        result = await h.client.get(f"/v1/jobs/{job['id']}/result", headers=editor)
        assert result.status_code == 200

        # Another tenant: every door is a 404, and its list is empty.
        for method, path in (
            ("GET", f"/v1/faces/library/{face['id']}"),
            ("PATCH", f"/v1/faces/library/{face['id']}"),
            ("DELETE", f"/v1/faces/library/{face['id']}"),
            ("GET", f"/v1/faces/library/{face['id']}/image"),
        ):
            kwargs: dict[str, Any] = {"json": {"name": "x"}} if method == "PATCH" else {}
            answer = await h.client.request(method, path, headers=rival, **kwargs)
            assert answer.status_code == 404, (method, path)
            assert is_problem(answer)
        assert (await h.client.get("/v1/faces/library", headers=rival)).json() == []
        stolen = await swap_with(h, rival, [face["id"]])
        assert stolen.status_code == 404
        both = await h.client.post(
            "/v1/jobs",
            headers=editor,
            files=[
                ("source", ("s.jpg", photo(), "image/jpeg")),
                ("target", ("t.jpg", photo(), "image/jpeg")),
            ],
            data={"options": SWAP, "source_face_id": [face["id"]]},
        )
        assert both.status_code == 422
        assert "not both" in both.json()["detail"]

        # The director exports and deletes; everything stored for the face goes.
        exported = await h.client.get(f"/v1/faces/library/{face['id']}/image", headers=director)
        assert exported.content == group
        deleted = await h.client.delete(f"/v1/faces/library/{face['id']}", headers=director)
        assert deleted.status_code == 204
        assert {o.job_id for o in face_objects(h, "studio")} == {uuid.UUID(second["id"])}
        storage = Path(h.state.settings.storage_url.removeprefix("file://"))
        assert not list(storage.rglob(f"*{face['id']}*"))
        gone = await h.client.get(f"/v1/faces/library/{face['id']}", headers=director)
        assert gone.status_code == 404
        assert (await swap_with(h, editor, [face["id"]])).status_code == 404

        audit = await h.client.get("/v1/audit", headers=h.headers("studio", ("audit:read",)))
        events = {e["action"]: e for e in audit.json()["events"]}
        for action in ("face.save", "face.update", "face.export", "face.delete"):
            assert events[action]["actor"].startswith("key:"), action
            assert events[action]["tenant_id"] == "studio"
        assert events["face.delete"]["details"]["objects"] == 2


async def test_each_face_says_whether_the_builtin_swapper_can_use_it(
    make_client: Any, database_url: str
) -> None:
    """A profile (turned ~53°) is saved, but marked as one the built-in swapper refuses;
    a frontal face is marked usable; a face saved before the angle was recorded says
    neither (null)."""
    limit = Tuning().max_source_turn
    async with make_client(database_url=database_url) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        director = h.headers("studio", DIRECTOR)
        profile_image = photo("man_profile_grayscale_occluded.png", width=512)
        profile = await save(h, director, profile_image, "Profile")
        assert profile.status_code == 201, profile.text
        frontal = await save(h, director, photo(width=320), "Frontal")
        assert frontal.status_code == 201, frontal.text
        older = (await save(h, director, photo(width=320), "Older")).json()
        with session_scope(h.state.session_factory) as session:
            session.get_one(LibraryFace, uuid.UUID(older["id"])).turned = None

        saved = {"Profile": profile.json(), "Frontal": frontal.json()}
        assert 50 <= saved["Profile"]["turned"] <= 56  # the photo's 53°
        assert saved["Profile"]["builtin_swap_usable"] is False
        assert 0 <= saved["Frontal"]["turned"] <= 20
        assert saved["Frontal"]["builtin_swap_usable"] is True
        for face in saved.values():
            assert face["turned"] == round(face["turned"], 1)
            assert face["builtin_swap_max_turn"] == limit
        assert saved["Profile"]["turned"] > limit >= saved["Frontal"]["turned"]

        listed = {
            f["name"]: f for f in (await h.client.get("/v1/faces/library", headers=director)).json()
        }
        fields = ("turned", "builtin_swap_usable", "builtin_swap_max_turn")
        for name, face in saved.items():
            assert {k: listed[name][k] for k in fields} == {k: face[k] for k in fields}
            read = (await h.client.get(f"/v1/faces/library/{face['id']}", headers=director)).json()
            assert {k: read[k] for k in fields} == {k: face[k] for k in fields}
        assert listed["Older"]["turned"] is None
        assert listed["Older"]["builtin_swap_usable"] is None
        assert listed["Older"]["builtin_swap_max_turn"] == limit


async def test_consent_is_recorded_with_the_face_and_travels_with_it(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY, require_consent=True)
        director = h.headers("studio", DIRECTOR)
        missing = await save(h, director, photo(), "No consent")
        assert missing.status_code == 422
        assert missing.json()["type"].endswith("consent-required")
        assert face_objects(h, "studio") == []

        face = (await save(h, director, photo(), "Consented", consent=CONSENT)).json()
        assert face["consent"]["attested_by"] == "Jane Roe (casting)"
        job = await swap_with(h, director, [face["id"]])
        assert job.status_code == 202, job.text
        [ref] = job.json()["consent"]
        assert ref["attestation_id"] == face["consent"]["attestation_id"]
        assert ref["source"] == "source-0"
        again = await swap_with(h, director, [face["id"]], consent=CONSENT)
        assert again.status_code == 422
        assert again.json()["type"].endswith("invalid-consent")


async def test_bad_saves_are_refused_and_store_nothing(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        director = h.headers("studio", DIRECTOR)
        cases = [
            (photo("no_face_landscape_mountains.jpg"), {}, "no-face-detected"),
            (photo(), {"face_index": 5}, "invalid-face-index"),
            (photo(), {"labels": "not json"}, "invalid-labels"),
            (b"not an image", {}, "unsupported-media"),
        ]
        for image, extra, kind in cases:
            refused = await save(h, director, image, "x", **extra)
            assert refused.status_code in {415, 422}, refused.text
            assert refused.json()["type"].endswith(kind), refused.json()
        blank = await save(h, director, photo(), "   ")
        assert blank.status_code == 422
        assert face_objects(h, "studio") == []


async def test_the_retention_purge_leaves_the_library_alone(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY, retention_days=1)
        director = h.headers("studio", DIRECTOR)
        assert (await save(h, director, photo(), "Kept")).status_code == 201
        store = tenant_store_for(h.state.settings)
        with session_scope(h.state.session_factory) as session:
            purged = store.purge_expired(session, utcnow() + timedelta(days=30), {"studio": 1})
        assert purged == 0
        assert len(face_objects(h, "studio")) == 2
