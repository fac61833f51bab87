"""Roles inside a tenant, on API keys and as a JWT's scope claim: a director manages the
face library, an editor runs jobs with its faces but cannot export or delete them, a viewer
sees results, billing sees usage; ``/v1/me`` lists what each may do, and the audit names the
acting key or user."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo, submit
from tests.models.modelfiles import identity_model
from tests.tenancy.test_jwt_auth import HS_SECRET, claims, jwt_settings

from facegate.principal import ROLE_SCOPES, Principal

ENHANCER = identity_model("input", "output", [1, 3, 512, 512])

pytestmark = pytest.mark.timeout(120)


def test_roles_expand_to_their_scopes_and_nothing_else() -> None:
    editor = Principal("studio", frozenset({"editor"}), "key:e")
    assert editor.has("faces:read")
    assert editor.has("jobs:write")
    assert not editor.has("faces:manage")
    assert not editor.has("faces:write")
    assert not editor.has("usage:read")
    assert not editor.has("tenant:admin")
    assert not editor.has("models:write")
    viewer = Principal("studio", frozenset({"viewer"}), "key:v")
    assert viewer.effective_scopes == {"viewer", "jobs:read", "templates:read", "streams:read"}
    assert not viewer.has("streams:write")  # a viewer sees live streams, starts none
    assert editor.has("streams:write")
    billing = Principal("studio", frozenset({"billing"}), "key:b")
    assert billing.effective_scopes == {"billing", "usage:read"}
    director = Principal("studio", frozenset({"director"}), "key:d")
    assert director.effective_scopes == {"director"} | ROLE_SCOPES["director"]
    admin = Principal("studio", frozenset({"tenant:admin"}), "key:a")
    assert admin.has("faces:manage")
    assert admin.has("audit:read")
    assert admin.has("models:write")
    assert not admin.has("admin")
    for role in ROLE_SCOPES:
        held = Principal("studio", frozenset({role}), "key:r")
        assert not held.has("audit:read"), role
        assert not held.has("models:write"), role


async def test_each_role_may_do_what_it_is_for(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        role = {name: h.headers("studio", (name,)) for name in ROLE_SCOPES}

        saved = await h.client.post(
            "/v1/faces/library",
            headers=role["director"],
            files={"image": ("f.jpg", photo(), "image/jpeg")},
            data={"name": "Lead"},
        )
        assert saved.status_code == 201, saved.text
        face = saved.json()["id"]
        face_path = f"/v1/faces/library/{face}"

        async def status(name: str, method: str, path: str, **kwargs: Any) -> int:
            answer = await h.client.request(method, path, headers=role[name], **kwargs)
            return answer.status_code

        # editor: uses faces, cannot save, export or delete them
        assert await status("editor", "GET", "/v1/faces/library") == 200
        for method, path in (("GET", f"{face_path}/image"), ("DELETE", face_path)):
            assert await status("editor", method, path) == 403
        refused = await h.client.post(
            "/v1/faces/library",
            headers=role["editor"],
            files={"image": ("f.jpg", photo(), "image/jpeg")},
            data={"name": "x"},
        )
        assert refused.status_code == 403
        assert "faces:write" in refused.json()["detail"]
        job = await h.client.post(
            "/v1/jobs",
            headers=role["editor"],
            files=[("target", ("t.jpg", photo(), "image/jpeg"))],
            data={"options": json.dumps({"processors": ["face_debugger"]}), "source_face_id": face},
        )
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]

        # viewer: sees jobs, cannot submit, nor touch the library
        assert await status("viewer", "GET", f"/v1/jobs/{job_id}") == 200
        assert await status("viewer", "GET", "/v1/jobs") == 200
        assert (await submit(h.client, role["viewer"])).status_code == 403
        for method, path in (("GET", "/v1/faces/library"), ("DELETE", face_path)):
            assert await status("viewer", method, path) == 403

        # billing: usage only
        assert await status("billing", "GET", "/v1/usage") == 200
        assert await status("billing", "GET", "/v1/jobs") == 403
        assert await status("billing", "GET", "/v1/faces/library") == 403

        # a plain job key may not name saved faces (faces:read)
        plain = h.headers("studio", ("jobs:write", "jobs:read"))
        named = await h.client.post(
            "/v1/jobs",
            headers=plain,
            files=[("target", ("t.jpg", photo(), "image/jpeg"))],
            data={"options": json.dumps({"processors": ["face_debugger"]}), "source_face_id": face},
        )
        assert named.status_code == 403

        me = (await h.client.get("/v1/me", headers=role["editor"])).json()
        assert me["scopes"] == ["editor"]
        assert me["permissions"] == [
            "editor",
            "faces:read",
            "jobs:read",
            "jobs:write",
            "streams:read",
            "streams:write",
            "templates:read",
            "templates:write",
        ]

        # the director deletes; the audit names its key
        assert await status("director", "DELETE", face_path) == 204
        director_me = (await h.client.get("/v1/me", headers=role["director"])).json()
        audit = await h.client.get(
            "/v1/audit?action=face.delete", headers=h.headers("studio", ("tenant:admin",))
        )
        [event] = audit.json()["events"]
        assert event["actor"] == director_me["actor"]


async def test_a_jwt_carries_a_role_in_its_scope_claim(make_client: Any) -> None:
    async with make_client(**jwt_settings()) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        director = h.headers("acme", ("director",))
        face = (
            await h.client.post(
                "/v1/faces/library",
                headers=director,
                files={"image": ("f.jpg", photo(), "image/jpeg")},
                data={"name": "Lead"},
            )
        ).json()["id"]
        token = jwt.encode(claims(scope="editor", sub="ed@acme"), HS_SECRET, algorithm="HS256")
        editor = {"Authorization": f"Bearer {token}"}
        me = (await h.client.get("/v1/me", headers=editor)).json()
        assert me["actor"] == "jwt:ed@acme"
        assert "faces:read" in me["permissions"]
        listed = await h.client.get("/v1/faces/library", headers=editor)
        assert [f["id"] for f in listed.json()] == [face]
        assert (
            await h.client.delete(f"/v1/faces/library/{face}", headers=editor)
        ).status_code == 403
        renamed = await h.client.patch(
            f"/v1/faces/library/{face}", headers=editor, json={"name": "x"}
        )
        assert renamed.status_code == 403


async def test_a_tenant_admin_hands_out_role_keys(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        admin = h.headers("studio", ("tenant:admin",))
        created = await h.client.post(
            "/v1/admin/tenants/studio/keys",
            headers=admin,
            json={"name": "casting director", "scopes": ["director"]},
        )
        assert created.status_code == 201, created.text
        key = created.json()
        assert key["scopes"] == ["director"]
        me = await h.client.get("/v1/me", headers={"Authorization": f"Bearer {key['token']}"})
        assert "faces:manage" in me.json()["permissions"]


async def test_the_audit_trail_and_private_models_are_the_tenant_admins(
    make_client: Any,
) -> None:
    """billing reads usage, not the audit trail (it names reporters, attestors, webhook
    targets); editors and directors run jobs, they do not install or delete the tenant's
    private models: both are ``tenant:admin``'s (``audit:read``, ``models:write``)."""
    async with make_client() as h:
        h.create_tenant("studio", allow_custom_models=True, allowed_processors=["face_enhancer"])
        billing = h.headers("studio", ("billing",))
        usage_reader = h.headers("studio", ("usage:read",))
        admin = h.headers("studio", ("tenant:admin",))
        for refused in (billing, usage_reader):
            answer = await h.client.get("/v1/audit", headers=refused)
            assert answer.status_code == 403, answer.text
            assert answer.json()["scope"] == "audit:read"
        assert (await h.client.get("/v1/usage", headers=billing)).status_code == 200
        for allowed in (admin, h.headers("studio", ("audit:read",))):
            assert (await h.client.get("/v1/audit", headers=allowed)).status_code == 200

        upload = {
            "files": {"file": ("model.onnx", ENHANCER, "application/octet-stream")},
            "data": {"name": "studio_gfpgan", "kind": "face_enhancer", "tag": "v1"},
        }
        admin_upload = await h.client.post("/v1/models", headers=admin, **upload)
        assert admin_upload.status_code == 201, admin_upload.text
        assert (
            await h.client.delete("/v1/models/studio_gfpgan/v1", headers=admin)
        ).status_code == 204
        for role in ("editor", "director", "viewer"):
            headers = h.headers("studio", (role,))
            answer = await h.client.post("/v1/models", headers=headers, **upload)
            assert answer.status_code == 403, (role, answer.text)
            assert answer.json()["scope"] == "models:write"
        installed = await h.client.post("/v1/models", headers=admin, **upload)
        assert installed.status_code == 201, installed.text
        editor = h.headers("studio", ("editor",))
        refused = await h.client.delete("/v1/models/studio_gfpgan/v1", headers=editor)
        assert refused.status_code == 403
        manager = h.headers("studio", ("models:write",))
        assert (
            await h.client.delete("/v1/models/studio_gfpgan/v1", headers=manager)
        ).status_code == 204
