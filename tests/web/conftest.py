"""Browser tests of the console: a real ``facegate serve`` in a subprocess (temp data dir,
free port) and Debian's Chromium driven by Playwright.

Run them with Chromium installed (``sudo scripts/system-packages``) or ``CI=true``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from consolehelpers import CHROMIUM, CHROMIUM_ARGS
from tests.liveserver import free_port, stop_process

from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.tenancy.schemas import KeyCreate, TenantSpec
from facegate.tenancy.service import TenancyService

ADMIN_TENANT = "ops"


@dataclass
class Server:
    """A running ``facegate serve --demo``: its URL, the demo tenant's key and an admin key."""

    url: str
    demo_key: str
    admin_key: str

    def get(self, path: str, key: str) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _create_admin_key(database_url: str) -> str:
    migrate(database_url)
    engine = create_engine_from_url(database_url)
    try:
        with session_scope(create_session_factory(engine)) as session:
            service = TenancyService(session)
            service.create_tenant(TenantSpec(id=ADMIN_TENANT, name="Operators"))
            return service.create_key(ADMIN_TENANT, KeyCreate(name="ops", scopes=["admin"])).token
    finally:
        engine.dispose()


def _wait_ready(process: subprocess.Popen[bytes], log: Path, url: str) -> str:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"facegate serve exited:\n{log.read_text()}")
        found = re.search(r"API key\s*:\s*(\S+)", log.read_text())
        if found:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    return found.group(1)
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise RuntimeError(f"facegate serve did not become ready:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("console")
    database_url = f"sqlite:///{data}/facegate.db"
    admin_key = _create_admin_key(database_url)
    port = free_port()
    env = {
        **os.environ,
        "FACEGATE_DATABASE_URL": database_url,
        "FACEGATE_STORAGE_URL": f"file://{data}/storage",
        "FACEGATE_DATA_DIR": str(data),
        "FACEGATE_MODELS_DIR": str(data / "models"),
        "FACEGATE_LOG_LEVEL": "warning",
    }
    log = data / "serve.log"
    command = [sys.executable, "-c", "from facegate.cli import main; main()", "serve", "--demo"]
    command += ["--port", str(port), "--workers", "1"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=data)
    url = f"http://127.0.0.1:{port}"
    try:
        yield Server(url=url, demo_key=_wait_ready(process, log, url), admin_key=admin_key)
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true but /usr/bin/chromium is missing: scripts/system-packages installs it"
            )
        pytest.skip(
            "needs Debian's Chromium at /usr/bin/chromium: run `sudo scripts/system-packages` "
            "(or set CI=true), then `.venv/bin/python -m pytest tests/web`"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(30_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"
