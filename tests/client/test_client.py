"""facegate.client against a real server (uvicorn on loopback): the calls it makes exist
in the service's OpenAPI document, and a director's flow runs through it — save a face,
a batch with it, its archive, a job and its result, a job template used by a batch and a
job, refusals as FacegateError with the
problem document, a webhook's signature verified with the exported helper."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo
from tests.conftest import make_settings
from tests.liveserver import serving

from facegate.api.app import create_app
from facegate.client import OPERATIONS, FacegateClient, FacegateError, verify_webhook
from facegate.database import session_scope
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService
from facegate.webhooks.signing import new_secret, signed_headers
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(180)
SWAP = {"processors": ["face_swapper"]}


def test_every_call_of_the_client_is_in_the_openapi_document(tmp_path: Path) -> None:
    paths = create_app(make_settings(tmp_path), services=[]).openapi()["paths"]
    for name, (method, template) in OPERATIONS.items():
        assert template in paths, name
        assert method.lower() in paths[template], name


def test_a_directors_flow_through_the_client(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, workers=1, job_poll_seconds=0.05)
    app = create_app(settings, services=[workers_service])
    with serving(app) as base:
        state = app.state.facegate
        with session_scope(state.session_factory) as session:
            service = TenancyService(session)
            for tenant in ("studio", "rival"):
                policy = PolicySpec.model_validate(DEBUG_TENANT_POLICY)
                service.create_tenant(TenantSpec.model_validate({"id": tenant, "policy": policy}))
            keys = {
                tenant: service.create_key(
                    tenant, KeyCreate(scopes=["director", "tenant:admin"])
                ).token
                for tenant in ("studio", "rival")
            }
        with FacegateClient(base, keys["studio"]) as fg, FacegateClient(base, keys["rival"]) as rv:
            face = fg.save_face(photo("woman_a_selfie_frontal_01.jpg"), name="Lead", labels=["s1"])
            assert [f["id"] for f in fg.list_faces(label="s1")] == [face["id"]]
            assert fg.rename_face(face["id"], "Lead (S1)")["name"] == "Lead (S1)"

            batch = fg.submit_batch(
                [photo(), photo("man_frontal_glasses.jpg")],
                source_face_ids=[face["id"]],
                options=SWAP,
                idempotency_key="b1",
            )
            done = fg.wait_batch(batch["id"], timeout=120, poll=0.1)
            assert done["counts"]["succeeded"] == 2
            with zipfile.ZipFile(io.BytesIO(fg.batch_archive(batch["id"]))) as archive:
                assert len(archive.namelist()) == 2

            job = fg.submit_job(photo(), source_face_ids=[face["id"]], options=SWAP)
            assert fg.wait_job(job["id"], timeout=120, poll=0.1)["status"] == "succeeded"
            assert fg.job_result(job["id"])[:2] == b"\xff\xd8"  # a JPEG
            # The quality report of the swapped face, as GET /v1/jobs/{id} gives it.
            (face_quality,) = fg.job_quality(job["id"])
            assert face_quality["verdict"] in {"transferred", "weak", "not transferred"}
            assert face_quality["d_source"] < face_quality["d_target"]
            by_person = {**SWAP, "selector": {"mode": "reference"}}
            job = fg.submit_job(
                photo(), source_face_ids=[face["id"]], options=by_person, reference=photo()
            )
            assert fg.wait_job(job["id"], timeout=120, poll=0.1)["status"] == "succeeded"

            template = fg.create_template(
                "lead", options=SWAP, faces=["Lead (S1)"], mapping={"Lead (S1)": 0}
            )
            assert template["options"]["selector"]["mapping"] == [[0, 0]]
            assert [t["id"] for t in fg.list_templates()] == [template["id"]]
            assert fg.get_template(template["id"])["faces"] == ["Lead (S1)"]
            by_template = fg.submit_batch([photo()], template="lead")
            assert (
                fg.wait_batch(by_template["id"], timeout=120, poll=0.1)["counts"]["succeeded"] == 1
            )
            job = fg.submit_job(photo(), template=template["id"])
            assert fg.wait_job(job["id"], timeout=120, poll=0.1)["status"] == "succeeded"
            with pytest.raises(FacegateError) as hidden:
                rv.get_template(template["id"])
            assert hidden.value.status == 404
            assert rv.list_templates() == []
            fg.delete_template(template["id"])
            assert fg.list_templates() == []

            with pytest.raises(FacegateError) as refused:
                rv.submit_job(photo(), source_face_ids=[face["id"]], options=SWAP)
            assert refused.value.status == 404
            assert refused.value.problem["type"].endswith("not-found")
            with pytest.raises(FacegateError) as ssrf:
                fg.create_webhook("http://169.254.169.254/latest/meta-data/")
            assert ssrf.value.status == 422
            fg.delete_face(face["id"])
            assert fg.list_faces() == []

    secret = new_secret()
    headers = signed_headers([secret], "msg_1", b'{"type":"job.succeeded"}')
    verify_webhook(secret, headers, b'{"type":"job.succeeded"}')
