"""Content moderation end to end on the cluster shape: PostgreSQL, a ``facegate api`` process
and a ``facegate worker`` process running the real engine, the stand-in classifier installed
with ``facegate models add``, the tenant and its key made with the CLI. A flagged source is
refused, a flagged output fails its job with no result stored, a clean job succeeds; the
audit trail (in PostgreSQL) and the worker's metric show each decision."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from clusterkit import FACEGATE, Cluster, free_port
from sqlalchemy import Engine, text
from tests.api.jobhelpers import job_files, photo
from tests.moderationkit import (
    FLAG_OUTPUT,
    POLICY,
    SWAP,
    decisions,
    install_standin_with_cli,
    marked,
    options,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(400)]

TERMINAL = {"succeeded", "failed", "cancelled"}


def wait_terminal(client: httpx.Client, job_id: str, timeout: float = 240.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if body["status"] in TERMINAL or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def rows(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(sql))]


def test_moderation_on_the_cluster_shape(
    cluster: Cluster, cluster_engine: Engine, tmp_path: Path
) -> None:
    cluster.cheap_runner = False
    env = cluster.env()
    install_standin_with_cli(FACEGATE, cluster.models_dir, env)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"id": "modded", "policy": POLICY}))
    subprocess.run([FACEGATE, "tenant", "apply", "-f", str(tenants)], env=env, check=True)
    token = subprocess.run(
        [FACEGATE, "key", "create", "modded"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    base = cluster.start_api()
    probe = free_port()
    cluster.start_worker("worker0", "--port", str(probe))

    submissions = {
        "flagged source": ([marked(photo())], SWAP),
        "flagged output": ([], FLAG_OUTPUT),
        "clean": ([photo("man_frontal_glasses.jpg")], SWAP),
    }
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        ids = {}
        for name, (sources, spec) in submissions.items():
            response = client.post(
                "/v1/jobs", files=job_files(photo(), sources), data=options(spec)
            )
            assert response.status_code == 202, response.text
            ids[name] = response.json()["id"]
        done = {name: wait_terminal(client, job_id) for name, job_id in ids.items()}

    assert done["flagged source"]["status"] == "failed", done
    assert done["flagged source"]["error"]["type"] == "content-policy-violation"
    assert "source image 1" in done["flagged source"]["error"]["detail"]
    assert done["flagged output"]["status"] == "failed", done
    assert done["flagged output"]["error"]["type"] == "content-policy-violation"
    assert done["clean"]["status"] == "succeeded", done

    outputs = {
        str(job_id)
        for (job_id,) in rows(
            cluster_engine, "SELECT job_id FROM stored_objects WHERE kind = 'outputs'"
        )
    }
    assert outputs == {ids["clean"]}  # nothing of a refused job was stored as a result

    events = {
        target: (action, actor, tenant)
        for action, actor, tenant, target in rows(
            cluster_engine,
            "SELECT action, actor, tenant_id, target FROM audit_events "
            "WHERE action LIKE 'moderation.%' ORDER BY seq",
        )
    }
    assert events == {
        f"job:{ids['flagged source']}": ("moderation.refused", "system:moderation", "modded"),
        f"job:{ids['flagged output']}": ("moderation.refused", "system:moderation", "modded"),
        f"job:{ids['clean']}": ("moderation.allowed", "system:moderation", "modded"),
    }
    metrics = httpx.get(f"http://127.0.0.1:{probe}/metrics", timeout=10).text
    # refused: the flagged source and the flagged output; allowed: the flagged-output job's
    # target, and the clean job's source, target and output
    assert decisions(metrics, "modded") == {"refused": 2.0, "allowed": 4.0}
    verified = subprocess.run(
        [FACEGATE, "audit", "verify"], env=env, capture_output=True, text=True
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
