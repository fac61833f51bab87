"""SIGKILL a real ``facegate serve`` with jobs queued and running; after a restart every job
finishes, exactly once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from PIL import Image
from tests.testdata import FACES

from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FACEGATE = Path(sys.executable).with_name("facegate")
FACE = FACES / "group_4_sitting_on_grass.jpg"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(tmp_path: Path) -> tuple[dict[str, str], str]:
    env = {
        **os.environ,
        "FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/facegate.db",
        "FACEGATE_STORAGE_URL": f"file://{tmp_path}/storage",
        "FACEGATE_DATA_DIR": str(tmp_path),
        "FACEGATE_MODELS_DIR": str(tmp_path / "models"),
        "FACEGATE_WORKERS": "2",
        "FACEGATE_JOB_LEASE_SECONDS": "2",
        "FACEGATE_JOB_POLL_SECONDS": "0.1",
        "FACEGATE_PORT": str(free_port()),
    }
    migrate(env["FACEGATE_DATABASE_URL"])
    engine = create_engine_from_url(env["FACEGATE_DATABASE_URL"])
    policy = PolicySpec(allowed_processors=["face_debugger"], max_concurrent_jobs=2)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        service.create_tenant(TenantSpec(id="crash", policy=policy))
        token = service.create_key("crash", KeyCreate(scopes=["jobs:write", "jobs:read"])).token
    engine.dispose()
    return env, token


def start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as handle:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [str(FACEGATE), "serve"],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{env['FACEGATE_PORT']}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise AssertionError(f"facegate serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    process.kill()
    raise AssertionError("facegate serve did not become healthy")


def statuses(base: str, headers: dict[str, str]) -> Counter[str]:
    items = httpx.get(f"{base}/v1/jobs?limit=200", headers=headers, timeout=10).json()["items"]
    return Counter(item["status"] for item in items)


def test_sigkill_with_jobs_queued_and_running(tmp_path: Path) -> None:
    env, token = prepare(tmp_path)
    base = f"http://127.0.0.1:{env['FACEGATE_PORT']}"
    headers = {"Authorization": f"Bearer {token}"}
    target = tmp_path / "target.png"
    Image.open(FACE).save(target)  # PNG: slower to encode, so jobs are caught running
    log = tmp_path / "serve.log"

    server = start(env, log)
    try:
        ids = []
        for _ in range(8):
            response = httpx.post(
                f"{base}/v1/jobs",
                headers=headers,
                timeout=30,
                files={"target": ("t.png", target.read_bytes(), "image/png")},
                data={"options": json.dumps({"processors": ["face_debugger"]})},
            )
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        deadline = time.monotonic() + 60
        while statuses(base, headers)["running"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        before = statuses(base, headers)
        assert before["running"] >= 1
        assert before["queued"] >= 1
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)

    server = start(env, log)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            after = statuses(base, headers)
            if after["succeeded"] + after["failed"] + after["cancelled"] == len(ids):
                break
            time.sleep(0.2)
        assert after == Counter({"succeeded": len(ids)}), after
        for job_id in ids:
            job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers, timeout=10).json()
            assert 1 <= job["attempts"] <= 2
            result = httpx.get(f"{base}/v1/jobs/{job_id}/result", headers=headers, timeout=10)
            assert result.status_code == 200
            assert len(result.content) == job["result"]["bytes"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)

    # exactly once: one "job.succeeded" log line per job across both server lives
    text = log.read_text()
    succeeded = Counter(
        match.group(1)
        for line in text.splitlines()
        if "job.succeeded" in line
        for match in [re.search(r'job_id"?[=:] ?"?([0-9a-f-]{36})', line)]
        if match
    )
    assert succeeded == Counter({job_id: 1 for job_id in ids})
    outputs = list((tmp_path / "storage" / "tenants" / "crash" / "outputs").iterdir())
    assert sorted(p.name for p in outputs) == sorted(ids)
