"""problem+json for engine errors, unhandled errors, wrong methods; OpenAPI declares them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from facegate.api.errors import PROBLEM_RESPONSES
from facegate.engine import errors as engine_errors
from facegate.errors import OutOfStorage, QuotaExceeded

router = APIRouter()


@router.get("/boom/{kind}", responses=PROBLEM_RESPONSES)
def boom(kind: str) -> None:
    if kind == "too-large":
        raise engine_errors.MediaTooLarge(
            "image is over 1000 bytes", limit_name="max_input_bytes", limit=1000, actual=5000
        )
    if kind == "no-face":
        raise engine_errors.NoFaceDetected("no face in the source image")
    if kind == "unsupported":
        raise engine_errors.UnsupportedMedia("not an image")
    if kind == "model":
        raise engine_errors.ModelUnavailable("inswapper_128 is not installed")
    if kind == "queue":
        raise QuotaExceeded("queue full", limit="max_queued_jobs", value=3, retry_after=30)
    if kind == "storage":
        raise OutOfStorage("storage full", limit="storage_quota_bytes")
    raise RuntimeError("secret database password in this message")


async def call(make_client: Any, path: str, **kwargs: Any) -> Any:
    async with make_client(raise_app_exceptions=False) as h:
        h.app.include_router(router)
        return await h.client.get(path, **kwargs)


async def test_engine_errors_map_to_statuses(make_client: Any) -> None:
    expected = {"too-large": 413, "no-face": 422, "unsupported": 415, "model": 503}
    for kind, status in expected.items():
        response = await call(make_client, f"/boom/{kind}")
        assert response.status_code == status, kind
        assert response.headers["content-type"] == "application/problem+json"
    body = (await call(make_client, "/boom/too-large")).json()
    assert body["limit"] == "max_input_bytes"
    assert body["limit_value"] == 1000


async def test_quota_names_the_limit_and_retry_after(make_client: Any) -> None:
    queue = await call(make_client, "/boom/queue")
    storage = await call(make_client, "/boom/storage")
    assert queue.status_code == 429
    assert queue.headers["retry-after"] == "30"
    assert queue.json()["limit"] == "max_queued_jobs"
    assert storage.status_code == 507
    assert storage.json()["limit"] == "storage_quota_bytes"


async def test_unhandled_error_is_500_that_leaks_nothing(make_client: Any) -> None:
    response = await call(make_client, "/boom/crash")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "password" not in response.text
    assert response.json()["request_id"] == response.headers["x-request-id"]


async def test_wrong_method_is_405_problem(make_client: Any) -> None:
    async with make_client() as h:
        response = await h.client.delete("/healthz")
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/problem+json"
    assert "allow" in response.headers


async def test_hsts_only_with_tls(make_client: Any, tmp_path: Any) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("x")
    key.write_text("x")
    async with make_client(tls_cert=cert, tls_key=key) as h:
        with_tls = await h.client.get("/healthz")
    async with make_client() as h:
        without = await h.client.get("/healthz")
    assert with_tls.headers["strict-transport-security"].startswith("max-age=")
    assert "strict-transport-security" not in without.headers


async def test_openapi_declares_problem_json_and_every_route_needs_auth(make_client: Any) -> None:
    async with make_client() as h:
        spec = (await h.client.get("/openapi.json")).json()
        public = {"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
        for route in h.app.routes:
            path = getattr(route, "path", "")
            if path in public:
                continue
            for method in getattr(route, "methods", set()) - {"HEAD", "OPTIONS"}:
                response = await h.client.request(method, path.replace("{", "x").replace("}", ""))
                assert response.status_code == 401, (method, path)
    responses = spec["paths"]["/v1/admin/tenants"]["get"]["responses"]
    assert "application/problem+json" in responses["401"]["content"]
    # Either credential authenticates, and the schema says so on every protected operation.
    assert spec["components"]["securitySchemes"]["APIKeyHeader"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
    }
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path in ("/v1/jobs/{job_id}", "/v1/admin/tenants", "/v1/me"):
        security = spec["paths"][path]["get"]["security"]
        assert security == [{"HTTPBearer": []}, {"APIKeyHeader": []}], path
    assert "security" not in spec["paths"]["/healthz"]["get"]
