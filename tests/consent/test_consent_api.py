"""Consent per source face through ``POST /v1/jobs``: with ``require_consent`` a job using a
sensitive processor needs one attestation per source (refused at the door otherwise, nothing
stored), an attestation is stored append-only with the source's sha256, the job and its
result's C2PA manifest reference it, and the audit trail records it; without the policy
nothing is asked."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.api.jobhelpers import (
    count_jobs,
    count_objects,
    is_problem,
    job_files,
    photo,
    wait_terminal,
)

from facegate.consent.tables import ConsentAttestation
from facegate.database import session_scope, utcnow
from facegate.errors import InvalidInput
from facegate.jobs.policy import allowed_options
from facegate.jobs.runtime import tenant_store_for
from facegate.jobs.service import JobService, Submission, prepare_job, store_inputs
from facegate.observability.audit.tables import AuditEvent
from facegate.provenance.keys import load_keys
from facegate.provenance.reading import read_manifest
from facegate.tenancy.service import TenancyService
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(120)

POLICY = {"allowed_processors": ["face_swapper", "face_debugger"], "require_consent": True}
SWAP = json.dumps({"processors": ["face_swapper"]})
CONSENT = {"attested_by": "Jane Roe (casting, Acme)", "statement_version": "2026-11"}


async def post(h: Any, headers: dict[str, str], sources: list[bytes], **data: str) -> Any:
    return await h.client.post(
        "/v1/jobs", headers=headers, files=job_files(photo(), sources), data=data
    )


async def test_required_consent_refused_then_recorded(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **POLICY)
        headers = h.headers("studio")
        source = photo("man_frontal_glasses.jpg")

        missing = await post(h, headers, [source], options=SWAP)
        assert missing.status_code == 422
        assert is_problem(missing)
        assert missing.json()["type"].endswith("consent-required")
        assert "face_swapper" in missing.json()["detail"]
        bad = [
            [CONSENT, CONSENT],  # two attestations for one source
            {**CONSENT, "attested_at": (utcnow() + timedelta(days=1)).isoformat()},
            {**CONSENT, "attested_by": "  "},
            "not json",
        ]
        for consent in bad:
            raw = consent if isinstance(consent, str) else json.dumps(consent)
            refused = await post(h, headers, [source], options=SWAP, consent=raw)
            assert refused.status_code == 422, refused.text
            assert refused.json()["type"].endswith("invalid-consent")
        assert count_jobs(h.state) == 0
        assert count_objects(h.state) == 0

        attested_at = (utcnow() - timedelta(days=2)).isoformat()
        consent = json.dumps([{**CONSENT, "attested_at": attested_at}])
        accepted = await post(h, headers, [source], options=SWAP, consent=consent)
        assert accepted.status_code == 202, accepted.text
        job = accepted.json()
        [ref] = job["consent"]
        assert ref["source"] == "source-0"
        assert ref["source_sha256"] == hashlib.sha256(source).hexdigest()
        assert ref["attested_by"] == CONSENT["attested_by"]
        assert ref["statement_version"] == "2026-11"
        again = (await h.client.get(f"/v1/jobs/{job['id']}", headers=headers)).json()
        assert again["consent"] == job["consent"]

        with session_scope(h.state.session_factory) as session:
            row = session.get(ConsentAttestation, uuid.UUID(ref["attestation_id"]))
            assert row is not None
            assert (row.tenant_id, row.source_sha256) == ("studio", ref["source_sha256"])
            assert row.recorded_by.startswith("key:")
            events = {
                e.action: e
                for e in session.scalars(select(AuditEvent).where(AuditEvent.tenant_id == "studio"))
            }
        assert events["consent.attest"].target == f"job:{job['id']}"
        assert events["consent.attest"].details["consent"][0]["attestation_id"] == str(row.id)
        sensitive = events["job.sensitive_processors"].details
        assert sensitive["processors"] == ["face_swapper"]
        assert sensitive["inputs"]["source-0"] == ref["source_sha256"]
        assert sensitive["inputs"]["target"] == hashlib.sha256(photo()).hexdigest()


async def test_consent_asked_only_where_needed(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **POLICY)
        h.create_tenant("relaxed", allowed_processors=["face_swapper"])
        studio, relaxed = h.headers("studio"), h.headers("relaxed")
        caps = (await h.client.get("/v1/capabilities", headers=studio)).json()
        assert caps["require_consent"] is True
        # face_debugger is not sensitive: no consent needed even with the policy on
        debug = json.dumps({"processors": ["face_debugger"]})
        assert (await post(h, studio, [photo()], options=debug)).status_code == 202
        # without the policy no consent is asked; one given is still recorded
        assert (await post(h, relaxed, [photo()], options=SWAP)).status_code == 202
        given = await post(h, relaxed, [photo()], options=SWAP, consent=json.dumps(CONSENT))
        assert given.json()["consent"][0]["statement_version"] == "2026-11"


async def test_the_result_manifest_references_the_consent(make_client: Any, tmp_path: Path) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **POLICY)
        headers = h.headers("studio")
        consent = json.dumps(CONSENT)
        submitted = await post(
            h, headers, [photo("man_frontal_glasses.jpg")], options=SWAP, consent=consent
        )
        job = await wait_terminal(h.client, headers, submitted.json()["id"])
        assert job["status"] == "succeeded", job
        result = await h.client.get(f"/v1/jobs/{job['id']}/result", headers=headers)
        path = tmp_path / "result.jpg"
        path.write_bytes(result.content)
        keys = load_keys(h.state.settings.provenance_path)
        finding = read_manifest(keys, path, "image/jpeg")
        assert finding.state == "valid"
        assert finding.consent == [ref["attestation_id"] for ref in job["consent"]]


NO_SOURCE = {"allowed_processors": ["age_modifier", "expression_restorer"], "require_consent": True}


@pytest.mark.parametrize("processor", ["age_modifier", "expression_restorer"])
async def test_a_sensitive_job_without_a_source_needs_the_target_persons_consent(
    make_client: Any, processor: str
) -> None:
    """age_modifier and expression_restorer alone change the target's own face: under
    require_consent the one attestation is the target's, recorded with its sha256. Through
    the submission service (their models are not installed here, so the API answers 409
    before it gets there)."""
    async with make_client() as h:
        h.create_tenant("studio", **NO_SOURCE)
        store = tenant_store_for(h.state.settings)

        def submit(consent: str | None) -> Any:
            with session_scope(h.state.session_factory) as session:
                policy = TenancyService(session).get_policy("studio")
                submission = Submission(
                    tenant_id="studio",
                    sources=[],
                    target=photo(),
                    options=allowed_options(json.dumps({"processors": [processor]}), policy),
                    consent=consent,
                    actor="key:test",
                )
                service = JobService(session, store)
                assert service.precheck(submission, policy) is None
                prepared = prepare_job(submission, policy)
                store_inputs(store, [prepared])
                return service.submit(prepared, policy).job.consent

        with pytest.raises(InvalidInput) as missing:
            submit(None)
        assert missing.value.code == "consent-required"
        assert "target" in missing.value.detail
        assert count_jobs(h.state) == 0
        [ref] = submit(json.dumps(CONSENT))
        assert ref["source"] == "target"
        assert ref["source_sha256"] == hashlib.sha256(photo()).hexdigest()


async def test_a_job_queued_before_require_consent_fails_when_the_worker_starts_it(
    make_client: Any,
) -> None:
    """The policy of now holds at the job's start: switched on while a sensitive job waits
    without an attestation, the worker fails it ``consent-required``; one with its
    attestation, and one with no sensitive processor, still run."""
    processors = ["face_swapper", "face_debugger"]
    async with make_client(workers=1) as h:
        h.create_tenant("studio", allowed_processors=processors)
        headers = h.headers("studio")
        source = [photo("man_frontal_glasses.jpg")]
        bare = (await post(h, headers, source, options=SWAP)).json()
        attested = (
            await post(h, headers, source, options=SWAP, consent=json.dumps(CONSENT))
        ).json()
        debug = json.dumps({"processors": ["face_debugger"]})
        plain = (await post(h, headers, source, options=debug)).json()
        assert {bare["status"], attested["status"], plain["status"]} == {"queued"}

        admin = h.headers("ops", ["admin"])
        switched = await h.client.put(
            "/v1/admin/tenants/studio/policy",
            headers=admin,
            json={"allowed_processors": processors, "require_consent": True},
        )
        assert switched.status_code == 200, switched.text
        async with workers_service(h.state):
            failed = await wait_terminal(h.client, headers, bare["id"])
            ran = await wait_terminal(h.client, headers, attested["id"])
            debugged = await wait_terminal(h.client, headers, plain["id"])
        assert failed["status"] == "failed", failed
        assert failed["error"]["type"].endswith("consent-required")
        assert "source-0" in failed["error"]["detail"]
        assert ran["status"] == "succeeded", ran
        assert debugged["status"] == "succeeded", debugged
