"""Acceptance: PostgreSQL restarts while jobs run. The API answers 503 problem+json
meanwhile (never a 500), the workers reconnect by themselves, and no job is lost.

Restarting the server disturbs everything else using it, so this runs only in CI or when
asked: CI=true or FACEGATE_TEST_PG_RESTART=1 (needs root and pg_ctlcluster)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import pytest
from clusterkit import (
    BackgroundLoop,
    Cluster,
    add_jobs,
    add_tenants,
    session_scope_of,
    statuses,
    wait_for,
)
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from facegate.tenancy.schemas import KeyCreate
from facegate.tenancy.service import TenancyService

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def restart_allowed() -> None:
    if os.environ.get("CI") != "true" and os.environ.get("FACEGATE_TEST_PG_RESTART") != "1":
        pytest.skip("restarts PostgreSQL: set FACEGATE_TEST_PG_RESTART=1 (or CI=true) to run")


def restart_postgres() -> None:
    versions = sorted(os.listdir("/etc/postgresql"))
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"],
        check=True,
        timeout=60,
    )


def statuses_or_none(engine: Engine) -> dict[str, int] | None:
    try:
        return statuses(engine)
    except DBAPIError:
        return None


class Poller(BackgroundLoop):
    """GET /v1/jobs (it reads the database) every 50 ms; records status and content type."""

    def __init__(self, base: str, token: str) -> None:
        super().__init__()
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"}
        self.answers: list[tuple[int, str]] = []

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self._stop.wait(0.05):
                response = client.get("/v1/jobs", headers=self.headers)
                self.answers.append(
                    (response.status_code, response.headers.get("content-type", ""))
                )


def test_postgres_restart_while_jobs_run(
    cluster: Cluster, cluster_engine: Engine, tmp_path: Path
) -> None:
    restart_allowed()
    add_tenants(cluster_engine, {"acme": 4})
    with session_scope_of(cluster_engine) as session:
        token = (
            TenancyService(session)
            .create_key("acme", KeyCreate(name="t", scopes=["jobs:read"]))
            .token
        )
    base = cluster.start_api()
    for number in range(2):
        cluster.start_worker(f"worker{number}", "--concurrency", "2")
    jobs = add_jobs(cluster_engine, "acme", 60, seconds=0.1)
    with Poller(base, token) as poller:
        wait_for(lambda: statuses(cluster_engine).get("succeeded", 0) >= 5, 60, "5 jobs done")
        restart_postgres()
        wait_for(
            lambda: statuses_or_none(cluster_engine) == {"succeeded": len(jobs)},
            120,
            "every job to finish after the restart",
        )
        # The jobs can finish before the API's PostgreSQL breaker ends its cool-down
        # (breaker_reset_seconds, 10 s): until then it fails fast with 503. Afterwards its
        # half-open trial reconnects by itself and the answers turn back to 200.
        wait_for(
            lambda: bool(poller.answers) and poller.answers[-1][0] == 200,
            60,
            "the API to answer 200 again after its breaker's cool-down",
        )
    answers = Counter(status for status, _ in poller.answers)
    assert answers[503] > 0, answers
    assert set(answers) <= {200, 503}, answers  # never a 500
    assert all(
        kind == "application/problem+json" for status, kind in poller.answers if status == 503
    )
    for process in cluster.processes:
        assert process.poll() is None  # nothing crashed: the workers reconnected
