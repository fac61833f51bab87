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
  verification, and the bystander's ``GET /v1/me`` meanwhile.
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
from facegate.provenance.keys import create_keys as create_signing_keys
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
    tmp: Path, port: int, extra: dict[str, str] | None = None
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
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="default")
    parser.add_argument("--seconds", type=float, default=20.0, help="of each attack")
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


SCENARIOS = {
    "default": default_scenario,
    "public-uploads": public_uploads_scenario,
    "verify-cpu": verify_cpu_scenario,
}


if __name__ == "__main__":
    main()
