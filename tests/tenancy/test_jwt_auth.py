"""JWT identity through HTTP: every refusal is a 401 problem+json."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

HS_SECRET = "an-hs256-secret-of-at-least-32-bytes!!"
ISSUER = "https://issuer.test"
AUDIENCE = "facegate"

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_PUBLIC_PEM = (
    RSA_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    values: dict[str, Any] = {
        "sub": "user-1",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": now + 300,
        "iat": now,
        "tenant": "acme",
        "scope": "jobs:read",
    }
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def jwt_settings(**extra: Any) -> dict[str, Any]:
    return {
        "jwt_hs_secret": HS_SECRET,
        "jwt_public_key": RSA_PUBLIC_PEM,
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        **extra,
    }


def unsigned(payload: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}."


def hs_signed_with_rsa_public_key(payload: dict[str, Any]) -> str:
    # PyJWT refuses a PEM as an HMAC secret when *signing*, so forge it by hand, as an
    # attacker would.
    import hashlib
    import hmac

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = part(json.dumps(payload).encode())
    signature = hmac.new(RSA_PUBLIC_PEM.encode(), f"{header}.{body}".encode(), hashlib.sha256)
    return f"{header}.{body}.{part(signature.digest())}"


async def whoami(make_client: Any, token: str, **settings: Any) -> Any:
    async with make_client(**jwt_settings(**settings)) as h:
        h.create_tenant("acme")
        h.create_tenant("frozen", status="suspended")
        return await h.client.get(
            "/v1/admin/tenants/acme", headers={"Authorization": f"Bearer {token}"}
        )


async def test_valid_tokens_of_each_algorithm_authenticate(make_client: Any) -> None:
    tokens = [
        jwt.encode(claims(scope="admin"), HS_SECRET, algorithm="HS256"),
        jwt.encode(claims(scope=["admin"]), RSA_KEY, algorithm="RS256"),
    ]
    async with make_client(**jwt_settings()) as h:
        h.create_tenant("acme")
        for token in tokens:
            response = await h.client.get(
                "/v1/admin/tenants/acme", headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 200, response.text


async def test_es256_from_jwks_file(make_client: Any, tmp_path: Path) -> None:
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(EC_KEY.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256"}]}))
    token = jwt.encode(claims(scope="admin"), EC_KEY, algorithm="ES256", headers={"kid": "k1"})
    response = await whoami(make_client, token, jwt_public_key=None, jwt_jwks_file=jwks)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("case", "token"),
    [
        ("alg none", unsigned(claims(scope="admin"))),
        ("HS256 signed with the RSA public key", hs_signed_with_rsa_public_key(claims())),
        ("expired", jwt.encode(claims(exp=int(time.time()) - 3600), HS_SECRET, "HS256")),
        ("wrong audience", jwt.encode(claims(aud="someone-else"), HS_SECRET, "HS256")),
        ("wrong issuer", jwt.encode(claims(iss="https://evil.test"), HS_SECRET, "HS256")),
        ("no exp", jwt.encode(claims(exp=None), HS_SECRET, "HS256")),
        ("unknown tenant", jwt.encode(claims(tenant="nobody"), HS_SECRET, "HS256")),
        ("suspended tenant", jwt.encode(claims(tenant="frozen"), HS_SECRET, "HS256")),
        ("no tenant claim", jwt.encode(claims(tenant=None), HS_SECRET, "HS256")),
        ("wrong HS secret", jwt.encode(claims(), "x" * 40, "HS256")),
        ("garbage", "not.a.token"),
    ],
)
async def test_bad_tokens_are_401_problem_json(make_client: Any, case: str, token: str) -> None:
    response = await whoami(make_client, token)
    assert response.status_code == 401, case
    assert response.headers["content-type"] == "application/problem+json"
    # Why a token failed is logged, never answered (it would help tune a forgery).
    detail = response.json()["detail"]
    assert detail in {"invalid token", "unknown tenant", "tenant suspended"}, (case, detail)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["status"] == 401


async def test_rs_token_refused_when_only_hs_is_configured(make_client: Any) -> None:
    token = jwt.encode(claims(scope="admin"), RSA_KEY, algorithm="RS256")
    response = await whoami(make_client, token, jwt_public_key=None)
    assert response.status_code == 401


async def test_claim_names_are_configurable(make_client: Any) -> None:
    token = jwt.encode(
        {**claims(tenant=None, scope=None), "org": "acme", "perms": ["admin"]}, HS_SECRET, "HS256"
    )
    response = await whoami(make_client, token, jwt_tenant_claim="org", jwt_scope_claim="perms")
    assert response.status_code == 200, response.text


async def test_token_without_admin_scope_is_403_naming_it(make_client: Any) -> None:
    token = jwt.encode(claims(scope="jobs:read jobs:write"), HS_SECRET, "HS256")
    response = await whoami(make_client, token)
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["scope"] == "admin"


async def test_a_tokens_admin_scope_administers_only_its_own_tenant(make_client: Any) -> None:
    """An identity provider that may issue ``admin`` to a tenant's user makes that user the
    tenant's admin, never the platform's."""
    token = {"Authorization": f"Bearer {jwt.encode(claims(scope='admin'), HS_SECRET, 'HS256')}"}
    async with make_client(**jwt_settings()) as h:
        h.create_tenant("acme")
        h.create_tenant("globex")
        me = (await h.client.get("/v1/me", headers=token)).json()
        assert me["scopes"] == ["tenant:admin"]
        # its own tenant: readable, keys manageable (but not platform-admin keys)
        assert (
            await h.client.get("/v1/admin/tenants/acme/policy", headers=token)
        ).status_code == 200
        created = await h.client.post(
            "/v1/admin/tenants/acme/keys", headers=token, json={"scopes": ["jobs:read"]}
        )
        assert created.status_code == 201, created.text
        escalate = await h.client.post(
            "/v1/admin/tenants/acme/keys", headers=token, json={"scopes": ["admin"]}
        )
        assert escalate.status_code == 403
        # the platform: nothing
        assert (await h.client.get("/v1/admin/tenants", headers=token)).status_code == 403
        own_policy = {"max_concurrent_jobs": 99}
        put = await h.client.put("/v1/admin/tenants/acme/policy", headers=token, json=own_policy)
        assert put.status_code == 403
        assert (await h.client.get("/v1/admin/bans", headers=token)).status_code == 403
        # another tenant: invisible
        assert (await h.client.get("/v1/admin/tenants/globex", headers=token)).status_code == 404
        keys = await h.client.get("/v1/admin/tenants/globex/keys", headers=token)
        assert keys.status_code == 404
        audit = await h.client.get("/v1/audit", headers=token, params={"tenant": "globex"})
        assert audit.status_code == 403


async def test_platform_admin_by_token_only_with_the_configured_claim(make_client: Any) -> None:
    operator = jwt.encode(claims(scope="admin", fg_platform=True), HS_SECRET, "HS256")
    user = jwt.encode(claims(scope="admin", fg_platform="yes"), HS_SECRET, "HS256")
    async with make_client(**jwt_settings(jwt_platform_admin_claim="fg_platform")) as h:
        h.create_tenant("acme")
        listed = await h.client.get(
            "/v1/admin/tenants", headers={"Authorization": f"Bearer {operator}"}
        )
        assert listed.status_code == 200, listed.text
        refused = await h.client.get(
            "/v1/admin/tenants", headers={"Authorization": f"Bearer {user}"}
        )
        assert refused.status_code == 403  # the claim must be exactly true


def test_keys_without_issuer_or_audience_fail_loudly() -> None:
    from facegate.settings import Settings
    from facegate.tenancy.jwt import JwtVerifier

    with pytest.raises(ValueError, match="ISSUER"):
        JwtVerifier.from_settings(Settings(_env_file=None, jwt_hs_secret=HS_SECRET))  # type: ignore[call-arg]
    assert JwtVerifier.from_settings(Settings(_env_file=None)) is None  # type: ignore[call-arg]
