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

``--scenario batches`` (issue 26, item 7) measures instead a ``facegate serve`` with one
in-process worker (the embedded shape: SQLite, a local folder): the bystander tenant
submits single jobs, one every 0.25 s, alone (``--requests``) and then for ``--seconds``
while an editor key of another tenant sends batches of 100 small PNGs (1000x1000 of one
colour, ~5 KB each, decoded in full by the validation), several at a time:
``--batch-kind cap`` (the default) refused by that tenant's queue cap (99) at its last
item, ``damaged`` refused by its last image, damaged, after every other one is decoded,
``fits`` accepted (100 more jobs queued each time). It prints the bystander's submit latency
(p50, p95, max), its non-2xx answers, the editor's answers, and how often the server
logged ``database is locked``.

    .venv/bin/python benchmarks/hostile_bench.py [--requests 300]
    .venv/bin/python benchmarks/hostile_bench.py --scenario batches [--requests 40]
        [--concurrent-batches 6] [--seconds 30] [--batch-kind cap|damaged|fits]
"""

from __future__ import annotations

import argparse
import io
import json
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
from PIL import Image

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


def start_server(
    tmp: Path, port: int, workers: int = 0, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """``facegate serve`` in its own process, with this process's environment (its
    PYTHONPATH included: the code measured is the one this bench imports); its output
    (log lines) to ``log`` when given."""
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
        str(workers),
    ]
    if log is None:
        process = subprocess.Popen(command, env=env, cwd=tmp, stdout=subprocess.DEVNULL)
    else:
        with log.open("wb") as output:
            process = subprocess.Popen(command, env=env, cwd=tmp, stdout=output, stderr=output)
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


EDITOR, SUBMITTER = "192.0.2.80", "198.51.100.9"
DEBUG_OPTIONS = json.dumps({"processors": ["face_debugger"]})
BATCH_ITEMS = 100


def png(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def create_batch_keys(url: str, queue_cap: int) -> dict[str, str]:
    """An editor key of ``studio`` (its queue cap ``queue_cap``) and a key of the bystander
    ``globex``; neither's rate limit is what is measured."""
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        processors = ["face_debugger"]
        service.create_tenant(
            TenantSpec(
                id="studio",
                policy=PolicySpec(
                    requests_per_minute=1_000_000,
                    max_queued_jobs=queue_cap,
                    allowed_processors=processors,
                ),
            )
        )
        service.create_tenant(
            TenantSpec(
                id="globex",
                policy=PolicySpec(
                    requests_per_minute=1_000_000,
                    max_queued_jobs=100_000,
                    allowed_processors=processors,
                ),
            )
        )
        keys = {
            "editor": service.create_key("studio", KeyCreate(scopes=["editor"])).token,
            "globex": service.create_key("globex", KeyCreate(scopes=["jobs:write"])).token,
        }
    engine.dispose()
    return keys


def submit_jobs(
    port: int, token: str, requests: int, until: threading.Event | None = None
) -> tuple[list[float], int]:
    """The bystander's single-job submits, one every 0.25 s: ``requests`` of them, or (with
    ``until``) as many as fit until it is set. Latencies (ms) and non-2xx answers."""
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": SUBMITTER}
    target = png(64, 64, (200, 120, 90))
    latencies: list[float] = []
    failures = 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
        while len(latencies) < requests if until is None else not until.is_set():
            started = time.perf_counter()
            try:
                status = c.post(
                    "/v1/jobs",
                    files={"target": ("t.png", target, "image/png")},
                    data={"options": DEBUG_OPTIONS},
                ).status_code
            except httpx.TransportError:
                status = 0
            latencies.append((time.perf_counter() - started) * 1000)
            failures += not 200 <= status < 300
            time.sleep(0.25)
    return latencies, failures


def send_batches(
    port: int, token: str, damaged: bool, stop: threading.Event, answers: list[int]
) -> None:
    """One editor connection sending batches of 100 PNGs until ``stop`` (the last one
    ``damaged``: cut in half)."""
    images = [png(1000, 1000, (i, 80, 160)) for i in range(BATCH_ITEMS)]
    if damaged:
        images[-1] = images[-1][: len(images[-1]) // 2]
    files = [("target", (f"t{i}.png", data, "image/png")) for i, data in enumerate(images)]
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": EDITOR}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=120) as c:
        while not stop.is_set():
            try:
                status = c.post(
                    "/v1/batches", files=files, data={"options": DEBUG_OPTIONS}
                ).status_code
            except httpx.TransportError:
                status = 0
            answers.append(status)


def report_submits(name: str, latencies: list[float], failures: int) -> None:
    p95 = statistics.quantiles(latencies, n=20)[18]
    print(
        f"{name:<28} p50 {statistics.median(latencies):7.1f} ms  p95 {p95:7.1f} ms  "
        f"max {max(latencies):7.1f} ms  non-2xx: {failures}/{len(latencies)}"
    )


def batches_scenario(requests: int, concurrent: int, seconds: float, kind: str) -> None:
    """Issue 26 item 7: a bystander's submits while an editor's batches run."""
    queue_cap = BATCH_ITEMS - 1 if kind == "cap" else 1_000_000
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keys = create_batch_keys(f"sqlite:///{tmp}/facegate.db", queue_cap)
        port, log = free_port(), tmp / "server.log"
        server = start_server(tmp, port, workers=1, log=log)
        try:
            submit_jobs(port, keys["globex"], 5)  # warm-up
            report_submits("submit alone", *submit_jobs(port, keys["globex"], requests))
            stop, answers = threading.Event(), list[int]()
            senders = [
                threading.Thread(
                    target=send_batches,
                    args=(port, keys["editor"], kind == "damaged", stop, answers),
                )
                for _ in range(concurrent)
            ]
            for sender in senders:
                sender.start()
            timer = threading.Timer(seconds, stop.set)
            timer.start()
            try:
                measured = submit_jobs(port, keys["globex"], 0, until=stop)
            finally:
                stop.set()
                timer.cancel()
                for sender in senders:
                    sender.join()
            report_submits(f"submit beside {concurrent} batches ({kind})", *measured)
            counts = {status: answers.count(status) for status in sorted(set(answers))}
            print(f"editor's batches answered: {counts}")
        finally:
            server.terminate()
            server.wait(30)
        locked = log.read_text(errors="replace").count("database is locked")
        print(f"'database is locked' in the server's log: {locked}")


def slow_clients_scenario(requests: int) -> None:
    """The slow-client attacks of the module docstring against the baseline."""
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keys = create_keys(f"sqlite:///{tmp}/facegate.db")
        port = free_port()
        server = start_server(tmp, port)
        try:
            bystander(port, keys["globex"], 30)  # warm-up
            base = report("baseline", *bystander(port, keys["globex"], requests), None)
            victim = keys["globex"]
            attack = under_attack(port, "x", 10_000_000, victim, requests)
            report("slow bad token", *attack, base)
            attack = under_attack(port, keys["acme"], 2_000_000, victim, requests)
            report("slow valid key", *attack, base)
            refused_uploads(port, server.pid)
        finally:
            server.terminate()
            server.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["slow-clients", "batches"], default="slow-clients")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--concurrent-batches", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=30.0, help="batches: attack length")
    parser.add_argument("--batch-kind", choices=["cap", "damaged", "fits"], default="cap")
    args = parser.parse_args()
    if args.scenario == "batches":
        batches_scenario(
            args.requests or 40, args.concurrent_batches, args.seconds, args.batch_kind
        )
        return
    slow_clients_scenario(args.requests or 300)


if __name__ == "__main__":
    main()
