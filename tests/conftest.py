"""Shared fixtures: an app on a fresh SQLite database, driven through httpx's ASGI
transport with its lifespan running (migrations, background services)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from fastapi import FastAPI

from facegate.api.app import ServiceFactory, create_app
from facegate.database import session_scope
from facegate.engine.processors.face_swapper import FaceSwapper
from facegate.engine.runtime import EngineRuntime
from facegate.observability.logging import set_log_output
from facegate.principal import ALL_SCOPES
from facegate.settings import Settings
from facegate.state import AppState
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService


@pytest.fixture(scope="session")
def face_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineRuntime]:
    """An engine runtime over an empty model store (the built-in models only), shared by
    the tests of one run as a process shares its runtime."""
    runtime = EngineRuntime.create(tmp_path_factory.mktemp("models"))
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def swapper(face_engine: EngineRuntime) -> FaceSwapper:
    """The runtime's shared face_swapper processor."""
    found = face_engine.registry.get("face_swapper")
    assert isinstance(found, FaceSwapper)
    return found


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for one test: everything under ``tmp_path``, no environment, no .env."""
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path}/facegate.db",
        "storage_url": f"file://{tmp_path}/storage",
        "data_dir": tmp_path,
        "models_dir": tmp_path / "models",
        "workers": 0,
        # Tests that start workers run them as threads of the test's process (they share
        # its engine and fakes); serve's child processes are tested in tests/worker.
        "worker_processes": False,
        # Off unless a test turns it on (tests/ratelimit): polling helpers and tests of
        # refused credentials would otherwise trip the default limits and bans.
        "rate_limit_enabled": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Harness:
    """A running app, a client bound to it, and factories for tenants and keys."""

    app: FastAPI
    client: httpx.AsyncClient

    @property
    def state(self) -> AppState:
        state: AppState = self.app.state.facegate
        return state

    def create_tenant(self, tenant_id: str, *, status: str = "active", **policy: Any) -> str:
        spec = TenantSpec.model_validate(
            {"id": tenant_id, "status": status, "policy": PolicySpec.model_validate(policy)}
        )
        with session_scope(self.state.session_factory) as session:
            TenancyService(session).create_tenant(spec)
        return tenant_id

    def create_key(
        self, tenant_id: str, scopes: Sequence[str] = ALL_SCOPES[:3], **fields: Any
    ) -> str:
        """A key's token (default scopes: jobs:write, jobs:read, usage:read)."""
        request = KeyCreate.model_validate({"scopes": list(scopes), **fields})
        with session_scope(self.state.session_factory) as session:
            return TenancyService(session).create_key(tenant_id, request).token

    def headers(self, tenant_id: str, scopes: Sequence[str] = ALL_SCOPES[:3]) -> dict[str, str]:
        """Authorization headers of a fresh key of ``tenant_id`` (created if missing)."""
        with session_scope(self.state.session_factory) as session:
            exists = TenancyService(session).repository.get_tenant(tenant_id) is not None
        if not exists:
            self.create_tenant(tenant_id)
        return {"Authorization": f"Bearer {self.create_key(tenant_id, scopes)}"}


AppFactory = Callable[..., FastAPI]
MakeClient = Callable[..., AbstractAsyncContextManager[Harness]]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def app_factory(tmp_path: Path) -> AppFactory:
    """``app_factory(services=[...], **settings_overrides)`` -> a FastAPI app (no
    background services unless given)."""

    def factory(services: Sequence[ServiceFactory] = (), **overrides: Any) -> FastAPI:
        return create_app(make_settings(tmp_path, **overrides), services=services)

    return factory


@pytest.fixture
def make_client(app_factory: AppFactory) -> MakeClient:
    """``async with make_client(**same as app_factory) as h:`` -> Harness with the lifespan
    running; ``h.client`` talks to the app in-process."""

    @asynccontextmanager
    async def factory(
        services: Sequence[ServiceFactory] = (),
        raise_app_exceptions: bool = True,
        **overrides: Any,
    ) -> AsyncIterator[Harness]:
        app = app_factory(services=services, **overrides)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield Harness(app=app, client=client)

    return factory


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """The log lines the app writes during the test (without reconfiguring logging)."""
    stream = io.StringIO()
    set_log_output(stream)
    yield stream
    set_log_output(None)
    structlog.reset_defaults()
