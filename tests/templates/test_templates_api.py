"""Job templates through the API, on SQLite and PostgreSQL: validated at save with a job's
own options parsing (the same refusals, word for word), the plan and the face library
(faces by name, each naming one face); saved, listed, read and deleted by the roles allowed
(directors and editors manage, viewers read, billing nothing), audited; jobs and batches
run with one (by id or by name) and get its options and faces; another tenant's template
is a 404 everywhere."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo, wait_terminal

from dbkit import drop_database, fresh_database
from facegate.database import create_engine_from_url, session_scope
from facegate.jobs.tables import Job
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)

SWAP_MANY = {"processors": ["face_swapper"], "selector": {"mode": "many"}, "blend": 0.8}
# Bad options a job and a template refuse alike (the same status, type and detail).
BAD_OPTIONS: list[dict[str, Any]] = [
    {"processors": ["no_such_processor"]},
    {"processors": ["face_swapper"], "processor_options": {"face_swapper": {"blend": 7}}},
    {"processors": ["face_debugger"], "selector": {"mode": "sideways"}},
    {"processors": ["face_debugger"], "processor_options": {"face_swapper": {}}},
    {"processors": ["face_swapper", "face_swapper"]},
]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    engine, url, schema = fresh_database(request.param, tmp_path, name="tpl", what="templates")
    engine.dispose()
    yield url
    drop_database(create_engine_from_url(url), schema)


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


async def create(h: Any, headers: dict[str, str], **body: Any) -> Any:
    return await h.client.post("/v1/templates", headers=headers, json=body)


def job_spec(h: Any, job_id: str) -> dict[str, Any]:
    with session_scope(h.state.session_factory) as session:
        spec: dict[str, Any] = session.scalars(
            select(Job.spec).where(Job.id == uuid.UUID(job_id))
        ).one()
    return spec


async def test_templates_are_validated_managed_by_role_and_isolated(
    make_client: Any, database_url: str
) -> None:
    async with make_client(database_url=database_url) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        h.create_tenant("rival", **DEBUG_TENANT_POLICY)
        director = h.headers("studio", ("director",))
        editor = h.headers("studio", ("editor",))
        viewer = h.headers("studio", ("viewer",))
        billing = h.headers("studio", ("billing",))
        admin = h.headers("studio", ("tenant:admin",))
        rival = h.headers("rival", ("director",))
        await save_face(h, director, "Lead", photo("woman_a_selfie_frontal_01.jpg"))
        await save_face(h, director, "Double", photo("man_frontal_glasses.jpg"))

        made = await create(
            h,
            editor,
            name="two-up",
            description="Lead on the second face, Double on the first",
            options=SWAP_MANY,
            faces=["Lead", "Double"],
            mapping={"Lead": 1, "Double": 0},
        )
        assert made.status_code == 201, made.text
        template = made.json()
        assert template["faces"] == ["Lead", "Double"]
        assert template["mapping"] == {"Lead": 1, "Double": 0}
        # Stored as validated: the shortcut expanded, the mapping as the selector's pairs.
        options = template["options"]
        assert options["processors"] == ["face_swapper"]
        assert options["processor_options"]["face_swapper"]["blend"] == 0.8
        assert options["selector"]["mapping"] == [[0, 1], [1, 0]]
        assert options["selector"]["mode"] == "many"

        again = await create(h, director, name="two-up", options={"processors": ["face_debugger"]})
        assert again.status_code == 409
        assert is_problem(again)

        # The same parsing as a job's options: the same refusal, word for word.
        for bad in BAD_OPTIONS:
            as_job = await h.client.post(
                "/v1/jobs",
                headers=editor,
                files=[("target", ("t.jpg", photo(), "image/jpeg"))],
                data={"options": json.dumps(bad)},
            )
            as_template = await create(h, editor, name="bad", options=bad)
            assert as_template.status_code == as_job.status_code, bad
            assert as_job.status_code in (403, 422), bad
            assert as_template.json()["type"] == as_job.json()["type"], bad
            assert as_template.json()["detail"] == as_job.json()["detail"], bad
        # Beyond the plan (403, as for a job), faces that are not in the library or named
        # twice, a mapping naming a face the template does not use (422).
        beyond = await create(h, editor, name="bad", options={"processors": ["frame_enhancer"]})
        assert beyond.status_code == 403
        assert beyond.json()["type"].endswith("forbidden")
        for body in (
            {"faces": ["Nobody"]},
            {"faces": ["Lead", "Lead"]},
            {"faces": ["Lead"], "mapping": {"Double": 0}},
            {"faces": ["Lead"], "mapping": {"Lead": 0}, "options": {**SWAP_MANY, "mapping": []}},
        ):
            refused = await create(h, editor, **{"name": "bad", "options": SWAP_MANY, **body})
            assert refused.status_code == 422, body
            assert refused.json()["type"].endswith("invalid-template"), refused.json()
        assert (await create(h, editor, name="bad", options={"nope": 1})).status_code == 422
        assert (await create(h, editor, name="", options=SWAP_MANY)).status_code == 422

        # Roles: the viewer reads, billing does not; neither saves nor deletes.
        listed = (await h.client.get("/v1/templates", headers=viewer)).json()
        assert [t["name"] for t in listed] == ["two-up"]
        read = await h.client.get(f"/v1/templates/{template['id']}", headers=viewer)
        assert read.json() == template
        for refused in (
            await create(h, viewer, name="mine", options=SWAP_MANY),
            await h.client.delete(f"/v1/templates/{template['id']}", headers=viewer),
            await h.client.get("/v1/templates", headers=billing),
            await h.client.post(
                "/v1/jobs",
                headers=viewer,
                files=[("target", ("t.jpg", photo(), "image/jpeg"))],
                data={"template": "two-up"},
            ),
        ):
            assert refused.status_code == 403
            assert is_problem(refused)

        # Another tenant: 404 by id and by name, for reading, deleting and using it.
        assert (await h.client.get("/v1/templates", headers=rival)).json() == []
        for answer in (
            await h.client.get(f"/v1/templates/{template['id']}", headers=rival),
            await h.client.delete(f"/v1/templates/{template['id']}", headers=rival),
        ):
            assert answer.status_code == 404
            assert is_problem(answer)
        for ref in (template["id"], "two-up"):
            used = await h.client.post(
                "/v1/jobs",
                headers=rival,
                files=[("target", ("t.jpg", photo(), "image/jpeg"))],
                data={"template": ref},
            )
            assert used.status_code == 404, used.text
        # The same name in another tenant is another template.
        theirs = await create(h, rival, name="two-up", options={"processors": ["face_debugger"]})
        assert theirs.status_code == 201

        deleted = await h.client.delete(f"/v1/templates/{template['id']}", headers=director)
        assert deleted.status_code == 204
        gone = await h.client.get(f"/v1/templates/{template['id']}", headers=editor)
        assert gone.status_code == 404
        assert (await h.client.get("/v1/templates", headers=editor)).json() == []

        events = (await h.client.get("/v1/audit?limit=1000", headers=admin)).json()["events"]
        actors = {e["action"]: e["actor"] for e in events if e["action"].startswith("template.")}
        me = {
            name: (await h.client.get("/v1/me", headers=k)).json()["actor"]
            for name, k in (("editor", editor), ("director", director))
        }
        assert actors == {"template.create": me["editor"], "template.delete": me["director"]}


async def test_jobs_and_batches_run_with_a_template(make_client: Any, database_url: str) -> None:
    overrides = {"database_url": database_url, "workers": 2, "job_poll_seconds": 0.05}
    async with make_client(services=[workers_service], **overrides) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        director = h.headers("studio", ("director",))
        editor = h.headers("studio", ("editor",))
        admin = h.headers("studio", ("tenant:admin",))
        lead = await save_face(h, director, "Lead", photo("woman_a_selfie_frontal_01.jpg"))
        template = (
            await create(
                h, editor, name="lead-only", options=SWAP_MANY, faces=["Lead"], mapping={"Lead": 0}
            )
        ).json()
        bare = (await create(h, editor, name="bare swap", options=SWAP_MANY)).json()

        # A job names it by id: its options and its face, nothing else sent.
        job = await h.client.post(
            "/v1/jobs",
            headers=editor,
            files=[("target", ("t.jpg", photo(), "image/jpeg"))],
            data={"template": template["id"]},
        )
        assert job.status_code == 202, job.text
        assert job.json()["inputs"] == ["source-0", "target"]
        done = await wait_terminal(h.client, editor, job.json()["id"])
        assert done["status"] == "succeeded", done
        assert job_spec(h, done["id"]) == template["options"]

        # A batch names it by name.
        batch = await h.client.post(
            "/v1/batches",
            headers=editor,
            files=[
                ("target", (f"t{i}.jpg", photo(name), "image/jpeg"))
                for i, name in enumerate(["man_frontal_glasses.jpg", "woman_astronaut_frontal.jpg"])
            ],
            data={"template": "lead-only"},
        )
        assert batch.status_code == 202, batch.text
        for item in batch.json()["items"]:
            finished = await wait_terminal(h.client, editor, item["job_id"])
            assert finished["status"] == "succeeded", finished
            assert job_spec(h, item["job_id"]) == template["options"]

        # A template without faces takes the submission's sources (uploaded or saved).
        for sources in (
            {
                "files": [
                    ("source", ("s.jpg", photo("woman_a_selfie_frontal_01.jpg"), "image/jpeg"))
                ]
            },
            {"data": {"source_face_id": lead}},
        ):
            files = [*sources.get("files", []), ("target", ("t.jpg", photo(), "image/jpeg"))]
            data = {"template": "bare swap", **sources.get("data", {})}
            with_sources = await h.client.post("/v1/jobs", headers=editor, files=files, data=data)
            assert with_sources.status_code == 202, with_sources.text
            assert job_spec(h, with_sources.json()["id"]) == bare["options"]

        # The template brings the options and its faces: sending them too is refused.
        for data in (
            {"template": "lead-only", "options": json.dumps(SWAP_MANY)},
            {"template": "lead-only", "source_face_id": lead},
        ):
            refused = await h.client.post(
                "/v1/jobs",
                headers=editor,
                files=[("target", ("t.jpg", photo(), "image/jpeg"))],
                data=data,
            )
            assert refused.status_code == 422, data
            assert is_problem(refused)
        missing = await h.client.post(
            "/v1/batches",
            headers=editor,
            files=[("target", ("t.jpg", photo(), "image/jpeg"))],
            data={"template": "no such template"},
        )
        assert missing.status_code == 404

        # Faces are found by name when used: renamed away, the template no longer runs.
        renamed = await h.client.patch(
            f"/v1/faces/library/{lead}", headers=director, json={"name": "Lead (old)"}
        )
        assert renamed.status_code == 200
        stale = await h.client.post(
            "/v1/jobs",
            headers=editor,
            files=[("target", ("t.jpg", photo(), "image/jpeg"))],
            data={"template": "lead-only"},
        )
        assert stale.status_code == 422
        assert "no face named 'Lead'" in stale.json()["detail"]

        events = (await h.client.get("/v1/audit?limit=1000", headers=admin)).json()["events"]
        uses = [e["details"]["for"] for e in events if e["action"] == "template.use"]
        assert uses[0] == f"job:{job.json()['id']}"
        assert uses[1] == f"batch:{batch.json()['id']}"
        assert len(uses) == 4
