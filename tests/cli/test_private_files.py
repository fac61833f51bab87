"""A server's files are its user's alone: ``facegate serve`` creates its database and
storage owner-only (0600 files, 0700 folders), whatever the caller's umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
from tests.liveserver import free_port


def test_serve_creates_owner_only_files(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/var/facegate.db",
        "FACEGATE_STORAGE_URL": f"file://{tmp_path}/var/storage",
        "FACEGATE_DATA_DIR": str(tmp_path / "var"),
        "FACEGATE_MODELS_DIR": str(tmp_path / "var/models"),
        "FACEGATE_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-c", "from facegate.cli import main; main()", "serve"]
    command += ["--port", str(port), "--workers", "0"]
    old = os.umask(0o022)  # the usual umask: files 0644 unless the server restricts them
    try:
        process = subprocess.Popen(command, env=env, cwd=tmp_path)
    finally:
        os.umask(old)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        database = tmp_path / "var/facegate.db"
        assert stat.S_IMODE(database.stat().st_mode) == 0o600
        storage = tmp_path / "var/storage"
        assert storage.is_dir()
        assert stat.S_IMODE(storage.stat().st_mode) == 0o700
    finally:
        process.terminate()
        process.wait(20)
