"""JWT verification (PyJWT) with algorithms pinned per key.

Each configured key verifies only its own family: the HS secret only HS256, an RSA public
key only RS256, a P-256 key only ES256. A token is checked against the keys whose algorithm
equals the token's header ``alg``; ``none`` and any algorithm without a key of its own have
no candidate and fail, which is what defeats ``alg: none`` and HS/RS key confusion (an RSA
public key is never used as an HMAC secret). ``exp``, ``iss`` and ``aud`` are required.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from facegate.settings import Settings


class InvalidToken(Exception):
    """The token is not acceptable; the message says why (for logs, not for clients)."""


@dataclass(frozen=True)
class VerificationKey:
    algorithm: str
    key: Any
    kid: str | None = None


@dataclass(frozen=True)
class VerifiedToken:
    subject: str
    tenant_id: str
    scopes: frozenset[str]
    claims: dict[str, Any] = field(repr=False)


def _pem_key(pem: str) -> VerificationKey:
    public_key = load_pem_public_key(pem.encode())
    if isinstance(public_key, rsa.RSAPublicKey):
        return VerificationKey("RS256", public_key)
    if isinstance(public_key, ec.EllipticCurvePublicKey) and isinstance(
        public_key.curve, ec.SECP256R1
    ):
        return VerificationKey("ES256", public_key)
    raise ValueError("the JWT public key must be RSA or EC P-256")


_JWK_ALGORITHMS = {"RSA": "RS256", "EC": "ES256", "oct": "HS256"}


def _jwks_keys(path: Path) -> list[VerificationKey]:
    document = json.loads(path.read_text())
    found: list[VerificationKey] = []
    for jwk in document.get("keys", []):
        algorithm = _JWK_ALGORITHMS.get(jwk.get("kty", ""))
        if algorithm is None or jwk.get("alg", algorithm) != algorithm:
            continue  # a key that claims another algorithm than its type allows is skipped
        if jwk.get("use", "sig") != "sig":
            continue
        key = jwt.PyJWK(jwk, algorithm=algorithm)
        found.append(VerificationKey(algorithm, key.key, jwk.get("kid")))
    return found


class JwtVerifier:
    """Verifies bearer tokens against configured keys, issuer and audience."""

    def __init__(
        self,
        keys: Sequence[VerificationKey],
        *,
        issuer: str,
        audience: str,
        tenant_claim: str = "tenant",
        scope_claim: str = "scope",
        leeway_seconds: int = 30,
        platform_admin_claim: str | None = None,
    ) -> None:
        self.keys = list(keys)
        self.issuer = issuer
        self.audience = audience
        self.tenant_claim = tenant_claim
        self.scope_claim = scope_claim
        self.leeway_seconds = leeway_seconds
        self.platform_admin_claim = platform_admin_claim

    @classmethod
    def from_settings(cls, settings: Settings) -> JwtVerifier | None:
        if not settings.jwt_enabled:
            has_key = settings.jwt_hs_secret or settings.jwt_public_key
            if has_key or settings.jwt_public_key_file or settings.jwt_jwks_file:
                # Keys without issuer/audience would silently accept no token at all.
                raise ValueError(
                    "JWT keys are configured: set FACEGATE_JWT_ISSUER and FACEGATE_JWT_AUDIENCE too"
                )
            return None
        assert settings.jwt_issuer is not None
        assert settings.jwt_audience is not None
        allowed = set(settings.jwt_algorithms)
        keys: list[VerificationKey] = []
        if settings.jwt_hs_secret is not None:
            keys.append(VerificationKey("HS256", settings.jwt_hs_secret.get_secret_value()))
        if settings.jwt_public_key:
            keys.append(_pem_key(settings.jwt_public_key))
        if settings.jwt_public_key_file is not None:
            keys.append(_pem_key(settings.jwt_public_key_file.read_text()))
        if settings.jwt_jwks_file is not None:
            keys.extend(_jwks_keys(settings.jwt_jwks_file))
        return cls(
            [key for key in keys if key.algorithm in allowed],
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            tenant_claim=settings.jwt_tenant_claim,
            scope_claim=settings.jwt_scope_claim,
            leeway_seconds=settings.jwt_leeway_seconds,
            platform_admin_claim=settings.jwt_platform_admin_claim,
        )

    def grants_platform_admin(self, token: VerifiedToken) -> bool:
        """Whether ``token`` makes a platform operator: only with the configured claim set
        to ``true``. Without it a token's ``admin`` scope administers its own tenant."""
        claim = self.platform_admin_claim
        return claim is not None and token.claims.get(claim) is True

    def verify(self, token: str) -> VerifiedToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"malformed token: {exc}") from exc
        algorithm, kid = header.get("alg"), header.get("kid")
        candidates = [
            key
            for key in self.keys
            if key.algorithm == algorithm and (kid is None or key.kid in (None, kid))
        ]
        if not candidates:
            raise InvalidToken(f"no key accepts algorithm {algorithm!r}")
        last_error: Exception | None = None
        for candidate in candidates:
            try:
                claims = jwt.decode(
                    token,
                    candidate.key,
                    algorithms=[candidate.algorithm],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway_seconds,
                    options={"require": ["exp", "iss", "aud", "sub"]},
                )
            except jwt.InvalidSignatureError as exc:
                last_error = exc  # try the next key of the same algorithm (rotation)
                continue
            except jwt.PyJWTError as exc:
                raise InvalidToken(str(exc)) from exc
            return self._principal_claims(claims)
        raise InvalidToken(f"signature verification failed: {last_error}")

    def _principal_claims(self, claims: dict[str, Any]) -> VerifiedToken:
        tenant = claims.get(self.tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise InvalidToken(f"claim {self.tenant_claim!r} missing")
        raw_scopes = claims.get(self.scope_claim, [])
        if isinstance(raw_scopes, str):
            raw_scopes = raw_scopes.split()
        if not isinstance(raw_scopes, list) or not all(isinstance(s, str) for s in raw_scopes):
            raise InvalidToken(f"claim {self.scope_claim!r} must be a string or a list")
        return VerifiedToken(
            subject=str(claims["sub"]),
            tenant_id=tenant,
            scopes=frozenset(raw_scopes),
            claims=claims,
        )
