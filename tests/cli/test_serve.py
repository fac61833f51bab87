"""``facegate serve --demo``: the printed keys work against the app it starts, and a restart
re-uses them instead of minting new ones."""

from __future__ import annotations

import stat
from typing import Any

from sqlalchemy import select

from facegate.cli.common import cli_actor
from facegate.cli.demo import demo_banner, ensure_demo
from facegate.database import migrate, session_scope
from facegate.observability.audit.tables import AuditEvent


async def test_demo_keys_are_printed_work_and_survive_restarts(make_client: Any) -> None:
    async with make_client() as h:
        settings = h.state.settings
        migrate(settings.database_url)
        first = ensure_demo(settings)
        restarted = ensure_demo(settings)  # a restart with --demo: the same two keys
        banner = demo_banner(settings, first)

        def get(path: str, token: str) -> Any:
            return h.client.get(path, headers={"Authorization": f"Bearer {token}"})

        me = await get("/v1/me", first.user)
        as_tenant = await get("/v1/admin/tenants", first.user)
        as_admin = await get("/v1/admin/tenants", first.admin)
        # A revoked key (or a deleted file) is replaced, and the file follows.
        keys = await get("/v1/admin/tenants/demo/keys", first.admin)
        user_key = next(k for k in keys.json() if k["name"] == "demo")
        await h.client.delete(
            f"/v1/admin/tenants/demo/keys/{user_key['id']}",
            headers={"Authorization": f"Bearer {first.admin}"},
        )
        replaced = ensure_demo(settings)
        with session_scope(h.state.session_factory) as session:
            events = session.scalars(select(AuditEvent).order_by(AuditEvent.seq)).all()
            made = [(e.action, e.actor) for e in events if e.action.startswith(("tenant", "key"))]
    assert first.minted == 2
    assert restarted.minted == 0
    assert (restarted.user, restarted.admin) == (first.user, first.admin)
    assert replaced.minted == 1
    assert replaced.user != first.user
    assert replaced.admin == first.admin
    assert first.user_file.read_text().strip() == replaced.user
    for path in (first.user_file, first.admin_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.user in banner
    assert first.admin in banner
    assert me.status_code == 200
    assert me.json()["tenant_id"] == "demo"
    assert "jobs:write" in me.json()["scopes"]
    assert as_tenant.status_code == 403  # the API key is a tenant key, not an operator key
    assert as_admin.status_code == 200
    # the tenant and each key minted are on the audit trail, made by the CLI's user; the
    # restart that re-used both keys minted (and recorded) nothing
    cli = cli_actor()
    assert made == [
        ("tenant.create", cli),
        ("key.create", cli),
        ("key.create", cli),
        ("key.revoke", made[3][1]),
        ("key.create", cli),
    ]
