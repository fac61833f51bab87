"""API keys through HTTP: format, checksum, revoke, expiry, suspension, scopes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from facegate.database import session_scope, utcnow
from facegate.tenancy import keys
from facegate.tenancy.tables import ApiKey


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_key_format_and_checksum() -> None:
    generated = keys.generate_key()
    parsed = keys.parse_key(generated.token)
    assert parsed is not None
    assert parsed.key_id == generated.key_id
    assert keys.secret_matches(parsed.secret, generated.secret_hash)
    assert generated.secret_hash not in generated.token
    # one changed character anywhere is caught by the checksum, before any lookup
    for position in (4, 20, len(generated.token) - 1):
        char = generated.token[position]
        typo = generated.token[:position] + ("a" if char != "a" else "b")
        typo += generated.token[position + 1 :]
        assert keys.parse_key(typo) is None


async def test_key_authenticates_and_updates_last_used(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("ops")
        token = h.create_key("ops", ["admin"])
        response = await h.client.get("/v1/admin/tenants", headers=bearer(token))
        also_x_api_key = await h.client.get("/v1/admin/tenants", headers={"X-API-Key": token})
        with session_scope(h.state.session_factory) as session:
            key = session.get(ApiKey, keys.parse_key(token).key_id)  # type: ignore[union-attr]
            assert key is not None
            assert key.last_used_at is not None
    assert response.status_code == 200
    assert also_x_api_key.status_code == 200


async def test_refused_keys_are_401_problem_json(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("ops")
        h.create_tenant("gone")
        revoked = h.create_key("ops", ["admin"])
        expiring = h.create_key("ops", ["admin"], expires_at=utcnow() + timedelta(seconds=60))
        suspended = h.create_key("gone", ["admin"])
        admin = h.create_key("ops", ["admin"])
        revoked_id = keys.parse_key(revoked).key_id  # type: ignore[union-attr]
        deleted = await h.client.delete(
            f"/v1/admin/tenants/ops/keys/{revoked_id}", headers=bearer(admin)
        )
        assert deleted.status_code == 200
        assert deleted.json()["revoked_at"] is not None
        with session_scope(h.state.session_factory) as session:
            expiring_id = keys.parse_key(expiring).key_id  # type: ignore[union-attr]
            session.get(ApiKey, expiring_id).expires_at = utcnow() - timedelta(seconds=1)  # type: ignore[union-attr]
        suspend = await h.client.post("/v1/admin/tenants/gone/suspend", headers=bearer(admin))
        assert suspend.status_code == 200
        wrong_secret = admin[:20] + ("A" if admin[20] != "A" else "B") + admin[21:]
        fixed = keys.checksum(wrong_secret[: -keys.CHECKSUM_LENGTH])
        wrong_secret = wrong_secret[: -keys.CHECKSUM_LENGTH] + fixed
        cases = {
            "revoked": revoked,
            "expired": expiring,
            "suspended tenant": suspended,
            "bad checksum": admin[:-1] + ("x" if admin[-1] != "x" else "y"),
            "right id, wrong secret": wrong_secret,
            "not a key": "fg_nope",
        }
        for case, token in cases.items():
            response = await h.client.get("/v1/admin/tenants", headers=bearer(token))
            assert response.status_code == 401, case
            assert response.headers["content-type"] == "application/problem+json", case
        missing = await h.client.get("/v1/admin/tenants")
        basic = await h.client.get("/v1/admin/tenants", headers={"Authorization": "Basic eDp5"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert basic.status_code == 401


async def test_missing_scope_is_403_naming_the_scope(make_client: Any) -> None:
    async with make_client() as h:
        headers = h.headers("acme", ["jobs:read"])
        response = await h.client.get("/v1/admin/tenants", headers=headers)
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["scope"] == "admin"
    assert "admin" in body["detail"]
