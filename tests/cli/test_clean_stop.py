"""A clean stop (SIGTERM) of a server process deletes its scratch folder: ``facegate api``
(one process and several) and ``facegate serve``, started for real. A killed one's folder
is reclaimed by the next process instead (tests/worker, tests/cluster/test_no_leftovers.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.liveserver import free_port

from facegate.database import migrate
from facegate.worker.scratch import LOCK_NAME, PREFIX

pytestmark = pytest.mark.timeout(180)


def scratch_folders(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob(f"{PREFIX}*"))


@pytest.mark.parametrize(
    "command",
    [["api"], ["api", "--processes", "2"], ["serve", "--workers", "0"]],
    ids=["api", "api-2-processes", "serve"],
)
def test_sigterm_removes_the_scratch_folder(command: list[str], tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    url = f"sqlite:///{tmp_path}/facegate.db"
    migrate(url)
    port = free_port()
    env = {
        **os.environ,
        "FACEGATE_DATABASE_URL": url,
        "FACEGATE_STORAGE_URL": f"file://{tmp_path}/storage",
        "FACEGATE_DATA_DIR": str(tmp_path),
        "FACEGATE_MODELS_DIR": str(tmp_path / "models"),
        "FACEGATE_LOG_LEVEL": "warning",
        "TMPDIR": str(tmpdir),
    }
    env.pop("FACEGATE_PORT", None)
    argv = [sys.executable, "-c", "from facegate.cli import main; main()", *command]
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [*argv, "--port", str(port)], env=env, cwd=tmp_path, stdout=log, stderr=log
    )
    expected = 2 if "--processes" in command else 1
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                up = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                up = False
            if up and len(scratch_folders(tmpdir)) >= expected:
                break
            time.sleep(0.2)
        folders = scratch_folders(tmpdir)
        assert len(folders) == expected, (tmp_path / "server.log").read_text()
        assert all((folder / LOCK_NAME).exists() for folder in folders)
        process.terminate()
        # uvicorn shuts down, then re-raises the signal: killed by SIGTERM, cleanly.
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    assert scratch_folders(tmpdir) == [], (tmp_path / "server.log").read_text()
