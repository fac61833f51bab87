"""Platform keys are out of every tenant's reach: a key with the platform ``admin`` scope
lives in a tenant's rows (``serve --demo`` puts the admin key in ``demo``), yet neither that
tenant's ``tenant:admin`` key nor a JWT its identity provider signed lists or revokes it
(404, as for a missing key), while the platform admin still does. A tenant admin grants
only the scopes it holds."""

from __future__ import annotations

from typing import Any

import jwt
from tests.tenancy.test_jwt_auth import HS_SECRET, claims, jwt_settings

from facegate.database import session_scope
from facegate.tenancy.schemas import KeyCreate
from facegate.tenancy.service import TenancyService


def _platform_key(h: Any, tenant_id: str) -> tuple[str, dict[str, str]]:
    """A platform admin key minted in ``tenant_id`` (as ``serve --demo`` does): its id and
    its headers."""
    request = KeyCreate.model_validate({"name": "demo admin", "scopes": ["admin"]})
    with session_scope(h.state.session_factory) as session:
        created = TenancyService(session).create_key(tenant_id, request)
        key_id, token = created.key.id, created.token
    return key_id, {"Authorization": f"Bearer {token}"}


async def test_a_tenant_admin_key_neither_sees_nor_revokes_the_platform_key(
    make_client: Any,
) -> None:
    async with make_client() as h:
        h.create_tenant("demo")
        platform_id, platform = _platform_key(h, "demo")
        tenant_admin = h.headers("demo", ("tenant:admin",))
        keys = "/v1/admin/tenants/demo/keys"

        listed = await h.client.get(keys, headers=tenant_admin)
        assert listed.status_code == 200, listed.text
        assert platform_id not in [key["id"] for key in listed.json()]
        assert all("admin" not in key["scopes"] for key in listed.json())

        revoked = await h.client.delete(f"{keys}/{platform_id}", headers=tenant_admin)
        assert revoked.status_code == 404, revoked.text
        assert revoked.json()["detail"] == f"key {platform_id!r} does not exist"
        # the same answer as a key that does not exist at all
        missing = await h.client.delete(f"{keys}/AAAAAAAAAAAA", headers=tenant_admin)
        assert missing.status_code == 404
        assert (await h.client.get("/v1/admin/tenants", headers=platform)).status_code == 200

        # the platform admin still sees and revokes it
        seen = await h.client.get(keys, headers=platform)
        assert platform_id in [key["id"] for key in seen.json()]
        gone = await h.client.delete(f"{keys}/{platform_id}", headers=platform)
        assert gone.status_code == 200, gone.text
        assert (await h.client.get("/v1/admin/tenants", headers=platform)).status_code == 401


async def test_a_tenant_jwt_neither_sees_nor_revokes_the_platform_key(make_client: Any) -> None:
    async with make_client(**jwt_settings()) as h:
        h.create_tenant("acme")
        platform_id, platform = _platform_key(h, "acme")
        # a JWT's admin scope becomes tenant:admin of its own tenant
        token = jwt.encode(claims(scope="admin", sub="it@acme"), HS_SECRET, algorithm="HS256")
        idp_admin = {"Authorization": f"Bearer {token}"}
        keys = "/v1/admin/tenants/acme/keys"

        listed = await h.client.get(keys, headers=idp_admin)
        assert listed.status_code == 200, listed.text
        assert platform_id not in [key["id"] for key in listed.json()]
        revoked = await h.client.delete(f"{keys}/{platform_id}", headers=idp_admin)
        assert revoked.status_code == 404, revoked.text
        assert (await h.client.get("/v1/admin/tenants", headers=platform)).status_code == 200


async def test_a_tenant_admin_grants_only_what_it_holds(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio")
        keys = "/v1/admin/tenants/studio/keys"
        tenant_admin = h.headers("studio", ("tenant:admin",))
        for scope in ("audit:read", "models:write", "director", "tenant:admin"):
            made = await h.client.post(keys, headers=tenant_admin, json={"scopes": [scope]})
            assert made.status_code == 201, (scope, made.text)
        refused = await h.client.post(keys, headers=tenant_admin, json={"scopes": ["admin"]})
        assert refused.status_code == 403
        assert refused.json()["scope"] == "admin"
