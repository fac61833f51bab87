"""A real ``facegate serve --demo`` for the console's browser tests: a subprocess with its
data in a temporary folder, on a free port, with an admin key of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
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


@contextmanager
def serving_console(data: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """``facegate serve --demo`` on a free port with its data under ``data`` (and
    ``extra_env``: more settings), stopped at the end."""
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
        **(extra_env or {}),
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
