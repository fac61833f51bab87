"""/v1/models through HTTP: upload gated by policy and checked before acceptance, tenant
scoping of list/delete, and installed models in capabilities and at submission."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from modelfiles import identity_model, swapper_model

from facegate.principal import ALL_SCOPES

pytestmark = pytest.mark.asyncio
ENHANCER = identity_model("input", "output", [1, 3, 512, 512])
PROCESSORS = ["face_swapper", "face_enhancer"]
# Installing and deleting a private model is the tenant admin's (models:write); the audit
# trail too (audit:read).
MANAGER = (*ALL_SCOPES[:3], "models:write", "audit:read")


def upload_form(name: str, kind: str, data: bytes, tag: str = "v1") -> dict[str, Any]:
    return {
        "files": {"file": ("model.onnx", data, "application/octet-stream")},
        "data": {"name": name, "kind": kind, "tag": tag},
    }


async def test_upload_needs_the_policy_flag(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("plain")
        r = await h.client.post(
            "/v1/models",
            headers=h.headers("plain", MANAGER),
            **upload_form("mine", "face_enhancer", ENHANCER),
        )
        assert r.status_code == 403
        assert r.json()["limit"] == "allow_custom_models"


async def test_upload_list_delete_scoped(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", allow_custom_models=True, allowed_processors=PROCESSORS)
        h.create_tenant("globex", allow_custom_models=True, allowed_processors=PROCESSORS)
        acme, globex = h.headers("acme", MANAGER), h.headers("globex", MANAGER)
        r = await h.client.post(
            "/v1/models", headers=acme, **upload_form("studio_gfpgan", "face_enhancer", ENHANCER)
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["scope"] == "tenant"
        assert body["input"] == {"size": 512}
        assert body["files"][0]["sha256"] == hashlib.sha256(ENHANCER).hexdigest()
        manifest = h.state.settings.models_dir / "tenants/acme/studio_gfpgan/v1/manifest.json"
        assert json.loads(manifest.read_text())["kind"] == "face_enhancer"

        mine = [m["name"] for m in (await h.client.get("/v1/models", headers=acme)).json()["items"]]
        theirs = [
            m["name"] for m in (await h.client.get("/v1/models", headers=globex)).json()["items"]
        ]
        assert "studio_gfpgan" in mine
        assert "studio_gfpgan" not in theirs

        caps = (await h.client.get("/v1/capabilities", headers=acme)).json()
        assert "studio_gfpgan" in caps["models"]
        other_caps = (await h.client.get("/v1/capabilities", headers=globex)).json()
        assert "studio_gfpgan" not in other_caps["models"]

        again = await h.client.post(
            "/v1/models", headers=acme, **upload_form("studio_gfpgan", "face_enhancer", ENHANCER)
        )
        assert again.status_code == 409

        assert (
            await h.client.delete("/v1/models/studio_gfpgan/v1", headers=globex)
        ).status_code == 404
        assert (
            await h.client.delete("/v1/models/studio_gfpgan/v1", headers=acme)
        ).status_code == 204
        assert not manifest.exists()
        assert (
            await h.client.delete("/v1/models/studio_gfpgan/v1", headers=acme)
        ).status_code == 404
        # the install and the removal are on the tenant's audit trail (refusals are not)
        audit = (await h.client.get("/v1/audit", headers=acme)).json()["events"]
        models = [(e["action"], e["target"]) for e in audit if e["action"].startswith("model.")]
        assert models == [
            ("model.install", "model:studio_gfpgan:v1"),
            ("model.remove", "model:studio_gfpgan:v1"),
        ]
        installed = next(e for e in audit if e["action"] == "model.install")
        assert installed["details"]["files"]["model"] == hashlib.sha256(ENHANCER).hexdigest()


@pytest.mark.parametrize(
    ("name", "kind", "data", "says"),
    [
        ("broken", "face_enhancer", b"not an onnx file", "not a valid ONNX model"),
        ("inswapper_128", "face_swapper", swapper_model(256), "shape"),
        ("my_swapper", "face_swapper", swapper_model(128), "known swapper name"),
        ("wrong_io", "face_enhancer", identity_model("image", "output", [1, 3, 512, 512]), "input"),
        ("nsfw", "nsfw_classifier", ENHANCER, "cannot be uploaded"),
    ],
)
async def test_upload_refuses_files_off_contract(
    make_client: Any, name: str, kind: str, data: bytes, says: str
) -> None:
    async with make_client() as h:
        h.create_tenant("acme", allow_custom_models=True)
        r = await h.client.post(
            "/v1/models", headers=h.headers("acme", MANAGER), **upload_form(name, kind, data)
        )
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert says in r.json()["detail"]
        assert not (h.state.settings.models_dir / "tenants/acme" / name).exists()


async def test_upload_size_cap(make_client: Any) -> None:
    async with make_client(max_model_bytes=len(ENHANCER) - 1) as h:
        h.create_tenant("acme", allow_custom_models=True)
        r = await h.client.post(
            "/v1/models",
            headers=h.headers("acme", MANAGER),
            **upload_form("big", "face_enhancer", ENHANCER),
        )
        assert r.status_code == 422
        assert r.json()["limit"] == "max_model_bytes"


async def test_submission_names_a_model_not_installed(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", allow_custom_models=True, allowed_processors=PROCESSORS)
        h.create_tenant("globex", allowed_processors=PROCESSORS)
        await h.client.post(
            "/v1/models",
            headers=h.headers("acme", MANAGER),
            **upload_form("studio_gfpgan", "face_enhancer", ENHANCER),
        )
        options = {
            "processors": ["face_enhancer"],
            "processor_options": {"face_enhancer": {"model": "studio_gfpgan"}},
        }
        r = await h.client.post(
            "/v1/jobs",
            headers=h.headers("globex", ALL_SCOPES[:2]),
            files={"target": ("t.png", b"\x89PNG", "image/png")},
            data={"options": json.dumps(options)},
        )
        assert r.status_code == 409, r.text
        assert r.json()["type"].endswith("model-not-installed")
        assert r.json()["model"] == "studio_gfpgan"
        swap = {
            "processors": ["face_swapper"],
            "processor_options": {"face_swapper": {"model": "inswapper_128"}},
        }
        r = await h.client.post(
            "/v1/jobs",
            headers=h.headers("globex", ALL_SCOPES[:2]),
            files={"target": ("t.png", b"\x89PNG", "image/png")},
            data={"options": json.dumps(swap)},
        )
        assert r.status_code == 409
        assert r.json()["model"] == "inswapper_128"
