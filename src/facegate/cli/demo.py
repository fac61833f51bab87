"""``facegate serve --demo``: tenant ``demo`` and its two keys, kept across restarts.

A key is stored hashed, so the service cannot show it again. The demo therefore keeps its
two tokens in owner-only files of the data directory (``var/demo-key``: jobs and usage;
``var/demo-admin-key``: the platform ``admin`` scope, for the console's tenants, keys and
audit pages). Each start re-uses a token that still authenticates as the demo tenant with
the same scopes, and mints (and writes) a new one only when it does not: a revoked key, a
fresh database or a deleted file. Nothing else reads these files; this is the embedded
demo, never the cluster shape.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from facegate.cli.common import cli_actor
from facegate.database import (
    SessionFactory,
    create_engine_from_url,
    create_session_factory,
    session_scope,
)
from facegate.errors import Unauthenticated
from facegate.principal import Scope
from facegate.settings import Settings
from facegate.tenancy import audited
from facegate.tenancy.identity import authenticate_api_key
from facegate.tenancy.schemas import KNOWN_PROCESSORS, KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

DEMO_TENANT = "demo"
# The demo plan: everything the engine offers, modest quotas.
DEMO_POLICY = PolicySpec(
    max_concurrent_jobs=2,
    allowed_processors=list(KNOWN_PROCESSORS),
    max_output_resolution="4k",
)
USER_SCOPES: tuple[Scope, ...] = ("jobs:write", "jobs:read", "usage:read")
ADMIN_SCOPES: tuple[Scope, ...] = ("admin",)


@dataclass(frozen=True)
class DemoKeys:
    user: str
    admin: str
    user_file: Path
    admin_file: Path
    minted: int  # how many of the two were new this start (0: both re-used)


def key_files(settings: Settings) -> tuple[Path, Path]:
    return settings.data_dir / "demo-key", settings.data_dir / "demo-admin-key"


def ensure_demo(settings: Settings) -> DemoKeys:
    """Make sure tenant ``demo`` exists and is active; return its two keys (re-used when the
    files hold keys that still work, else new ones written there)."""
    engine = create_engine_from_url(settings.database_url)
    try:
        factory = create_session_factory(engine)
        with session_scope(factory) as session:
            tenant = TenancyService(session).repository.get_tenant(DEMO_TENANT)
            if tenant is None:
                spec = TenantSpec(id=DEMO_TENANT, name="Demo tenant", policy=DEMO_POLICY)
                audited.create_tenant(session, cli_actor(), spec)
            elif not tenant.is_active:
                audited.set_status(session, cli_actor(), DEMO_TENANT, "active")
        user_file, admin_file = key_files(settings)
        user, user_new = _kept_or_new(factory, user_file, "demo", USER_SCOPES)
        admin, admin_new = _kept_or_new(factory, admin_file, "demo admin", ADMIN_SCOPES)
    finally:
        engine.dispose()
    return DemoKeys(user, admin, user_file, admin_file, int(user_new) + int(admin_new))


def _kept_or_new(
    factory: SessionFactory, path: Path, name: str, scopes: tuple[Scope, ...]
) -> tuple[str, bool]:
    kept = _read(path)
    if kept and _still_works(factory, kept, scopes):
        return kept, False
    with session_scope(factory) as session:
        request = KeyCreate(name=name, scopes=list(scopes))
        token = audited.create_key(session, cli_actor(), DEMO_TENANT, request).token
    _write_private(path, token)
    return token, True


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _still_works(factory: SessionFactory, token: str, scopes: tuple[Scope, ...]) -> bool:
    with session_scope(factory) as session:
        try:
            principal = authenticate_api_key(session, token)
        except Unauthenticated:
            return False
    return principal.tenant_id == DEMO_TENANT and principal.scopes == frozenset(scopes)


def _write_private(path: Path, token: str) -> None:
    """Owner-only from the first byte (never world-readable, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.part")
    part.unlink(missing_ok=True)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    part.replace(path)


def demo_banner(settings: Settings, keys: DemoKeys) -> str:
    scheme = "https" if settings.tls_enabled else "http"
    host = "127.0.0.1" if settings.host in {"0.0.0.0", "::"} else settings.host
    base = f"{scheme}://{host}:{settings.port}"
    kept = "re-used from the last start" if not keys.minted else "new"
    return "\n".join(
        [
            "",
            f"  demo tenant : {DEMO_TENANT}",
            f"  API key     : {keys.user}",
            f"  admin key   : {keys.admin}   (platform admin: console tenants, keys, audit)",
            f"  keys        : {kept}; kept in {keys.user_file} and {keys.admin_file}",
            f"  console     : {base}/",
            f"  API docs    : {base}/docs",
            "  try it:",
            f"    export FACEGATE_KEY=$(cat {keys.user_file})",
            f'    curl -H "Authorization: Bearer $FACEGATE_KEY" {base}/v1/capabilities',
            "",
        ]
    )
