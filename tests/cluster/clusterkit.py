"""Plain helpers for the cluster acceptance tests: a private PostgreSQL schema, real
``facegate worker`` / ``facegate api`` processes, job factories and a cap sampler."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import httpx
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session
from tests.dbkit import postgres_hint, postgres_url

from facegate.database import (
    create_session_factory,
    session_scope,
    utcnow,
)
from facegate.jobs.tables import Job
from facegate.provenance.keys import create_keys
from facegate.tenancy.tables import Policy, Tenant

HERE = Path(__file__).resolve().parent
FACEGATE = str(Path(sys.executable).with_name("facegate"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_base_url() -> str:
    url = postgres_url()
    if url is None:
        pytest.skip(postgres_hint("cluster"))
    return url


def add_tenants(engine: Engine, caps: dict[str, int]) -> None:
    with session_scope_of(engine) as session:
        for tenant_id, cap in caps.items():
            tenant = Tenant(id=tenant_id, name=tenant_id)
            # Rate limits are not under test here (the restart test polls the API often).
            tenant.policy = Policy(
                max_concurrent_jobs=cap, device_limit=cap, requests_per_minute=1_000_000
            )
            session.add(tenant)


def add_jobs(
    engine: Engine,
    tenant_id: str,
    count: int,
    seconds: float = 0.02,
    estimated_seconds: float | None = None,
    **spec: object,
) -> list[uuid.UUID]:
    """``count`` queued jobs the cheap runner runs for ``seconds`` each; the scheduler sees
    ``estimated_seconds`` (None: unknown, a long job to the short lane)."""
    ids = [uuid.uuid4() for _ in range(count)]
    with session_scope_of(engine) as session:
        for job_id in ids:
            session.add(
                Job(
                    id=job_id,
                    tenant_id=tenant_id,
                    status="queued",
                    kind="image",
                    spec={"processors": ["face_swapper"], "test_seconds": seconds, **spec},
                    inputs=[],
                    created_at=utcnow(),
                    estimated_seconds=estimated_seconds,
                )
            )
    return ids


def session_scope_of(engine: Engine) -> AbstractContextManager[Session]:
    return session_scope(create_session_factory(engine))


def statuses(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, count(*) FROM jobs GROUP BY status"))
        return {row[0]: int(row[1]) for row in rows}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Cluster:
    """Worker (and API) processes started by a test; all stopped at teardown."""

    url: str
    tmp_path: Path
    lease_seconds: float = 2.0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: False: workers run the real engine (EngineRunner) instead of the cheap runner.
    cheap_runner: bool = True
    #: The processes' temporary directory (TMPDIR), when a test looks into it.
    tmpdir: Path | None = None

    def __post_init__(self) -> None:
        # The installation's signing identity (in a real cluster: the mounted Secret);
        # workers refuse to start without it.
        create_keys(self.tmp_path / "provenance")

    @property
    def models_dir(self) -> Path:
        return self.tmp_path / "models"

    @property
    def run_log(self) -> Path:
        return self.tmp_path / "runs.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            FACEGATE_DATABASE_URL=self.url,
            FACEGATE_STORAGE_URL=f"file://{self.tmp_path}/storage",
            FACEGATE_DATA_DIR=str(self.tmp_path),
            FACEGATE_JOB_LEASE_SECONDS=str(self.lease_seconds),
            FACEGATE_JOB_POLL_SECONDS="0.5",
            FACEGATE_MODELS_DIR=str(self.models_dir),
            FACEGATE_WORKER_RUNNER="cheap_runner:CheapRunner",
            FACEGATE_TEST_RUN_LOG=str(self.run_log),
            PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        )
        if not self.cheap_runner:
            env.pop("FACEGATE_WORKER_RUNNER")
        if self.tmpdir is not None:
            env["TMPDIR"] = str(self.tmpdir)
        env.pop("FACEGATE_PORT", None)
        return env

    def start(
        self, *args: str, name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``facegate *args``, logged to ``<name>.log``; ``env``: settings of its own."""
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [FACEGATE, *args],
                env=self.env() | (env or {}),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process

    def start_api(
        self, name: str = "api", port: int | None = None, env: dict[str, str] | None = None
    ) -> str:
        """``facegate api`` on ``port`` (a free one if None); its base URL once /healthz
        answers."""
        port = free_port() if port is None else port
        self.start("api", "--port", str(port), name=name, env=env)
        base = f"http://127.0.0.1:{port}"

        def api_up() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(api_up, 60, "the API to start")
        return base

    def start_worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        return self.start("worker", "--no-device", "--heartbeat", "0.5", *args, name=name)

    def stop_all(self, grace: float = 3.0) -> None:
        """SIGTERM to each process still running; SIGKILL to those not gone ``grace`` seconds
        later (a worker with a job still running would wait the job out: at teardown nothing
        looks at it any more, and test_fair_cluster tests the graceful stop itself)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def runs(self) -> list[tuple[str, str, str, int, float]]:
        """(event, job id, tenant, pid, time) of every runner event, in order."""
        if not self.run_log.exists():
            return []
        rows = []
        for line in self.run_log.read_text().splitlines():
            event, job_id, tenant, pid, stamp = line.split()
            rows.append((event, job_id, tenant, int(pid), float(stamp)))
        return rows


class BackgroundLoop:
    """A daemon thread running ``_run`` for the length of a ``with`` block; ``_run`` loops
    until ``_stop`` is set."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        raise NotImplementedError


class CapSampler(BackgroundLoop):
    """Samples running jobs per tenant from the database every ``every`` seconds."""

    def __init__(self, engine: Engine, every: float = 0.01) -> None:
        super().__init__()
        self.engine = engine
        self.every = every
        self.peaks: dict[str, int] = defaultdict(int)
        self.samples = 0

    def _run(self) -> None:
        query = text(
            "SELECT tenant_id, count(*) FROM jobs WHERE status = 'running' GROUP BY tenant_id"
        )
        with self.engine.connect() as conn:
            while not self._stop.wait(self.every):
                for tenant, running in conn.execute(query):
                    self.peaks[tenant] = max(self.peaks[tenant], int(running))
                conn.commit()
                self.samples += 1


def peak_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an end at t closes before a start at t)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    peak = current = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        current += delta
        peak = max(peak, current)
    return peak
