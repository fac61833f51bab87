"""Credentials -> Principal: an API key (``Authorization: Bearer fg_...`` or ``X-API-Key``)
or a JWT bearer token. Anything else, and any tenant that is unknown or suspended, is 401.

A suspended tenant's credentials answer **401** (not 403): suspension withdraws the
tenant's identity, exactly like an unknown tenant, and JWTs of suspended tenants must be
refused the same way.
"""

from __future__ import annotations

from datetime import datetime

import structlog
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.errors import Unauthenticated
from facegate.principal import ALL_SCOPES, PLATFORM_ADMIN, TENANT_ADMIN, Principal
from facegate.tenancy import keys
from facegate.tenancy.jwt import InvalidToken, JwtVerifier
from facegate.tenancy.keycache import key_cache
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.service import LAST_USED_RESOLUTION

log = structlog.get_logger(__name__)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    return token.strip()


def cached_principal(authorization: str | None, api_key: str | None) -> Principal | None:
    """The principal of an API key verified a moment ago (:mod:`facegate.tenancy.keycache`),
    without touching the database; None when the full path must run (a miss, a JWT, a
    malformed header: :func:`authenticate` then gives the answer and its error)."""
    try:
        token = api_key or bearer_token(authorization)
    except Unauthenticated:
        return None
    if not token or not keys.looks_like_key(token):
        return None
    parsed = keys.parse_key(token)
    if parsed is None:
        return None
    return key_cache.get(parsed.key_id, keys.hash_secret(parsed.secret), _last_used_due)


def _last_used_due(last_used_at: datetime) -> bool:
    return utcnow() - last_used_at >= LAST_USED_RESOLUTION


def authenticate(
    session: Session,
    *,
    authorization: str | None,
    api_key: str | None,
    verifier: JwtVerifier | None,
) -> Principal:
    token = api_key or bearer_token(authorization)
    if not token:
        raise Unauthenticated("send an API key (Authorization: Bearer fg_...) or a JWT")
    if keys.looks_like_key(token):
        return authenticate_api_key(session, token)
    if verifier is None:
        # A token that is no API key can only be a JWT; say both, so a mistyped key reads
        # as what it is rather than as a server configuration problem.
        raise Unauthenticated(
            "the token is not a facegate API key (fg_...) and this server accepts no JWTs"
        )
    try:
        verified = verifier.verify(token)
    except InvalidToken as exc:
        # Why a token failed helps an attacker tune the next one: logged, not answered.
        log.info("jwt rejected", reason=str(exc))
        raise Unauthenticated("invalid token") from exc
    _require_active_tenant(TenancyRepository(session), verified.tenant_id)
    scopes = frozenset(verified.scopes & set(ALL_SCOPES))
    if PLATFORM_ADMIN in scopes and not verifier.grants_platform_admin(verified):
        scopes = (scopes - {PLATFORM_ADMIN}) | {TENANT_ADMIN}
    return Principal(tenant_id=verified.tenant_id, scopes=scopes, actor=f"jwt:{verified.subject}")


def authenticate_api_key(session: Session, token: str) -> Principal:
    parsed = keys.parse_key(token)
    if parsed is None:
        raise Unauthenticated("malformed API key (bad checksum)")
    repository = TenancyRepository(session)
    found = repository.get_key_for_authentication(parsed.key_id)
    # Same message for unknown id and wrong secret: no oracle for valid ids.
    if found is None or not keys.secret_matches(parsed.secret, found[0].secret_hash):
        raise Unauthenticated("invalid API key")
    key, tenant = found
    now = utcnow()
    if key.revoked_at is not None:
        raise Unauthenticated("API key revoked")
    if key.expires_at is not None and key.expires_at <= now:
        raise Unauthenticated("API key expired")
    if not tenant.is_active:
        raise Unauthenticated("tenant suspended")
    last_used = key.last_used_at
    if last_used is None or _last_used_due(last_used):
        repository.touch_key(key.id, now)
        last_used = now
    principal = Principal(tenant_id=tenant.id, scopes=frozenset(key.scopes), actor=f"key:{key.id}")
    key_cache.put(
        key.id, found[0].secret_hash, principal, expires_at=key.expires_at, last_used_at=last_used
    )
    return principal


def _require_active_tenant(repository: TenancyRepository, tenant_id: str) -> None:
    tenant = repository.get_tenant(tenant_id)
    if tenant is None:
        raise Unauthenticated("unknown tenant")
    if not tenant.is_active:
        raise Unauthenticated("tenant suspended")
