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

- ``--scenario webhooks`` (item 4 of the second hostile round): tenant acme's five webhook
  receivers answer a byte every 2 s; tenant globex's one receiver answers at once. Measured:
  how late globex's webhooks arrive (from the job's end, the event's ``finished_at``, to the
  receiver), p50/p95/max, and how many of its API calls answered non-2xx or webhooks never
  came. The server runs one in-process worker (the dispatcher runs beside the workers); the
  events are jobs cancelled as soon as submitted.

    .venv/bin/python benchmarks/hostile_bench.py [--requests 300] [--scenario NAME]
"""

from __future__ import annotations

import argparse
import asyncio
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
from datetime import datetime
from pathlib import Path

import httpx
from PIL import Image
from pydantic import ValidationError

from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.settings import Settings
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
    tmp: Path, port: int, workers: int = 0, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
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
        **(extra or {}),
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


SLOW_RECEIVERS = 5
TRICKLE_SECONDS = 20.0


class Trickler:
    """Webhook receivers that answer one byte of a status line every 2 s, for
    ``TRICKLE_SECONDS``, on an asyncio loop of their own."""

    def __init__(self) -> None:
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            ends = time.monotonic() + TRICKLE_SECONDS
            for byte in b"HTTP/1.1 200 OK\r\nx-slow: " + b"a" * 100:
                if time.monotonic() >= ends:
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(2.0)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # cancelled: the bench is over
        finally:
            writer.close()

    def start(self) -> None:
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._answer, "127.0.0.1", 0), self.loop
        ).result(10)
        self.port = server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class FastReceiver:
    """globex's receiver: answers 200 at once, keeping when each message came."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}  # job id -> lateness in ms
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += conn.recv(65536)
            now = time.time()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            event = json.loads(body)
            finished = datetime.fromisoformat(event["data"]["finished_at"]).timestamp()
            self.arrivals[event["data"]["id"]] = (now - finished) * 1000


def allow_loopback() -> str:
    """The allow-list entry for loopback receivers on free ports: every port where the code
    knows ports (``:*``), the bare network on code that predates them."""
    try:
        Settings(webhook_allowed_networks=["127.0.0.1/32:*"])
    except ValidationError:
        return json.dumps(["127.0.0.1/32"])
    return json.dumps(["127.0.0.1/32:*"])


def webhook_keys(url: str) -> dict[str, str]:
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        keys = {}
        for tenant in ("acme", "globex"):
            policy = PolicySpec(requests_per_minute=1_000_000, allowed_processors=["face_debugger"])
            service.create_tenant(TenantSpec(id=tenant, policy=policy))
            scopes = ["jobs:write", "jobs:read", "tenant:admin"]
            keys[tenant] = service.create_key(tenant, KeyCreate(scopes=scopes)).token
    engine.dispose()
    return keys


def tiny_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (120, 90, 60)).save(out, "JPEG")
    return out.getvalue()


def end_a_job(client: httpx.Client, token: str, target: bytes) -> tuple[str | None, int]:
    """A job submitted and cancelled at once (its end is the event); (job id, non-2xx)."""
    headers = {"Authorization": f"Bearer {token}"}
    files = {"target": ("t.jpg", target, "image/jpeg")}
    options = {"options": json.dumps({"processors": ["face_debugger"]})}
    submitted = client.post("/v1/jobs", headers=headers, files=files, data=options)
    if not submitted.is_success:
        return None, 1
    job_id = str(submitted.json()["id"])
    cancelled = client.delete(f"/v1/jobs/{job_id}", headers=headers)
    return job_id, int(not cancelled.is_success)


def webhooks_scenario(samples: int) -> None:
    trickler, fast = Trickler(), FastReceiver()
    trickler.start()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keys = webhook_keys(f"sqlite:///{tmp}/facegate.db")
        port = free_port()
        extra = {
            "FACEGATE_WEBHOOK_ALLOWED_NETWORKS": allow_loopback(),
            "FACEGATE_WEBHOOK_POLL_SECONDS": "0.1",
            "FACEGATE_JOB_POLL_SECONDS": "0.1",
        }
        server = start_server(tmp, port, workers=1, extra=extra)
        target = tiny_jpeg()
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                for token, url in [
                    *[
                        (keys["acme"], f"http://127.0.0.1:{trickler.port}/{n}")
                        for n in range(SLOW_RECEIVERS)
                    ],
                    (keys["globex"], f"http://127.0.0.1:{fast.port}/hook"),
                ]:
                    created = client.post(
                        "/v1/webhooks",
                        headers={"Authorization": f"Bearer {token}"},
                        json={"url": url},
                    )
                    assert created.status_code == 201, created.text
                non_2xx = lost = 0
                sent: list[str] = []
                for n in range(samples):
                    if n % 3 == 0:  # acme keeps its receivers busy: 5 deliveries a job
                        non_2xx += end_a_job(client, keys["acme"], target)[1]
                        time.sleep(0.5)
                    job_id, failed = end_a_job(client, keys["globex"], target)
                    non_2xx += failed
                    if job_id is None:
                        continue
                    sent.append(job_id)
                    deadline = time.monotonic() + 3 * TRICKLE_SECONDS
                    while job_id not in fast.arrivals and time.monotonic() < deadline:
                        time.sleep(0.01)
                    lost += job_id not in fast.arrivals
                    time.sleep(0.3)
        finally:
            server.terminate()
            server.wait(20)
            trickler.stop()
    late = [fast.arrivals[j] for j in sent if j in fast.arrivals]
    if len(late) < 2:
        print(f"webhooks: {len(late)} of {len(sent)} arrived; non-2xx {non_2xx}")
        return
    p95 = statistics.quantiles(late, n=20, method="inclusive")[18]
    print(
        f"webhooks (globex while acme's {SLOW_RECEIVERS} receivers trickle): "
        f"{len(late)}/{len(sent)} arrived, lateness p50 {statistics.median(late):.0f} ms  "
        f"p95 {p95:.0f} ms  max {max(late):.0f} ms  non-2xx: {non_2xx}  never came: {lost}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument(
        "--scenario",
        choices=["slow-clients", "webhooks"],
        default="slow-clients",
        help="slow-clients (default): the slow-body and upload attacks; webhooks: "
        "trickling receivers of one tenant against another's webhook latency",
    )
    parser.add_argument("--samples", type=int, default=8, help="webhooks: globex's events")
    args = parser.parse_args()
    if args.scenario == "webhooks":
        webhooks_scenario(args.samples)
        return
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
