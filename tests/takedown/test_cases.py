"""A takedown case from end to end on a real job: the report of its marked result opens a
case (the platform admin and the owning tenant's admin see it, another tenant does not);
the match finds the job by its source face and not another person's; the removal deletes
its files, makes its routes answer 410 naming the case, tells the tenant (webhook notice,
audit) and stops the clock in the metrics. Then a person's erasure inside a tenant, with
its receipt."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, debug_options, photo, submit, wait_terminal
from tests.motokit import moto_server
from tests.takedown.takedownkit import add_job

from facegate.database import session_scope, utcnow
from facegate.jobs.runtime import tenant_store_for
from facegate.library.tables import LibraryFace
from facegate.observability.audit.chain import verify_chain
from facegate.observability.audit.repository import AuditRepository
from facegate.observability.audit.tables import AuditEvent
from facegate.principal import ALL_SCOPES
from facegate.provenance.keys import create_keys, load_keys
from facegate.provenance.receipts import verify_statement
from facegate.takedown.gauges import TakedownGaugeCollector
from facegate.takedown.matching import describe_image
from facegate.takedown.service import open_case
from facegate.webhooks.tables import JOB_REMOVED, WebhookDelivery, WebhookEndpoint
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)
PERSON = "woman_a_selfie_frontal_01.jpg"
OTHER = "man_frontal_glasses.jpg"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "facegate-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "facegate-test-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def chain_ok(state: Any) -> bool:
    with session_scope(state.session_factory, read_only=True) as session:
        repository = AuditRepository(session)
        return verify_chain(repository.scan(), repository.head()).ok


def removals_observed() -> float:
    value = REGISTRY.get_sample_value("facegate_takedown_seconds_count")
    return value or 0.0


async def finished(client: Any, headers: dict[str, str], source: bytes) -> str:
    response = await submit(
        client, headers, target=photo(width=320), sources=[source], data=debug_options()
    )
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, headers, response.json()["id"])
    assert job["status"] == "succeeded", job
    return str(job["id"])


async def test_a_report_opens_a_case_that_removes_the_job(make_client: Any, tmp_path: Path) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio", ["jobs:read", "jobs:write", "tenant:admin"])
        rival = h.headers("rival", ["jobs:read", "tenant:admin"])
        admin = h.headers("ops", scopes=ALL_SCOPES)
        reported = await finished(h.client, owner, photo(PERSON, 320))
        other = await finished(h.client, owner, photo(OTHER, 320))
        with session_scope(h.state.session_factory) as session:
            session.add(
                WebhookEndpoint(
                    tenant_id="studio",
                    url="https://hooks.example/in",
                    event_types=["job.succeeded"],
                    secret="whsec_c2VjcmV0c2VjcmV0c2VjcmV0",
                    created_by="test",
                )
            )
        data = (await h.client.get(f"/v1/jobs/{reported}/result", headers=owner)).content
        sent = await h.client.post(
            "/v1/reports",
            files=[("file", ("found.jpg", data, "image/jpeg"))],
            data={"message": "an intimate deepfake of me"},
        )
        assert sent.status_code == 202, sent.text
        cases = (await h.client.get("/v1/takedown/cases", headers=admin)).json()
        assert [(c["job_id"], c["tenant_id"], c["status"]) for c in cases] == [
            (reported, "studio", "open")
        ]
        assert cases[0]["report_id"] == sent.json()["report_id"]
        case_id = cases[0]["id"]
        assert len((await h.client.get("/v1/takedown/cases", headers=owner)).json()) == 1
        assert (await h.client.get("/v1/takedown/cases", headers=rival)).json() == []
        hidden = await h.client.get(f"/v1/takedown/cases/{case_id}", headers=rival)
        assert hidden.status_code == 404
        viewer = h.headers("studio", ["jobs:read"])
        assert (await h.client.get("/v1/takedown/cases", headers=viewer)).status_code == 403

        # The owner's admin matches within its tenant (platform search is the admin's).
        refused = await h.client.post(
            f"/v1/takedown/cases/{case_id}/match", data={"platform": "true"}, headers=owner
        )
        assert refused.status_code == 422
        matched = await h.client.post(f"/v1/takedown/cases/{case_id}/match", headers=owner)
        assert matched.status_code == 200, matched.text
        found = matched.json()["matches"]
        assert [(m["kind"], m["id"]) for m in found] == [("job", reported)]
        assert found[0]["distance"] < 0.05  # the job's own source
        before = removals_observed()
        removed = await h.client.post(f"/v1/takedown/cases/{case_id}/remove", headers=owner)
        assert removed.status_code == 200, removed.text
        assert removed.json()["copies_left"] == 0
        assert removals_observed() == before + 1
        for path in (f"/v1/jobs/{reported}", f"/v1/jobs/{reported}/result"):
            gone = await h.client.get(path, headers=owner)
            assert gone.status_code == 410
            assert gone.headers["content-type"].startswith("application/problem+json")
            assert gone.json()["case_id"] == case_id
        assert (await h.client.get(f"/v1/jobs/{other}/result", headers=owner)).status_code == 200
        store = tenant_store_for(h.state.settings).store
        assert store.list(f"tenants/studio/outputs/{reported}/") == []
        with session_scope(h.state.session_factory) as session:
            notices = list(
                session.scalars(
                    select(WebhookDelivery).where(WebhookDelivery.event_type == JOB_REMOVED)
                )
            )
            actions = [
                (e.action, e.tenant_id)
                for e in session.scalars(
                    select(AuditEvent).where(AuditEvent.action.like("takedown.%"))
                )
            ]
        assert [str(n.job_id) for n in notices] == [reported]
        assert case_id in notices[0].body
        assert actions == [
            ("takedown.open", "studio"),
            ("takedown.match", "studio"),
            ("takedown.remove", "studio"),
        ]
        assert chain_ok(h.state)
        # The person's photo is refused as a source in this tenant from now on.
        again = await submit(
            h.client,
            owner,
            target=photo(width=320),
            sources=[photo(PERSON, 300)],
            data=debug_options(),
        )
        assert again.status_code == 451, again.text
        saved = await h.client.post(
            "/v1/faces/library",
            files=[("image", ("me.jpg", photo(PERSON, 300), "image/jpeg"))],
            data={"name": "Lead"},
            headers=owner,
        )
        assert saved.status_code == 451, saved.text


async def test_the_clock_gauge_sees_the_oldest_open_case(make_client: Any) -> None:
    async with make_client() as h:
        collector = TakedownGaugeCollector(h.state.engine)
        samples = {f.name: f.samples[0].value for f in collector.collect()}
        assert samples == {
            "facegate_takedown_open_cases": 0.0,
            "facegate_takedown_oldest_open_case_age_seconds": 0.0,
        }
        with session_scope(h.state.session_factory) as session:
            case = open_case(session, "test", tenant_id=None, job_id=None)
            case.reported_at = utcnow() - timedelta(hours=40)
        samples = {f.name: f.samples[0].value for f in collector.collect()}
        assert samples["facegate_takedown_open_cases"] == 1.0
        assert samples["facegate_takedown_oldest_open_case_age_seconds"] > 36 * 3600


async def test_a_person_is_erased_inside_a_tenant_with_a_receipt(
    make_client: Any, tmp_path: Path
) -> None:
    create_keys(tmp_path / "provenance")
    async with make_client(provenance_dir=tmp_path / "provenance") as h:
        owner = h.headers("studio", ["jobs:read", "tenant:admin"])
        h.create_tenant("beyond")
        store = tenant_store_for(h.state.settings)
        engine = h.state.face_engine
        with session_scope(h.state.session_factory) as session:
            theirs = [
                add_job(session, store, "studio", source=photo(PERSON, w)) for w in (300, 360)
            ]
            others = [add_job(session, store, "studio", source=photo(OTHER, 300))]
            elsewhere = add_job(session, store, "beyond", source=photo(PERSON, 320))
            saved = LibraryFace(
                tenant_id="studio",
                name="Lead",
                labels=[],
                image_sha256="0" * 64,
                image_content_type="image/jpeg",
                width=1,
                height=1,
                face_index=0,
                face_order="large-small",
                face_box=[0, 0, 1, 1],
                embedding=[float(v) for v in describe_image(engine, photo(PERSON, 280))[0]],
                embedding_kind="dlib_resnet",
                created_by="test",
            )
            session.add(saved)
            session.flush()
            saved_id = saved.id
        response = await h.client.post(
            "/v1/subjects/erase",
            files=[("photo", ("me.jpg", photo("woman_a_frontal_blue_wall_02.jpg", 400)))],
            headers=owner,
        )
        assert response.status_code == 200, response.text
        receipt = response.json()
        statement = receipt["statement"]
        assert statement["kind"] == "subject"
        assert sorted(statement["erased_jobs"]) == sorted(str(j) for j in theirs)
        assert statement["deleted"]["library_faces"] == 1
        assert statement["scan"]["empty"] is True
        keys = load_keys(tmp_path / "provenance")
        made = datetime.fromisoformat(statement["erased_at"])
        assert verify_statement(keys.ca_pem, receipt, at=made) == statement
        gone = await h.client.get(f"/v1/jobs/{theirs[0]}", headers=owner)
        assert gone.status_code == 410
        assert gone.json()["erasure_id"] == statement["id"]
        assert (await h.client.get(f"/v1/jobs/{others[0]}", headers=owner)).status_code == 200
        assert store.store.list(f"tenants/studio/faces/{saved_id}/") == []
        assert chain_ok(h.state)
        # Another tenant's job of the same face is not this tenant's to erase.
        assert len(store.store.list(f"tenants/beyond/inputs/{elsewhere}/")) == 2


async def test_presigned_urls_stop_when_the_case_removes_the_object(
    make_client: Any, tmp_path: Path, moto_endpoint: str, s3_credentials: None
) -> None:
    create_keys(tmp_path / "provenance")
    storage_url = (
        f"s3://fg-{uuid.uuid4().hex[:12]}?endpoint_url={moto_endpoint}&presign_seconds=300"
    )
    async with make_client(storage_url=storage_url, provenance_dir=tmp_path / "provenance") as h:
        owner = h.headers("studio", ["jobs:read", "tenant:admin"])
        store = tenant_store_for(h.state.settings)
        with session_scope(h.state.session_factory) as session:
            job = add_job(session, store, "studio", source=photo(PERSON, 320))
            case_id = open_case(session, "test", tenant_id="studio", job_id=job).id
        redirect = await h.client.get(f"/v1/jobs/{job}/result", headers=owner)
        assert redirect.status_code == 307
        url = redirect.headers["Location"]
        assert httpx.get(url).content == b"result bytes"
        matched = await h.client.post(f"/v1/takedown/cases/{case_id}/match", headers=owner)
        assert [m["id"] for m in matched.json()["matches"]] == [str(job)]
        removed = await h.client.post(f"/v1/takedown/cases/{case_id}/remove", headers=owner)
        assert removed.json()["copies_left"] == 0
        # The URL was signed for 300 s; the object it names is gone: it stops at once (S3
        # answers 404, or 403 to a signer without the right to list the bucket).
        assert httpx.get(url).status_code in (403, 404)
