"""The verified-key cache: hits skip the database; revocation, suspension, expiry, a wrong
secret and the last_used_at write still take effect."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from facegate.database import create_engine_from_url, create_session_factory, migrate, utcnow
from facegate.errors import Unauthenticated
from facegate.principal import Principal
from facegate.tenancy import keys
from facegate.tenancy.identity import authenticate_api_key, cached_principal
from facegate.tenancy.keycache import KeyCache, key_cache
from facegate.tenancy.schemas import KeyCreate, TenantSpec
from facegate.tenancy.service import TenancyService
from facegate.tenancy.tables import ApiKey


@pytest.fixture
def engine(tmp_path: object) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path}/keys.db"
    migrate(url)
    engine = create_engine_from_url(url)
    yield engine
    engine.dispose()


def make_key(engine: Engine, tenant: str = "acme", **create: object) -> str:
    factory = create_session_factory(engine)
    with factory.begin() as session:
        service = TenancyService(session)
        if service.repository.get_tenant(tenant) is None:
            service.create_tenant(TenantSpec(id=tenant))
        return service.create_key(tenant, KeyCreate(scopes=["jobs:read"], **create)).token  # type: ignore[arg-type]


def login(engine: Engine, token: str) -> Principal:
    with create_session_factory(engine).begin() as session:
        return authenticate_api_key(session, token)


def hit(token: str) -> Principal | None:
    return cached_principal(f"Bearer {token}", None)


def principal(tenant: str = "acme") -> Principal:
    return Principal(tenant_id=tenant, scopes=frozenset({"jobs:read"}), actor="key:x")


def test_a_verified_key_is_served_from_the_cache_until_revoked(engine: Engine) -> None:
    token = make_key(engine)
    assert hit(token) is None  # never verified yet
    verified = login(engine, token)
    assert hit(token) == verified
    assert cached_principal(None, token) == verified  # X-API-Key too
    key_id = keys.parse_key(token).key_id  # type: ignore[union-attr]
    with create_session_factory(engine).begin() as session:
        TenancyService(session).revoke_key("acme", key_id)
    assert hit(token) is None
    with pytest.raises(Unauthenticated, match="revoked"):
        login(engine, token)


def test_a_revocation_rolled_back_keeps_nothing_pending(engine: Engine) -> None:
    token = make_key(engine)
    login(engine, token)
    key_id = keys.parse_key(token).key_id  # type: ignore[union-attr]
    session: Session = create_session_factory(engine)()
    TenancyService(session).revoke_key("acme", key_id)
    session.rollback()
    session.close()
    assert login(engine, token).tenant_id == "acme"  # still valid, cached again
    assert hit(token) is not None


def test_suspending_the_tenant_drops_its_keys(engine: Engine) -> None:
    token = make_key(engine)
    other = make_key(engine, "other")
    login(engine, token)
    login(engine, other)
    with create_session_factory(engine).begin() as session:
        TenancyService(session).set_status("acme", "suspended")
    assert hit(token) is None
    assert hit(other) is not None
    with pytest.raises(Unauthenticated, match="suspended"):
        login(engine, token)


def test_a_wrong_secret_never_hits(engine: Engine) -> None:
    token = make_key(engine)
    login(engine, token)
    parsed = keys.parse_key(token)
    assert parsed is not None
    secret = parsed.secret[:-1] + ("A" if parsed.secret[-1] != "A" else "B")
    body = f"fg_{parsed.key_id}_{secret}"
    assert hit(body + keys.checksum(body)) is None
    assert hit(token[:-1] + "!") is None  # malformed: the full path answers
    assert cached_principal("Basic eDp5", None) is None


def test_expiry_is_checked_on_every_hit(engine: Engine) -> None:
    token = make_key(engine, expires_at=utcnow() + timedelta(minutes=5))
    login(engine, token)
    parsed = keys.parse_key(token)
    assert parsed is not None
    secret_hash = keys.hash_secret(parsed.secret)
    entry = key_cache._entries[(parsed.key_id, secret_hash)]
    key_cache.put(
        parsed.key_id,
        secret_hash,
        entry.principal,
        expires_at=utcnow() - timedelta(seconds=1),
        last_used_at=entry.last_used_at,
    )
    assert hit(token) is None


def test_last_used_is_written_when_due_not_served_from_cache(engine: Engine) -> None:
    token = make_key(engine)
    login(engine, token)
    parsed = keys.parse_key(token)
    assert parsed is not None
    secret_hash = keys.hash_secret(parsed.secret)
    entry = key_cache._entries[(parsed.key_id, secret_hash)]
    old = utcnow() - timedelta(minutes=2)
    key_cache.put(parsed.key_id, secret_hash, entry.principal, expires_at=None, last_used_at=old)
    assert hit(token) is None
    with create_session_factory(engine).begin() as session:
        session.get(ApiKey, parsed.key_id).last_used_at = old  # type: ignore[union-attr]
    login(engine, token)
    with create_session_factory(engine).begin() as session:
        written = session.get(ApiKey, parsed.key_id).last_used_at  # type: ignore[union-attr]
    assert written is not None
    assert written > old
    assert hit(token) is not None


def test_entries_expire_after_the_ttl_and_the_size_is_bounded() -> None:
    now = [100.0]
    cache = KeyCache(ttl_seconds=5, max_entries=2, clock=lambda: now[0])
    never_due = lambda _when: False  # noqa: E731
    recent: datetime = utcnow()
    cache.put("a", "h", principal(), expires_at=None, last_used_at=recent)
    assert cache.get("a", "h", never_due) is not None
    assert cache.get("a", "other-hash", never_due) is None
    now[0] += 5
    assert cache.get("a", "h", never_due) is None
    for name in ("a", "b", "c"):
        cache.put(name, "h", principal(), expires_at=None, last_used_at=recent)
    assert len(cache) == 2
    assert cache.get("a", "h", never_due) is None  # the oldest went first
    assert cache.get("c", "h", never_due) is not None
    disabled = KeyCache(ttl_seconds=0)
    disabled.put("a", "h", principal(), expires_at=None, last_used_at=recent)
    assert len(disabled) == 0
