"""The jobs API through HTTP: the happy path, tenant isolation over the app's own route
table, policy at the door, idempotency, cancel, and bad uploads that leave nothing behind."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from jobhelpers import (
    DEBUG_TENANT_POLICY,
    count_jobs,
    count_objects,
    debug_options,
    is_problem,
    load_badmedia,
    photo,
    stored_files,
    submit,
    wait_terminal,
)
from PIL import Image
from sqlalchemy import event
from sqlalchemy.engine import Engine

from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)


async def test_submit_run_and_fetch_the_result(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        headers = h.headers("acme")
        h.create_tenant("debug", **DEBUG_TENANT_POLICY)
        headers = h.headers("debug")
        response = await submit(h.client, headers, data=debug_options(output={"format": "png"}))
        assert response.status_code == 202
        job_id = response.json()["id"]
        assert response.headers["location"] == f"/v1/jobs/{job_id}"
        assert response.json()["status"] in {"queued", "running"}

        async with h.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = [line async for line in stream.aiter_lines() if line.startswith("event:")]
        assert events[-1] == "event: end"
        assert "event: status" in events

        body = await wait_terminal(h.client, headers, job_id)
        assert body["status"] == "succeeded", body
        assert body["result"]["content_type"] == "image/png"
        result = await h.client.get(f"/v1/jobs/{job_id}/result", headers=headers)
        assert result.status_code == 200
        assert result.headers["content-type"] == "image/png"
        assert result.content.startswith(b"\x89PNG")
        assert len(result.content) == body["result"]["bytes"]

        listed = (await h.client.get("/v1/jobs", headers=headers)).json()
        assert [item["id"] for item in listed["items"]] == [job_id]
        capabilities = (await h.client.get("/v1/capabilities", headers=headers)).json()
        assert capabilities["processors"] == ["face_debugger", "face_swapper"]
        assert capabilities["limits"]["storage_used_bytes"] > 0


async def test_every_job_route_answers_404_for_another_tenants_job(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("tenant-a", **DEBUG_TENANT_POLICY)
        h.create_tenant("tenant-b", **DEBUG_TENANT_POLICY)
        a = h.headers("tenant-a")
        b = h.headers("tenant-b")
        b_job = (await submit(h.client, b)).json()["id"]
        missing = str(uuid.uuid4())
        # The app's own route table, as FastAPI renders it (it nests included routers in
        # private wrappers in app.routes; the OpenAPI document flattens them).
        routes = [
            (method.upper(), path)
            for path, operations in h.app.openapi()["paths"].items()
            if "{job_id}" in path
            for method in sorted(operations)
        ]
        assert len(routes) >= 4  # get, cancel, result, events at least

        def comparable(response: Any) -> dict[str, Any]:
            body = dict(response.json())
            body.pop("instance", None)
            body.pop("request_id", None)
            return {"status": response.status_code, **body}

        for method, path in routes:
            theirs = await h.client.request(method, path.format(job_id=b_job), headers=a)
            absent = await h.client.request(method, path.format(job_id=missing), headers=a)
            assert theirs.status_code == 404, (method, path, theirs.text)
            assert is_problem(theirs)
            assert comparable(theirs) == comparable(absent), (method, path)
        # nor does the list show it, and B's job is untouched (not cancelled by A's DELETE)
        assert (await h.client.get("/v1/jobs", headers=a)).json()["items"] == []
        mine = (await h.client.get(f"/v1/jobs/{b_job}", headers=b)).json()
        assert mine["status"] == "queued"
        assert mine["cancel_requested"] is False


async def test_policy_at_the_door_refuses_and_stores_nothing(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant(
            "small",
            allowed_processors=["face_debugger"],
            allowed_models=["mesh_warp"],
            max_queued_jobs=1,
            max_output_resolution="720p",
            storage_quota_bytes=30_000,
        )
        headers = h.headers("small")

        async def refused(response: Any, status: int, mention: str) -> None:
            assert response.status_code == status, response.text
            assert is_problem(response)
            assert mention in json.dumps(response.json())
            assert count_jobs(h.state) == 0
            assert count_objects(h.state) == 0
            assert stored_files(h.state) == []

        swap = {"options": json.dumps({"processors": ["face_swapper"]})}
        await refused(
            await submit(h.client, headers, sources=[photo()], data=swap), 403, "face_swapper"
        )
        model = debug_options(processor_options={"face_debugger": {"model": "inswapper_128"}})
        await refused(await submit(h.client, headers, data=model), 403, "inswapper_128")
        # Over 720p but small in bytes: the queue cap and quota are checked before the
        # decode (the cheapest refusal first), so a big photo would get the 507 below.
        big = io.BytesIO()
        Image.new("RGB", (1400, 1000), (90, 90, 90)).save(big, "JPEG")
        await refused(
            await submit(h.client, headers, target=big.getvalue()), 422, "max_output_resolution"
        )
        heavy = photo(width=700)
        await refused(await submit(h.client, headers, target=heavy), 507, "storage_quota_bytes")
        bad = {"options": "{not json"}
        await refused(await submit(h.client, headers, data=bad), 422, "options")

        first = await submit(h.client, headers)
        assert first.status_code == 202
        second = await submit(h.client, headers)
        assert second.status_code == 429
        assert is_problem(second)
        assert second.json()["limit"] == "max_queued_jobs"
        assert int(second.headers["retry-after"]) > 0
        assert count_jobs(h.state) == 1
        assert len(stored_files(h.state)) == 1  # the accepted job's target only


async def test_a_submission_reads_the_tenants_storage_usage_once_per_step(
    make_client: Any,
) -> None:
    """Once before its inputs are decoded (a refused request decodes and writes nothing)
    and once in its write transaction; never once per input."""
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    async with make_client() as h:
        h.create_tenant("metered", **DEBUG_TENANT_POLICY, storage_quota_bytes=10_000_000)
        headers = h.headers("metered")
        event.listen(Engine, "before_cursor_execute", record)
        try:
            response = await submit(h.client, headers, sources=[photo(), photo()])
        finally:
            event.remove(Engine, "before_cursor_execute", record)
        assert response.status_code == 202, response.text
    usage_reads = [s for s in statements if "sum(stored_objects.size_bytes)" in s]
    assert len(usage_reads) == 2


async def test_idempotency_key_returns_the_same_job(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = {**h.headers("acme"), "Idempotency-Key": "order-42"}
        first = await submit(h.client, headers)
        again = await submit(h.client, headers)
        assert first.status_code == 202
        assert again.status_code == 200
        assert again.json()["id"] == first.json()["id"]
        assert again.headers["location"] == first.headers["location"]
        assert count_jobs(h.state) == 1
        # the key is per tenant: another tenant may use the same one
        h.create_tenant("other", **DEBUG_TENANT_POLICY)
        other = await submit(h.client, {**h.headers("other"), "Idempotency-Key": "order-42"})
        assert other.status_code == 202
        assert other.json()["id"] != first.json()["id"]


async def test_an_idempotency_key_reused_for_another_request_is_a_422(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = {**h.headers("acme"), "Idempotency-Key": "order-43"}
        first = await submit(h.client, headers, target=photo(width=160))
        assert first.status_code == 202
        other_image = await submit(h.client, headers, target=photo(width=120))
        assert other_image.status_code == 422
        assert other_image.json()["type"].endswith("idempotency-key-reused")
        other_options = await submit(
            h.client, headers, target=photo(width=160), data=debug_options(format="png")
        )
        assert other_options.status_code == 422
        assert count_jobs(h.state) == 1
        same = await submit(h.client, headers, target=photo(width=160))
        assert same.json()["id"] == first.json()["id"]


async def test_cancel_a_queued_job_and_paginate(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        ids = [(await submit(h.client, headers)).json()["id"] for _ in range(3)]
        cancelled = await h.client.delete(f"/v1/jobs/{ids[0]}", headers=headers)
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"
        result = await h.client.get(f"/v1/jobs/{ids[0]}/result", headers=headers)
        assert result.status_code == 409
        assert is_problem(result)

        page = (await h.client.get("/v1/jobs?limit=2", headers=headers)).json()
        assert [i["id"] for i in page["items"]] == ids[:0:-1]
        rest = await h.client.get(f"/v1/jobs?limit=2&cursor={page['next_cursor']}", headers=headers)
        assert [i["id"] for i in rest.json()["items"]] == [ids[0]]
        assert rest.json()["next_cursor"] is None
        queued = (await h.client.get("/v1/jobs?status=queued", headers=headers)).json()
        assert {i["id"] for i in queued["items"]} == set(ids[1:])
        bad_cursor = await h.client.get("/v1/jobs?cursor=zzz", headers=headers)
        assert bad_cursor.status_code == 422
        assert is_problem(bad_cursor)


@pytest.mark.parametrize(
    ("source", "width", "error", "mentions"),
    [
        ("no_face_landscape_mountains.jpg", 320, "no-face-detected", ["source"]),
        # The built-in swapper maps the source's own pixels: a profile hides half the face.
        ("man_profile_grayscale_occluded.png", 512, "source-unusable", ["turned 53°", "45°"]),
    ],
)
async def test_a_job_whose_source_cannot_serve_fails_with_the_reason(
    make_client: Any, source: str, width: int, error: str, mentions: list[str]
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        headers = h.headers("acme")
        response = await submit(
            h.client,
            headers,
            target=photo(),
            sources=[photo(source, width=width)],
            data={"options": json.dumps({"processors": ["face_swapper"]})},
        )
        assert response.status_code == 202
        body = await wait_terminal(h.client, headers, response.json()["id"])
        assert body["status"] == "failed"
        assert body["error"]["type"] == error
        assert all(mention in body["error"]["detail"] for mention in mentions)


async def test_bad_uploads_are_refused_and_leave_nothing(make_client: Any) -> None:
    badmedia = load_badmedia()
    async with make_client() as h:
        h.create_tenant("acme", max_input_bytes=badmedia.DEFAULT_MAX_BYTES, **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        for bad in badmedia.bad_inputs():
            for role in ("target", "source"):
                source = bad.data if role == "source" else photo()
                target = bad.data if role == "target" else photo()
                files = [
                    ("source", ("s.jpg", source, "image/jpeg")),
                    ("target", ("t.jpg", target, "image/jpeg")),
                ]
                response = await h.client.post(
                    "/v1/jobs",
                    headers=headers,
                    files=files,
                    data={"options": json.dumps({"processors": ["face_swapper"]})},
                )
                assert 400 <= response.status_code < 500, (bad.name, role, response.text)
                assert is_problem(response), bad.name
                assert response.json()["type"].endswith(bad.error.code), (bad.name, role)
        assert count_jobs(h.state) == 0
        assert count_objects(h.state) == 0
        assert stored_files(h.state) == []
