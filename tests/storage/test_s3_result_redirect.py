"""On S3 storage the result endpoint redirects to a presigned URL that plain HTTP can fetch;
another tenant's key gets 404 and no URL."""

from __future__ import annotations

import uuid

import httpx
import s3fixtures
from tests.conftest import MakeClient

from facegate.database import session_scope
from facegate.jobs.runtime import tenant_store_for
from facegate.jobs.tables import Job

moto_endpoint = s3fixtures.moto_endpoint
s3_credentials = s3fixtures.s3_credentials


async def test_result_redirects_to_a_presigned_url(
    make_client: MakeClient, moto_endpoint: str, s3_credentials: None
) -> None:
    storage_url = f"s3://fg-{uuid.uuid4().hex[:12]}?endpoint_url={moto_endpoint}&presign_seconds=60"
    async with make_client(storage_url=storage_url) as h:
        headers_a = h.headers("acme")
        headers_b = h.headers("other")
        job_id = uuid.uuid4()
        with session_scope(h.state.session_factory) as session:
            tenant_store_for(h.state.settings).put(
                session,
                tenant_id="acme",
                kind="outputs",
                job_id=job_id,
                name="result.png",
                data=b"\x89PNG the result",
                content_type="image/png",
            )
            session.add(
                Job(
                    id=job_id,
                    tenant_id="acme",
                    status="succeeded",
                    kind="image",
                    spec={"processors": ["face_swapper"]},
                    inputs=["target"],
                    outputs=["result.png"],
                    priority=0,
                    max_attempts=3,
                )
            )
        response = await h.client.get(f"/v1/jobs/{job_id}/result", headers=headers_a)
        assert response.status_code == 307
        location = response.headers["Location"]
        assert location.startswith(f"{moto_endpoint}/")
        assert f"/tenants/acme/outputs/{job_id}/result.png?" in location
        assert "X-Amz-Expires=60" in location
        fetched = httpx.get(location)
        assert fetched.content == b"\x89PNG the result"
        assert f'filename="{job_id}.png"' in fetched.headers["content-disposition"]
        other = await h.client.get(f"/v1/jobs/{job_id}/result", headers=headers_b)
        assert other.status_code == 404
        assert "Location" not in other.headers
