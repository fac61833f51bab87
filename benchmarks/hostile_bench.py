"""A second tenant's latency while one address attacks, against the same server idle.

The server is a real ``facegate serve`` (embedded shape, no workers) in its own process,
with ``FACEGATE_TRUSTED_PROXIES=127.0.0.1`` so ``X-Forwarded-For`` gives the attacker and
the bystander their own addresses. Measured in one run:

- baseline: the bystander tenant's ``GET /v1/me``, sequential, nothing else going on;
- ``slow bad token``: 260 sockets from one address announce a 10 MB ``POST /v1/jobs`` with
  ``Authorization: Bearer x`` and drip a byte a second (the issue's attack);
- ``slow valid key``: the same with a real key of another tenant and a body within its
  budget (held to the per-client share, then cut off by the minimum body rate);
- ``200 MB, no key`` x 20: what each refused upload costs the server (its RSS before and
  after, and how long the 401 takes while the client has sent 4 KB), from an address of
  their own (by then the attacker's has spent its per-minute budget of requests without a
  key, and would get a 429 before the 401's path runs).

    .venv/bin/python benchmarks/hostile_bench.py [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

ATTACKER, BYSTANDER, UPLOADER = "203.0.113.7", "198.51.100.2", "192.0.2.44"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_keys(url: str) -> dict[str, str]:
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        keys = {}
        for tenant in ("acme", "globex"):
            # The bystander's own rate limit is not what is measured.
            policy = PolicySpec(requests_per_minute=1_000_000)
            service.create_tenant(TenantSpec(id=tenant, policy=policy))
            keys[tenant] = service.create_key(tenant, KeyCreate(scopes=["jobs:write"])).token
    engine.dispose()
    return keys


def start_server(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "FACEGATE_DATABASE_URL": f"sqlite:///{tmp}/facegate.db",
        "FACEGATE_STORAGE_URL": f"file://{tmp}/storage",
        "FACEGATE_DATA_DIR": str(tmp),
        "FACEGATE_MODELS_DIR": str(tmp / "models"),
        "FACEGATE_TRUSTED_PROXIES": '["127.0.0.1/32"]',
        "FACEGATE_BAN_MAX_FAILURES": "100000",  # measure the slots, not the ban
        "FACEGATE_LOG_LEVEL": "warning",
        "FACEGATE_ACCESS_LOG": "false",
    }
    command = [
        sys.executable,
        "-c",
        "from facegate.cli import main; main()",
        "serve",
        "--port",
        str(port),
        "--workers",
        "0",
    ]
    process = subprocess.Popen(command, env=env, cwd=tmp, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError("facegate serve did not start")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def slow_sockets(port: int, token: str, length: int, count: int) -> list[socket.socket]:
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {length}\r\n"
        f"X-Forwarded-For: {ATTACKER}\r\n\r\n-"
    ).encode()
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(head)
        sockets.append(sock)
    return sockets


def drip(sockets: list[socket.socket], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for sock in sockets:
            try:
                sock.send(b"-")
            except OSError:
                pass


def bystander(port: int, token: str, requests: int) -> tuple[list[float], int]:
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": BYSTANDER}
    latencies, failures = [], 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=10) as c:
        for _ in range(requests):
            started = time.perf_counter()
            status = c.get("/v1/me").status_code
            latencies.append((time.perf_counter() - started) * 1000)
            failures += status != 200
    return latencies, failures


def report(name: str, latencies: list[float], failures: int, baseline: float | None) -> float:
    p50 = statistics.median(latencies)
    p99 = statistics.quantiles(latencies, n=100)[98]
    ratio = f"  p99 x{p99 / baseline:.2f} of baseline" if baseline else ""
    print(f"{name:<18} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  non-200: {failures}{ratio}")
    return p99


def under_attack(
    port: int, attacker: str, length: int, victim: str, requests: int
) -> tuple[list[float], int]:
    sockets = slow_sockets(port, attacker, length, 260)
    stop = threading.Event()
    dripper = threading.Thread(target=drip, args=(sockets, stop), daemon=True)
    dripper.start()
    try:
        return bystander(port, victim, requests)
    finally:
        stop.set()
        dripper.join()
        for sock in sockets:
            sock.close()


def refused_uploads(port: int, pid: int) -> None:
    before = rss_mb(pid)
    times, answers = [], set()
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        started = time.perf_counter()
        sock.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 209715200\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\n"
            + f"X-Forwarded-For: {UPLOADER}\r\n\r\n".encode()
            + b"x" * 4096
        )
        answer = sock.recv(4096)
        times.append((time.perf_counter() - started) * 1000)
        sock.close()
        answers.add(answer.split(b"\r\n", 1)[0].decode(errors="replace"))
    print(
        f"200 MB, no key x20: {', '.join(sorted(answers))} after "
        f"{statistics.median(times):.1f} ms (median) "
        f"with 4 KB sent; server RSS {before:.0f} -> {rss_mb(pid):.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keys = create_keys(f"sqlite:///{tmp}/facegate.db")
        port = free_port()
        server = start_server(tmp, port)
        try:
            bystander(port, keys["globex"], 30)  # warm-up
            base = report("baseline", *bystander(port, keys["globex"], args.requests), None)
            victim = keys["globex"]
            attack = under_attack(port, "x", 10_000_000, victim, args.requests)
            report("slow bad token", *attack, base)
            attack = under_attack(port, keys["acme"], 2_000_000, victim, args.requests)
            report("slow valid key", *attack, base)
            refused_uploads(port, server.pid)
        finally:
            server.terminate()
            server.wait(20)


if __name__ == "__main__":
    main()
