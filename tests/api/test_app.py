from __future__ import annotations

from typing import Any


async def test_healthz_is_public_and_has_request_id(make_client: Any) -> None:
    async with make_client() as h:
        response = await h.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert len(response.headers["x-request-id"]) == 32


async def test_sane_request_id_is_kept_and_odd_one_replaced(make_client: Any) -> None:
    async with make_client() as h:
        kept = await h.client.get("/healthz", headers={"X-Request-ID": "abc-123-def-456"})
        replaced = await h.client.get("/healthz", headers={"X-Request-ID": "bad id\twith<>"})
    assert kept.headers["x-request-id"] == "abc-123-def-456"
    assert replaced.headers["x-request-id"] != "bad id\twith<>"


async def test_unknown_route_is_problem_json(make_client: Any) -> None:
    async with make_client() as h:
        response = await h.client.get("/nope")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == 404
    assert body["type"].endswith("/not-found")
    assert body["request_id"] == response.headers["x-request-id"]
