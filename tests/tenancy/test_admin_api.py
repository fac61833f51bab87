"""Admin routes: tenants, policies (the specification's document as is), keys."""

from __future__ import annotations

from typing import Any

SPEC_DOCUMENT = {
    "tenant_id": "studio-pro-01",
    "quota": {
        "max_concurrent_jobs": 5,
        "gpu_limit": "2",
        "enable_enhance": True,
        "output_resolution": "4k",
    },
    "storage_path": "/data/tenant/studio-pro-01",
}


async def admin_client(h: Any) -> dict[str, str]:
    return h.headers("ops", ["admin"])


async def test_specification_document_creates_a_tenant(make_client: Any) -> None:
    async with make_client() as h:
        admin = await admin_client(h)
        created = await h.client.post("/v1/admin/tenants", json=SPEC_DOCUMENT, headers=admin)
        again = await h.client.post("/v1/admin/tenants", json=SPEC_DOCUMENT, headers=admin)
        policy = await h.client.get("/v1/admin/tenants/studio-pro-01/policy", headers=admin)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"] == "studio-pro-01"
    assert body["storage_path_info"] == "/data/tenant/studio-pro-01"
    assert body["policy"]["max_concurrent_jobs"] == 5
    assert body["policy"]["device_limit"] == 2
    assert body["policy"]["max_output_resolution"] == "4k"
    assert {"face_enhancer", "frame_enhancer", "face_swapper"} <= set(
        body["policy"]["allowed_processors"]
    )
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    assert policy.json() == body["policy"]


async def test_put_policy_accepts_document_and_canonical_names(make_client: Any) -> None:
    async with make_client() as h:
        admin = await admin_client(h)
        h.create_tenant("studio-pro-01")
        url = "/v1/admin/tenants/studio-pro-01/policy"
        from_document = await h.client.put(url, json=SPEC_DOCUMENT, headers=admin)
        canonical = await h.client.put(
            url, json={"device_limit": 4, "max_output_resolution": "720p"}, headers=admin
        )
        invalid = await h.client.put(url, json={"max_concurrent_jobs": 0}, headers=admin)
        unknown = await h.client.put(url, json={"allowed_processors": ["rm_rf"]}, headers=admin)
    assert from_document.status_code == 200, from_document.text
    assert from_document.json()["device_limit"] == 2
    assert canonical.json()["device_limit"] == 4
    assert canonical.json()["max_output_resolution"] == "720p"
    # PUT replaces: the enhancers granted by the document are gone again
    assert canonical.json()["allowed_processors"] == ["face_swapper"]
    for response in (invalid, unknown):
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"


async def test_tenant_lifecycle_and_keys(make_client: Any) -> None:
    async with make_client() as h:
        admin = await admin_client(h)
        c = h.client
        assert (await c.post("/v1/admin/tenants", json={"id": "acme"}, headers=admin)).is_success
        patched = await c.patch("/v1/admin/tenants/acme", json={"name": "ACME"}, headers=admin)
        assert patched.json()["name"] == "ACME"
        key = await c.post(
            "/v1/admin/tenants/acme/keys", json={"scopes": ["jobs:read"]}, headers=admin
        )
        assert key.status_code == 201
        token = key.json()["token"]
        assert token.startswith("fg_")
        listed = await c.get("/v1/admin/tenants/acme/keys", headers=admin)
        assert [item["id"] for item in listed.json()] == [key.json()["id"]]
        assert "token" not in listed.json()[0]
        assert "secret_hash" not in listed.json()[0]
        # the key works for its scope, not for admin
        assert (await c.get("/v1/admin/tenants", headers={"X-API-Key": token})).status_code == 403
        # active tenants cannot be deleted; suspended ones can
        assert (await c.delete("/v1/admin/tenants/acme", headers=admin)).status_code == 409
        suspended = await c.post("/v1/admin/tenants/acme/suspend", headers=admin)
        assert suspended.json()["status"] == "suspended"
        assert (await c.get("/v1/admin/tenants", headers={"X-API-Key": token})).status_code == 401
        resumed = await c.post("/v1/admin/tenants/acme/resume", headers=admin)
        assert resumed.json()["status"] == "active"
        await c.post("/v1/admin/tenants/acme/suspend", headers=admin)
        assert (await c.delete("/v1/admin/tenants/acme", headers=admin)).status_code == 204
        missing = await c.get("/v1/admin/tenants/acme", headers=admin)
        other_keys = await c.delete("/v1/admin/tenants/ops/keys/nosuchkey", headers=admin)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert other_keys.status_code == 404


async def test_bad_tenant_ids_and_bodies_are_422(make_client: Any) -> None:
    async with make_client() as h:
        admin = await admin_client(h)
        for body in ({"id": "../etc"}, {"id": "UPPER"}, {"id": "a", "bogus": 1}, [1, 2]):
            response = await h.client.post("/v1/admin/tenants", json=body, headers=admin)
            assert response.status_code == 422, body
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["errors"]
        raw = await h.client.post(
            "/v1/admin/tenants",
            content=b"{not json",
            headers={**admin, "content-type": "application/json"},
        )
    assert raw.status_code == 422
