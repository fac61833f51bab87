"""Crafted requests an attacker (or schemathesis) found: each a 4xx naming the problem,
never a 500 and never a server detail in the answer."""

from __future__ import annotations

import json
from typing import Any

from jobhelpers import DEBUG_TENANT_POLICY, photo, submit


async def test_an_audit_cursor_past_64_bits_is_a_422(make_client: Any) -> None:
    async with make_client() as h:
        headers = h.headers("acme", ["audit:read"])
        response = await h.client.get("/v1/audit?after=9223372036854775808", headers=headers)
        assert response.status_code == 422
        assert (
            await h.client.get("/v1/audit?after=9223372036854775807", headers=headers)
        ).is_success


async def test_a_date_before_1970_is_a_400_naming_the_parameter(make_client: Any) -> None:
    async with make_client() as h:
        headers = h.headers("acme", ["usage:read", "audit:read"])
        for path in ("/v1/usage", "/v1/usage/export", "/v1/audit"):
            response = await h.client.get(f"{path}?from=-4772827414", headers=headers)
            assert response.status_code == 400, (path, response.text)
            assert response.json()["limit"] == "from"


async def test_a_path_as_model_name_is_a_422(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        options = {"options": json.dumps({"model": "../../etc/passwd"})}
        response = await submit(h.client, h.headers("acme"), target=photo(), data=options)
        assert response.status_code == 422, response.text
        assert response.json()["type"].endswith("invalid-options")


async def test_a_405_allows_every_method_of_the_path(make_client: Any) -> None:
    async with make_client() as h:
        response = await h.client.request("OPTIONS", "/v1/jobs", headers=h.headers("acme"))
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, HEAD, POST"
        assert response.headers["content-type"] == "application/problem+json"
