"""``make cluster`` (scripts/cluster) as a user meets it: a port already taken (``make serve``
running) is said before anything starts, and the banner's hint, pasted into a terminal that
has no FACEGATE_* set, creates a tenant and a key that the cluster's API accepts."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
from clusterkit import postgres_base_url
from tests.dbkit import create_schema, drop_schema
from tests.docs.docblocks import ROOT
from tests.liveserver import free_port
from tests.ratelimit.ratelimitfactories import require_redis, unique_prefix
from tests.testdata import FACES

SCRIPT = ROOT / "scripts" / "cluster"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACEGATE_")}
    return {**env, **extra}


def test_a_taken_port_is_said_before_anything_starts() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(SCRIPT)],
            env=clean_env(FACEGATE_PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert f"port {port} is already in use (is `make serve` running?)" in done.stderr
    assert "FACEGATE_PORT=8100 make cluster" in done.stderr
    assert "API" not in done.stdout  # no banner: nothing was started


def _three_free_ports() -> int:
    for _ in range(50):
        base = free_port()
        try:
            for port in (base + 1, base + 2):
                socket.create_server(("127.0.0.1", port)).close()
        except OSError:
            continue
        return base
    raise AssertionError("no three consecutive free ports")


def test_the_banner_hint_works_against_the_cluster(tmp_path: Path) -> None:
    base = postgres_base_url()
    redis_url = require_redis()
    schema, url = create_schema(base, "mc")
    port = _three_free_ports()
    env = clean_env(
        FACEGATE_DATABASE_URL=url,
        FACEGATE_REDIS_URL=redis_url,
        FACEGATE_RATE_LIMIT_KEY_PREFIX=unique_prefix(),
        FACEGATE_STORAGE_URL=f"file://{tmp_path}/storage",
        FACEGATE_DATA_DIR=str(tmp_path),
        FACEGATE_PORT=str(port),
    )
    log = tmp_path / "cluster.log"
    with log.open("w") as sink:
        cluster = subprocess.Popen(
            [str(SCRIPT)], env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while "Ctrl-C stops everything" not in log.read_text():
            assert cluster.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        banner = log.read_text()
        hint = re.search(r"a tenant   : .*\n((?:\s{15}\S.*\n)+)", banner)
        assert hint is not None, banner
        commands = [line.strip() for line in hint.group(1).splitlines()]
        assert commands[0].startswith("export FACEGATE_DATABASE_URL=")
        # Pasted into a terminal of the clone that has no FACEGATE_* variable set.
        pasted = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert pasted.returncode == 0, pasted.stderr
        token = pasted.stdout.strip().splitlines()[-1]
        api = f"http://127.0.0.1:{port}"
        while True:
            try:
                me = httpx.get(f"{api}/v1/me", headers={"Authorization": f"Bearer {token}"})
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        assert me.status_code == 200, me.text
        assert me.json()["tenant_id"] == "acme"
        # a job through the workers (acme's example plan requires consent): their first
        # face analysis is when mediapipe would print its native lines
        auth = {"Authorization": f"Bearer {token}"}
        consent = {
            "attested_by": "test",
            "statement_version": "1",
            "attested_at": "2026-01-01T00:00:00Z",
        }
        with (FACES / "woman_a_selfie_frontal_01.jpg").open("rb") as source:
            with (FACES / "man_frontal_glasses.jpg").open("rb") as target:
                job = httpx.post(
                    f"{api}/v1/jobs",
                    headers=auth,
                    files={"source": source, "target": target},
                    data={"consent": json.dumps(consent)},
                    timeout=60,
                )
        assert job.status_code == 202, job.text
        with httpx.stream(
            "GET", f"{api}{job.json()['links']['events']}", headers=auth, timeout=180
        ) as events:
            assert '"status": "succeeded"' in "".join(events.iter_text())
        # api and workers log one format: JSON lines beside the script's indented banner
        lines = log.read_text().splitlines()
        mixed = [line for line in lines if line.strip() and not line.startswith(("{", "  "))]
        assert mixed == [], "\n".join(mixed)
    finally:
        os.killpg(cluster.pid, signal.SIGINT)
        try:
            cluster.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait()
        drop_schema(base, schema)
