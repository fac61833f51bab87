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
        return await h.client.get("/v1/admin/tenants", headers={"Authorization": f"Bearer {token}"})


async def test_valid_tokens_of_each_algorithm_authenticate(make_client: Any) -> None:
    tokens = [
        jwt.encode(claims(scope="admin"), HS_SECRET, algorithm="HS256"),
        jwt.encode(claims(scope=["admin"]), RSA_KEY, algorithm="RS256"),
    ]
    async with make_client(**jwt_settings()) as h:
        h.create_tenant("acme")
        for token in tokens:
            response = await h.client.get(
                "/v1/admin/tenants", headers={"Authorization": f"Bearer {token}"}
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


def test_keys_without_issuer_or_audience_fail_loudly() -> None:
    from facegate.settings import Settings
    from facegate.tenancy.jwt import JwtVerifier

    with pytest.raises(ValueError, match="ISSUER"):
        JwtVerifier.from_settings(Settings(_env_file=None, jwt_hs_secret=HS_SECRET))  # type: ignore[call-arg]
    assert JwtVerifier.from_settings(Settings(_env_file=None)) is None  # type: ignore[call-arg]
