"""``facegate serve --demo``: the printed key works against the app it starts."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from facegate.cli.common import cli_actor
from facegate.cli.serve import create_demo_key, demo_banner
from facegate.database import migrate, session_scope
from facegate.observability.audit.models import AuditEvent


async def test_demo_key_is_printed_and_works(make_client: Any) -> None:
    async with make_client() as h:
        settings = h.state.settings
        migrate(settings.database_url)
        token = create_demo_key(settings)
        second = create_demo_key(settings)  # a restart with --demo: same tenant, new key
        banner = demo_banner(settings, token)
        me = await h.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
        admin = await h.client.get(
            "/v1/admin/tenants", headers={"Authorization": f"Bearer {second}"}
        )
    assert token != second
    assert token in banner
    assert "curl -H" in banner
    assert me.status_code == 200
    assert me.json()["tenant_id"] == "demo"
    assert "jobs:write" in me.json()["scopes"]
    assert admin.status_code == 403  # the demo key is a tenant key, not an operator key
    # the tenant and both keys are on the audit trail, made by the CLI's user
    with session_scope(h.state.session_factory) as session:
        events = session.scalars(select(AuditEvent).order_by(AuditEvent.seq)).all()
        made = [(e.action, e.actor) for e in events if e.action != "admin.read"]
    assert made == [
        ("tenant.create", cli_actor()),
        ("key.create", cli_actor()),
        ("key.create", cli_actor()),
    ]
