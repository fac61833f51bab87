"""Every result is marked (C2PA manifest + watermark) through the real API, in every image
output format; POST /v1/verify reads both back and tells the owner (only) which job; a
tampered file is reported as tampered; bad uploads get the job upload's errors and leave
nothing behind."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import c2pa
import httpx
import pytest
from sqlalchemy import select
from tests.api.jobhelpers import (
    DEBUG_TENANT_POLICY,
    count_objects,
    is_problem,
    load_badmedia,
    photo,
    submit,
    wait_terminal,
)

from facegate.database import session_scope
from facegate.observability.audit.tables import AuditEvent
from facegate.principal import ALL_SCOPES
from facegate.provenance.keys import load_keys
from facegate.provenance.manifest import DIGITAL_SOURCE_TYPE
from facegate.provenance.tables import ProvenanceMark
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)

IMAGE_FORMATS = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}


def c2pa_state(data: bytes, mime: str, ca_pem: bytes) -> tuple[str | None, dict[str, Any]]:
    """c2pa's own reader, trusting this installation's CA: (validation state, manifest)."""
    context = c2pa.Context.from_dict(
        {"trust": {"trust_anchors": ca_pem.decode()}, "verify": {"verify_trust": True}}
    )
    with c2pa.Reader(mime, io.BytesIO(data), context=context) as reader:
        store = json.loads(reader.json())
        return reader.get_validation_state(), store["manifests"][store["active_manifest"]]


async def marked_result(
    client: Any, headers: dict[str, str], width: int = 320, **options: Any
) -> tuple[str, bytes]:
    """(job id, result bytes) of a face_debugger job on a small photo ``width`` wide."""
    options = {"processors": ["face_debugger"], **options}
    response = await submit(
        client, headers, target=photo(width=width), data={"options": json.dumps(options)}
    )
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, headers, response.json()["id"])
    assert job["status"] == "succeeded", job
    download = await client.get(f"/v1/jobs/{job['id']}/result", headers=headers)
    return job["id"], download.content


async def verify(client: Any, data: bytes, headers: dict[str, str] | None = None) -> Any:
    response = await client.post(
        "/v1/verify", headers=headers or {}, files=[("file", ("x.bin", data, "image/jpeg"))]
    )
    assert response.status_code == 200, response.text
    return response.json()


def audit_events(state: Any) -> list[AuditEvent]:
    with session_scope(state.session_factory) as session:
        return list(
            session.scalars(select(AuditEvent).where(AuditEvent.action == "provenance.verify"))
        )


async def test_every_image_format_is_marked_and_verified_for_its_owner_only(
    make_client: Any,
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        other = h.headers("rival")
        ca_pem = load_keys(h.state.settings.provenance_path).ca_pem
        results: dict[str, tuple[str, bytes]] = {}
        for fmt in IMAGE_FORMATS:
            results[fmt] = await marked_result(h.client, owner, output={"format": fmt})

        for fmt, (job_id, data) in results.items():
            # c2pa's own reader validates the manifest, signed by this installation's CA.
            state, manifest = c2pa_state(data, IMAGE_FORMATS[fmt], ca_pem)
            assert state == "Trusted", fmt
            text = json.dumps(manifest)
            assert DIGITAL_SOURCE_TYPE in text
            assert "face_debugger" in text
            # The job reference is opaque: no tenant, no job id, no file name.
            assert "studio" not in text
            assert job_id not in text
            assert "t.jpg" not in text

            mine = await verify(h.client, data, owner)
            assert mine["media"] == "image"
            assert mine["manifest"]["state"] == "valid"
            assert mine["manifest"]["signed_by_this_installation"]
            assert mine["watermark"]["found"], fmt
            assert mine["watermark"]["by_this_installation"]
            assert mine["made_by_this_installation"]
            assert mine["made_at"] is not None
            assert mine["job"]["job_id"] == job_id
            assert mine["job"]["tenant_id"] == "studio"
            assert sorted(mine["job"]["traced_by"]) == ["manifest", "watermark"]

            # Another tenant and the public learn that this installation made it (not when, nor
            # which job).
            for headers in (other, None):
                seen = await verify(h.client, data, headers)
                assert seen["made_by_this_installation"]
                assert seen["made_at"] is None
                assert seen["job"] is None
                assert job_id not in json.dumps(seen)

        events = audit_events(h.state)
        assert len(events) == 3 * len(IMAGE_FORMATS)
        assert {e.tenant_id for e in events} == {"studio"}
        assert sorted(e.details["disclosed"] for e in events) == [False] * 6 + [True] * 3


async def test_tampered_stripped_and_unmarked_files(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        _, data = await marked_result(h.client, owner)

        # Pixels changed after signing: the manifest no longer matches the file.
        tampered = bytearray(data)
        tampered[-200] ^= 0x55
        result = await verify(h.client, bytes(tampered), owner)
        assert result["manifest"]["state"] == "tampered"
        assert result["manifest"]["failures"]
        assert not result["manifest"]["signed_by_this_installation"]

        # Re-encoded (the manifest stripped, as any re-save does): the watermark still traces it.
        from PIL import Image

        out = io.BytesIO()
        Image.open(io.BytesIO(data)).save(out, "JPEG", quality=85)
        stripped = await verify(h.client, out.getvalue(), owner)
        assert stripped["manifest"]["state"] == "absent"
        assert stripped["watermark"]["found"]
        assert stripped["made_by_this_installation"]
        assert stripped["job"]["traced_by"] == ["watermark"]

        # A photo this installation never touched.
        clean = await verify(h.client, photo(width=320), owner)
        assert clean["manifest"]["state"] == "absent"
        assert not clean["watermark"]["found"]
        assert not clean["made_by_this_installation"]
        assert clean["made_at"] is None


async def test_bad_uploads_get_the_job_upload_errors_and_nothing_is_stored(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    badmedia = load_badmedia()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # Anonymous: the public upload budget is the one that applies.
    async with make_client(
        services=[workers_service], workers=1, public_upload_max_bytes=badmedia.DEFAULT_MAX_BYTES
    ) as h:
        for bad in badmedia.bad_inputs():
            response = await h.client.post(
                "/v1/verify", files=[("file", ("x.jpg", bad.data, "image/jpeg"))]
            )
            assert 400 <= response.status_code < 500, (bad.name, response.text)
            assert is_problem(response), bad.name
            assert response.json()["type"].endswith(bad.error.code), bad.name
        assert count_objects(h.state) == 0
        with session_scope(h.state.session_factory) as session:
            assert session.scalars(select(ProvenanceMark)).first() is None
    # Once the app stopped (its worker's scratch folder goes with it), nothing is left.
    assert list(scratch.iterdir()) == []


async def test_a_public_report_reaches_the_owner_with_the_job_and_the_admins(
    make_client: Any,
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        owner_auditor = h.headers("studio", ["audit:read"])
        rival_auditor = h.headers("rival", ["audit:read"])
        admin = h.headers("ops", scopes=ALL_SCOPES)
        job_id, data = await marked_result(h.client, owner)

        report = await h.client.post(
            "/v1/reports",
            files=[("file", ("found.jpg", data, "image/jpeg"))],
            data={"message": "posted on a forum as real", "contact": "reporter@example.org"},
        )
        assert report.status_code == 202, report.text
        assert report.json()["made_by_this_installation"]
        assert job_id not in report.text  # the reporter learns nothing of the job
        untraced = await h.client.post(
            "/v1/reports",
            files=[("file", ("other.jpg", photo(width=320), "image/jpeg"))],
            data={"message": "is this one yours?"},
        )
        assert untraced.status_code == 202
        assert not untraced.json()["made_by_this_installation"]
        empty = await h.client.post(
            "/v1/reports", files=[("file", ("x.jpg", data, "image/jpeg"))], data={"message": ""}
        )
        assert empty.status_code == 422

        def reports(page: httpx.Response) -> list[dict[str, Any]]:
            return [e for e in page.json()["events"] if e["action"] == "provenance.report"]

        seen = reports(await h.client.get("/v1/audit", headers=owner_auditor))
        assert [e["target"] for e in seen] == [f"job:{job_id}"]
        assert seen[0]["details"]["message"] == "posted on a forum as real"
        assert sorted(seen[0]["details"]["traced_by"]) == ["manifest", "watermark"]
        assert reports(await h.client.get("/v1/audit", headers=rival_auditor)) == []
        everything = reports(await h.client.get("/v1/audit", headers=admin))
        assert [e["target"] for e in everything] == [f"job:{job_id}", "provenance:untraced"]
