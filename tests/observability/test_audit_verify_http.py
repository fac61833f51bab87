"""``GET /v1/audit/verify``: the chain check the console's audit page shows (it used to 404),
platform admins only; an edited row is named like ``facegate audit verify`` names it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from facegate.observability.audit.tables import AuditEvent


async def test_verify_over_http_names_an_edited_row(make_client: Any) -> None:
    async with make_client() as h:
        admin = h.headers("ops", ["admin"])
        tenant = h.headers("acme")
        for name in ("one", "two"):  # audited key creations: a chain of events
            created = await h.client.post(
                "/v1/admin/tenants/acme/keys", json={"name": name}, headers=admin
            )
            assert created.status_code == 201, created.text
        intact = await h.client.get("/v1/audit/verify", headers=admin)
        refused = await h.client.get("/v1/audit/verify", headers=tenant)
        with h.state.engine.begin() as conn:
            conn.execute(update(AuditEvent).where(AuditEvent.seq == 1).values(target="forged"))
        broken = await h.client.get("/v1/audit/verify", headers=admin)
    assert intact.status_code == 200, intact.text
    assert intact.json()["ok"] is True
    assert intact.json()["rows"] >= 2
    assert intact.json()["head_seq"] == intact.json()["rows"]
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert broken.json()["ok"] is False
    assert broken.json()["problems"][0]["seq"] == 1
    assert broken.json()["problems"][0]["kind"] == "edited"


async def test_the_console_icon_is_served(make_client: Any) -> None:
    async with make_client() as h:
        page = await h.client.get("/")
        icon = await h.client.get("/favicon.ico")
        named = await h.client.get("/assets/favicon.svg")
    assert 'rel="icon" href="/assets/favicon.svg"' in page.text
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert named.status_code == 200
    assert named.content == icon.content
