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

Selectable scenarios (``--scenario NAME``; the default runs the above), each talking to the
server only through HTTP and ``FACEGATE_*`` settings, so the same file measures an older
checkout (``PYTHONPATH=<its src>``; the server subprocess inherits it):

- ``public-uploads`` (issue 26, item 2): with ``FACEGATE_MAX_IN_FLIGHT_REQUESTS=32``, 8 slow
  anonymous uploads to ``/v1/verify`` and ``/v1/reports`` from 8 addresses and 32 with a
  made-up bearer token from 16 addresses, each kept over the minimum body rate (refused
  ones reconnect); the bystander tenant alternates ``GET /v1/me`` and a small
  ``POST /v1/verify``;
- ``verify-cpu`` (item 8): 4 anonymous clients from 4 addresses verify a crafted video
  (1080p, 60 fps, 30 s, a single keyframe) in a loop; the server's CPU seconds per
  verification, and the bystander's ``GET /v1/me`` meanwhile;
- ``batches`` (item 7): measures instead a ``facegate serve`` with one
in-process worker (the embedded shape: SQLite, a local folder): the bystander tenant
submits single jobs, one every 0.25 s, alone (``--requests``) and then for ``--seconds``
while an editor key of another tenant sends batches of 100 small PNGs (1000x1000 of one
colour, ~5 KB each, decoded in full by the validation), several at a time:
``--batch-kind cap`` (the default) refused by that tenant's queue cap (99) at its last
item, ``damaged`` refused by its last image, damaged, after every other one is decoded,
``fits`` accepted (100 more jobs queued each time). It prints the bystander's submit latency
(p50, p95, max), its non-2xx answers, the editor's answers, and how often the server
logged ``database is locked``.

- ``webhooks`` (item 4): tenant acme's five webhook
  receivers answer a byte every 2 s; tenant globex's one receiver answers at once. Measured:
  how late globex's webhooks arrive (from the job's end, the event's ``finished_at``, to the
  receiver), p50/p95/max, and how many of its API calls answered non-2xx or webhooks never
  came. The server runs one in-process worker (the dispatcher runs beside the workers); the
  events are jobs cancelled as soon as submitted.

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
from facegate.provenance.keys import create_keys as create_signing_keys
from facegate.settings import Settings
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

ATTACKER, BYSTANDER, UPLOADER = "203.0.113.7", "198.51.100.2", "192.0.2.44"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_keys(
    url: str, scopes: tuple[str, ...] = ("jobs:write",), processors: list[str] | None = None
) -> dict[str, str]:
    """Tenants acme and globex (``processors`` allowed, when given), a key of each with
    ``scopes``."""
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        keys = {}
        for tenant in ("acme", "globex"):
            # The bystander's own rate limit is not what is measured.
            policy = PolicySpec(requests_per_minute=1_000_000)
            if processors is not None:
                policy = PolicySpec(requests_per_minute=1_000_000, allowed_processors=processors)
            service.create_tenant(TenantSpec(id=tenant, policy=policy))
            keys[tenant] = service.create_key(tenant, KeyCreate(scopes=list(scopes))).token
    engine.dispose()
    return keys


def start_server(
    tmp: Path,
    port: int,
    extra: dict[str, str] | None = None,
    *,
    workers: int = 0,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``facegate serve`` in its own process, with this process's environment (its
    PYTHONPATH included: the code measured is the one this bench imports) and ``extra``;
    its output (log lines) to ``log`` when given."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="default")
    parser.add_argument("--seconds", type=float, default=20.0, help="of each attack")
    parser.add_argument("--concurrent-batches", type=int, default=6, help="batches: senders")
    parser.add_argument("--batch-kind", choices=["cap", "damaged", "fits"], default="cap")
    parser.add_argument("--samples", type=int, default=8, help="webhooks: globex's events")
    args = parser.parse_args()
    SCENARIOS[args.scenario](args)


def default_scenario(args: argparse.Namespace) -> None:
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


# -- issue 26: public uploads (item 2) and the anonymous verify's CPU (item 8) -------------


def summary(name: str, latencies: list[float], failures: int) -> None:
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[18] if len(latencies) > 1 else latencies[0]
    print(
        f"{name:<22} n {len(latencies):4d}  p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  "
        f"max {max(latencies):7.2f} ms  non-2xx: {failures}"
    )


def small_jpeg() -> bytes:
    import cv2  # optional: only the issue-26 scenarios encode media
    import numpy as np

    gradient = np.tile(np.arange(96, dtype=np.uint8), (96, 1))
    ok, data = cv2.imencode(".jpg", cv2.merge([gradient, gradient.T, gradient]))
    assert ok
    return bytes(data)


def tenant_calls(port: int, token: str, seconds: float, verify: bool) -> tuple[list[float], int]:
    """The bystander tenant for ``seconds``: ``GET /v1/me`` (and, with ``verify``, a small
    ``POST /v1/verify`` after each), sequential."""
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": BYSTANDER}
    image = small_jpeg()
    latencies, failures = [], 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as c:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            calls: list[tuple[str, dict[str, object]]] = [("/v1/me", {})]
            if verify:
                calls.append(("/v1/verify", {"files": {"file": ("p.jpg", image, "image/jpeg")}}))
            for path, extra in calls:
                started = time.perf_counter()
                try:
                    if extra:
                        status = c.post(path, files=extra["files"]).status_code  # type: ignore[arg-type]
                    else:
                        status = c.get(path).status_code
                except httpx.TransportError:
                    status = 0
                latencies.append((time.perf_counter() - started) * 1000)
                failures += not 200 <= status < 300
    return latencies, failures


PREAMBLE = (
    b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\n'
    b"Content-Type: video/mp4\r\n\r\n"
)


def open_public_upload(port: int, path: str, address: str, token: str | None) -> socket.socket:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}"
        f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {200 << 20}\r\n"
        f"X-Forwarded-For: {address}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(head + PREAMBLE)
    return sock


def keep_uploading(
    port: int, plan: list[tuple[str, str, str | None]], stop: threading.Event
) -> None:
    """Each planned upload kept alive at 20 KiB/s (over the default 16 KiB/s minimum); one the
    server answers is opened again, at most every half second per slot."""
    sockets: list[socket.socket | None] = [None] * len(plan)
    opened = [0.0] * len(plan)
    while not stop.wait(0.25):
        for index, (path, address, token) in enumerate(plan):
            sock = sockets[index]
            if sock is None and time.monotonic() - opened[index] >= 0.5:
                opened[index] = time.monotonic()
                try:
                    sockets[index] = open_public_upload(port, path, address, token)
                except OSError:
                    continue
            elif sock is not None:
                try:
                    sock.sendall(b"-" * 5120)
                except OSError:
                    sock.close()
                    sockets[index] = None
    for sock in sockets:
        if sock is not None:
            sock.close()


def public_uploads_scenario(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keys = create_keys(f"sqlite:///{tmp}/facegate.db")
        port = free_port()
        create_signing_keys(tmp / "provenance")  # what `facegate provenance init` writes
        server = start_server(tmp, port, {"FACEGATE_MAX_IN_FLIGHT_REQUESTS": "32"})
        try:
            tenant_calls(port, keys["globex"], 2, verify=True)  # warm-up
            summary("idle", *tenant_calls(port, keys["globex"], args.seconds / 2, verify=True))
            plan: list[tuple[str, str, str | None]] = [
                ("/v1/verify" if n % 2 else "/v1/reports", f"192.0.2.{n + 1}", None)
                for n in range(8)
            ]
            plan += [("/v1/verify", f"203.0.113.{n % 16 + 1}", f"fg_fake{n}") for n in range(32)]
            stop = threading.Event()
            attack = threading.Thread(target=keep_uploading, args=(port, plan, stop), daemon=True)
            attack.start()
            try:
                time.sleep(1.0)
                summary(
                    "slow public uploads",
                    *tenant_calls(port, keys["globex"], args.seconds, verify=True),
                )
            finally:
                stop.set()
                attack.join()
        finally:
            server.terminate()
            server.wait(20)


def keyframeless_clip(path: Path, width: int, height: int, fps: int, seconds: float) -> None:
    """A video dear to decode and cheap to make: one keyframe, then a second of busy
    P-frames repeated (stream-copied)."""
    import io

    import av  # optional: only the verify-cpu scenario makes a video
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {
            "preset": "ultrafast",
            "x264-params": "keyint=100000:scenecut=0:bframes=0",
        }
        noise = np.random.default_rng(0).integers(0, 255, (height // 8, width // 8, 3), np.uint8)
        base = noise.repeat(8, 0).repeat(8, 1)
        for index in range(fps):
            frame = av.VideoFrame.from_ndarray(np.roll(base, index * 4, axis=1), format="bgr24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer, "r") as source, av.open(str(path), "w") as copied:
        template = source.streams.video[0]
        packets = [packet for packet in source.demux(template) if packet.size]
        step = int(packets[1].pts or 0) - int(packets[0].pts or 0)
        copy = copied.add_stream_from_template(template)
        for index in range(round(fps * seconds)):
            original = packets[0] if index == 0 else packets[1 + (index - 1) % (fps - 1)]
            packet = av.Packet(bytes(original))
            packet.pts = packet.dts = index * step
            if template.time_base is not None:
                packet.time_base = template.time_base
            packet.is_keyframe = index == 0
            packet.stream = copy
            copied.mux(packet)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def anonymous_verifier(
    port: int, address: str, clip: bytes, stop: threading.Event, done: list[int]
) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        while not stop.is_set():
            files = {"file": ("clip.mp4", clip, "video/mp4")}
            answer = client.post("/v1/verify", files=files, headers={"X-Forwarded-For": address})
            done.append(answer.status_code)


def verify_cpu_scenario(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        keyframeless_clip(tmp / "clip.mp4", 1920, 1080, 60, 30.0)
        clip = (tmp / "clip.mp4").read_bytes()
        keys = create_keys(f"sqlite:///{tmp}/facegate.db")
        port = free_port()
        create_signing_keys(tmp / "provenance")
        server = start_server(tmp, port, {"FACEGATE_RATE_LIMIT_IP_PER_MINUTE": "100000"})
        try:
            tenant_calls(port, keys["globex"], 2, verify=False)  # warm-up
            summary("idle", *tenant_calls(port, keys["globex"], args.seconds / 2, verify=False))
            stop, done = threading.Event(), list[int]()
            clients = [
                threading.Thread(
                    target=anonymous_verifier, args=(port, f"192.0.2.{n + 1}", clip, stop, done)
                )
                for n in range(4)
            ]
            spent = cpu_seconds(server.pid)
            for thread in clients:
                thread.start()
            try:
                measured = tenant_calls(port, keys["globex"], args.seconds, verify=False)
            finally:
                stop.set()
                for thread in clients:
                    thread.join()
            spent = cpu_seconds(server.pid) - spent
            summary("4 anonymous verifiers", *measured)
            codes = sorted(set(done))
            print(
                f"anonymous verifications of a {len(clip) >> 10} KB 1080p60 30 s clip: "
                f"{len(done)} answered {codes}, server CPU {spent:.1f} s "
                f"({spent / max(1, len(done)):.2f} s each)"
            )
        finally:
            server.terminate()
            server.wait(20)


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


def allow_loopback() -> str:
    """The allow-list entry for loopback receivers on free ports: every port where the code
    knows ports (``:*``), the bare network on code that predates them."""
    try:
        Settings(webhook_allowed_networks=["127.0.0.1/32:*"])
    except ValidationError:
        return json.dumps(["127.0.0.1/32"])
    return json.dumps(["127.0.0.1/32:*"])


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
        keys = create_keys(
            f"sqlite:///{tmp}/facegate.db",
            ("jobs:write", "jobs:read", "tenant:admin"),
            ["face_debugger"],
        )
        port = free_port()
        extra = {
            "FACEGATE_WEBHOOK_ALLOWED_NETWORKS": allow_loopback(),
            "FACEGATE_WEBHOOK_POLL_SECONDS": "0.1",
            "FACEGATE_JOB_POLL_SECONDS": "0.1",
        }
        server = start_server(tmp, port, extra, workers=1)
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


def batch_scenario(args: argparse.Namespace) -> None:
    batches_scenario(
        args.requests if args.requests != 300 else 40,
        args.concurrent_batches,
        args.seconds,
        args.batch_kind,
    )


def webhook_scenario(args: argparse.Namespace) -> None:
    webhooks_scenario(args.samples)


SCENARIOS = {
    "default": default_scenario,
    "public-uploads": public_uploads_scenario,
    "verify-cpu": verify_cpu_scenario,
    "batches": batch_scenario,
    "webhooks": webhook_scenario,
}


if __name__ == "__main__":
    main()
