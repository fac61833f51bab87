"""Live streams measured end to end: ``facegate serve`` (embedded shape, its own temporary
data folder) in a subprocess, and aiortc clients in this process streaming a 640x480
camera made of a face photo over loopback. The camera stamps each frame's number into its
pixels (``facegate.streams.loopback``); the client reads the number back from every
swapped frame it receives, so latency is camera frame made -> swapped frame decoded here
(both encodes, both decodes, the network stack and the server's engine), and fps is what
the client receives.

Phases: one stream (``--seconds``, 60 by default): fps each second, latency p50/p95, p95
of the first 10 s against the last 10 s (drift); two streams at once; one stream while a
video job runs beside it; a server killed (SIGKILL) mid-stream (``--kill-seconds``): when
its client saw the frames stop, and when a second server's sweep ended the stream
(``server-lost``), with its usage and ``stream.end`` against the seconds the client saw.
After each streaming phase, the share of sampled received frames (VP8, as sent) from which
the watermark reads back, naming the stream; after the one- and two-stream phases, the CPU
the server process and this client process took (in cores). ``--job-two-seconds``: a video
job's progress a second beside two streams, then alone as long (the streams' core budget,
docs/scheduling.md); ``--server-env NAME=VALUE`` sets the server's settings (a variant).

The client's VP8 encoding and decoding run on the same machine as the server: on a small
machine they take a share of its cores, which a real remote client would not.

With ``--turn ROUNDS`` the one-stream phase runs ROUNDS times each way, interleaved: direct,
the client relayed through a TURN server (Debian's coturn on loopback; the client may use
relay candidates only), and both sides relayed (a second server with relay candidates only);
first, the relay's own cost: round trips of media-sized datagrams direct and through it.

With ``--placed ROUNDS`` a second server on the same database has no room for streams
(``FACEGATE_STREAMS_PER_PROCESS=0``) and hands each start to the first
(``FACEGATE_STREAM_PEER_URL``): the one-stream phase runs ROUNDS times each way,
interleaved, direct and handed (ended by a DELETE sent to the second server), with the
POST's round trip and the time to the first swapped frame.

    python benchmarks/live_bench.py [--seconds 60] [--two-seconds 30] [--job-seconds 30]
    python benchmarks/live_bench.py --turn 2 --seconds 20 --two-seconds 0 --job-seconds 0 \
        --kill-seconds 0
    python benchmarks/live_bench.py --placed 3 --seconds 20 --two-seconds 0 --job-seconds 0 \
        --kill-seconds 0
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib.util
import json
import math
import os
import resource
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import cv2
import httpx
from aioice import turn as aioice_turn
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from sqlalchemy import select

from benchkit import FACES, load_average, read_frame
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.observability.audit.tables import AuditEvent
from facegate.provenance.keys import load_keys
from facegate.provenance.payload import WATERMARK
from facegate.provenance.reading import read_image_watermark
from facegate.streams.ice import turn_credential
from facegate.streams.loopback import ClientRun, PhotoCamera, camera_frame, run_client_at
from facegate.streams.media import release_on_marker
from facegate.streams.service import STREAM_END
from facegate.streams.tables import LiveStreamRow
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService
from facegate.usage.tables import UsageRecord
from noisy_neighbour import base_env, facegate, free_port, stop_all, wait_healthy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.streams.turnkit import local_turn

SOURCE = FACES / "man_frontal_beard_closeup.jpg"
CAMERA = FACES / "woman_b_frontal_dark_background.jpg"
MARK_SAMPLES = 20  # received frames kept for the watermark read (one in every ~30)


def make_tenant(url: str) -> str:
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        policy = PolicySpec(
            requests_per_minute=1_000_000,
            max_concurrent_streams=4,
            max_stream_seconds=3600,
            max_video_seconds=600,
        )
        service.create_tenant(TenantSpec(id="live", policy=policy))
        token = service.create_key("live", KeyCreate(scopes=["director"])).token
    engine.dispose()
    return token


async def stream(
    base: str, key: str, seconds: float, fps: float, marker: bool = True, relay: bool = False
) -> ClientRun:
    source = base64.b64encode(SOURCE.read_bytes()).decode()
    return await run_client_at(
        base,
        key,
        {"source_image": source},
        camera_frame(read_frame(CAMERA)),
        seconds,
        fps=fps,
        keep=MARK_SAMPLES,
        marker=marker,
        relay=relay,
    )


#: warm-up streams at most, until the stream's engine child has taken over
WARM_UP_ROUNDS = 6


def engine_children(server_env: dict[str, str]) -> bool:
    """Whether the server runs streams in engine children (this code has them, on)."""
    if importlib.util.find_spec("facegate.streams.engines") is None:
        return False
    return server_env.get("FACEGATE_STREAM_ENGINE_PROCESS", "true").lower() not in ("0", "false")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else math.nan


def report(name: str, run: ClientRun, key: bytes) -> None:
    latencies = [lat for _, lat in run.samples]
    first = [lat for t, lat in run.samples if t <= 10]
    last = [lat for t, lat in run.samples if t >= run.seconds - 10]
    per_second = [0] * (int(run.seconds) + 1)
    for t, _ in run.samples:
        per_second[min(int(t), len(per_second) - 1)] += 1
    steady = per_second[2:-1] or per_second
    marks = sum(read_image_watermark(f, key).payload is not None for f in run.kept)
    server = run.server
    print(f"\n{name}: {run.seconds:.1f} s, {len(run.samples)} frames received ({load_average()})")
    print(
        f"  fps received: mean {len(run.samples) / run.seconds:.1f}, per second "
        f"min {min(steady)} / median {statistics.median(steady):.0f} / max {max(steady)}"
    )
    print(
        f"  latency camera->swapped ms: p50 {1000 * statistics.median(latencies):.0f}  "
        f"p95 {1000 * p95(latencies):.0f}  first 10 s p95 {1000 * p95(first):.0f}  "
        f"last 10 s p95 {1000 * p95(last):.0f}  (last/first {p95(last) / p95(first):.2f})"
    )
    print(
        f"  start: the answer {1000 * run.answer_seconds:.0f} ms after the offer was sent, "
        f"the first swapped frame {1000 * run.first_frame_seconds:.0f} ms after the answer; "
        f"ended ({server.get('end_reason')}) {1000 * run.end_seconds:.0f} ms after the DELETE"
    )
    print(
        f"  server: frames in {server.get('frames_in')}, out {server.get('frames_out')}, "
        f"dropped {server.get('frames_dropped')}; its own p95 {server.get('latency_ms')} ms"
    )
    stages = server.get("stages_ms") or {}
    if stages:
        parts = "  ".join(f"{n} {v['p50']:.0f}/{v['p95']:.0f}" for n, v in stages.items())
        print(f"  server stages ms p50/p95: {parts}")
        inside = server.get("latency_ms") or 0.0
        print(
            f"  outside the server's engine path (p50, about): "
            f"{1000 * statistics.median(latencies) - _p50_inside(stages):.0f} ms of the "
            f"end-to-end p50 (both VP8 encodes and decodes, the network stack, the "
            f"receivers; the server's own p95 {inside} ms)"
        )
    print(f"  watermark read back from {marks} of {len(run.kept)} sampled received frames")
    print(f"  where the tail is: {tail_windows(run.samples, run.seconds)}")


def tail_windows(samples: list[tuple[float, float]], seconds: float, over: float = 0.1) -> str:
    """Per 10 s of the run: p95, and how many frames took more than ``over`` (the goal);
    the first 2 s apart (the stream's start: its engine child taking over)."""
    late = [t for t, lat in samples if lat > over]
    parts = [
        f"{len(late)} frames over {1000 * over:.0f} ms, {sum(t < 2 for t in late)} in the first 2 s"
    ]
    for start in range(0, math.ceil(seconds), 10):
        window = [lat for t, lat in samples if start <= t < start + 10]
        if window:
            count = sum(start <= t < start + 10 for t in late)
            parts.append(f"{start}-{start + 10} s p95 {1000 * p95(window):.0f} ({count})")
    return "; ".join(parts)


def _p50_inside(stages: dict[str, dict[str, float]]) -> float:
    return sum(v["p50"] for n, v in stages.items() if n not in ("send", "paced"))


class CpuMeter:
    """The CPU the server process (its own threads), the server with its children (its
    worker children, idle unless a job runs, and its streams' engine children) and this
    client process took over a phase, in cores, beside the machine's own busy share."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.start = self._read()

    @staticmethod
    def _stat(pid: int | str) -> tuple[int, float]:
        """A process's parent and CPU seconds (utime + stime)."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _tree(self) -> float:
        """The CPU seconds of the server's living descendants (not itself)."""
        parents: dict[int, tuple[int, float]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    parents[int(name)] = self._stat(name)
                except (OSError, IndexError, ValueError):
                    continue
        total, seen = 0.0, {self.pid}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, cpu) in parents.items():
                if ppid in seen and pid not in seen:
                    seen.add(pid)
                    total += cpu
                    grew = True
        return total

    def _read(self) -> tuple[float, float, float, float, float]:
        tick = os.sysconf("SC_CLK_TCK")
        server = self._stat(self.pid)[1]
        own = resource.getrusage(resource.RUSAGE_SELF)
        cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        busy = (sum(cpu) - cpu[3] - cpu[4]) / tick  # all but idle and iowait
        return time.monotonic(), server, own.ru_utime + own.ru_stime, busy, self._tree()

    def line(self) -> str:
        now = self._read()
        wall = now[0] - self.start[0]
        server, client, busy, tree = ((now[i] - self.start[i]) / wall for i in (1, 2, 3, 4))
        return (
            f"CPU over {wall:.1f} s, in cores: server process {server:.2f} (with its children "
            f"{server + tree:.2f}), this client process {client:.2f} (its VP8 encodes and "
            f"decodes, its receivers), the whole machine busy {busy:.2f} of {os.cpu_count()}"
        )


def job_clip(folder: Path, seconds: float = 20.0) -> Path:
    path = folder / f"beside-{seconds:g}.mp4"
    make_face_clip(path, CAMERA, ClipSpec(seconds=seconds, width=640, height=360))
    return path


async def submit_video_job(client: httpx.AsyncClient, headers: dict[str, str], clip: Path) -> str:
    """A face-swap job of ``clip`` (the source photo onto it); its id."""
    submitted = await client.post(
        "/v1/jobs",
        headers=headers,
        files={"target": ("t.mp4", clip.read_bytes()), "source": ("s.jpg", SOURCE.read_bytes())},
    )
    submitted.raise_for_status()
    return str(submitted.json()["id"])


async def job_beside_two(base: str, key: str, seconds: float, fps: float, clip: Path) -> None:
    """A video job's throughput (its progress a second) while two streams run beside it,
    then alone for as long, the same job in the same sitting."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        job = await submit_video_job(client, headers, clip)

        async def progress() -> tuple[float, str]:
            got = (await client.get(f"/v1/jobs/{job}", headers=headers)).json()
            return float(got.get("progress") or 0.0), str(got["status"])

        while (await progress())[1] != "running" or (await progress())[0] <= 0.0:
            await asyncio.sleep(0.2)  # the job's models loaded, its frames under way
        p0, t0 = (await progress())[0], time.monotonic()
        pair = await asyncio.gather(
            stream(base, key, seconds, fps), stream(base, key, seconds, fps)
        )
        p1, t1 = (await progress())[0], time.monotonic()
        await asyncio.sleep(seconds)
        p2, state = await progress()
        t2 = time.monotonic()
    beside, alone = (p1 - p0) / (t1 - t0), (p2 - p1) / (t2 - t1)
    print(f"\na video job beside two streams ({load_average()})")
    print(
        f"  the job's progress a second: beside two streams {100 * beside:.2f} %/s over "
        f"{t1 - t0:.1f} s, alone after them {100 * alone:.2f} %/s over {t2 - t1:.1f} s "
        f"(x{beside / alone if alone else math.nan:.2f}; the job {state} at the end)"
    )
    for n, run in enumerate(pair, 1):
        lat = [lat for _, lat in run.samples]
        print(
            f"  stream {n}: {len(run.samples) / run.seconds:.1f} fps, latency p50 "
            f"{1000 * statistics.median(lat):.0f} / p95 {1000 * p95(lat):.0f} ms"
        )


async def job_progress(client: httpx.AsyncClient, headers: dict[str, str], job: str) -> float:
    """A job's progress (0..1), as its owner's GET shows it."""
    got = (await client.get(f"/v1/jobs/{job}", headers=headers)).json()
    return 1.0 if got["status"] == "succeeded" else float(got.get("progress") or 0.0)


async def with_job(
    base: str, key: str, seconds: float, fps: float, clip: Path, marker: bool
) -> ClientRun:
    """One stream while a video job runs; the job's progress a second beside the stream,
    then alone as long (its models loaded before either is measured)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        job = await submit_video_job(client, headers, clip)
        while await job_progress(client, headers, job) <= 0.0:
            await asyncio.sleep(0.2)  # its models loaded, its frames under way
        p0, t0 = await job_progress(client, headers, job), time.monotonic()
        run = await stream(base, key, seconds, fps, marker)
        p1, t1 = await job_progress(client, headers, job), time.monotonic()
        await asyncio.sleep(min(seconds, 10.0))
        p2, t2 = await job_progress(client, headers, job), time.monotonic()
        beside, alone = (p1 - p0) / (t1 - t0), (p2 - p1) / (t2 - t1)
        state = "" if p2 < 1.0 else " (it ended meanwhile: the clip is too short)"
        print(
            f"\n  the job beside it: {100 * beside:.2f} %/s, alone after it "
            f"{100 * alone:.2f} %/s{state}"
        )
        return run


async def killed(folder: Path, url: str, key: str, seconds: float, fps: float) -> None:
    """A server SIGKILLed ``seconds`` into a stream; a second server on the same database."""
    env = base_env(folder, url) | {"FACEGATE_WORKERS": "0"}
    beat = float(env.get("FACEGATE_STREAM_CHECKPOINT_SECONDS", "5"))
    first_port, second_port = free_port(), free_port()
    first = facegate("serve", "--port", str(first_port), env=env, log=folder / "kill-a.log")
    base = f"http://127.0.0.1:{first_port}"
    await asyncio.to_thread(wait_healthy, base)
    headers = {"Authorization": f"Bearer {key}"}
    received: list[float] = []
    track_ended: list[float] = []
    pc = RTCPeerConnection()
    pc.addTrack(PhotoCamera(camera_frame(read_frame(CAMERA)), fps=fps))
    release_on_marker(pc)

    async def read(track: MediaStreamTrack) -> None:
        while True:
            try:
                await track.recv()
            except MediaStreamError:
                track_ended.append(time.monotonic())
                return
            received.append(time.monotonic())

    readers: list[asyncio.Task[None]] = []
    pc.on("track", lambda track: readers.append(asyncio.ensure_future(read(track))))
    await pc.setLocalDescription(await pc.createOffer())
    source = base64.b64encode(SOURCE.read_bytes()).decode()
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(
            f"{base}/v1/streams",
            json={"sdp": pc.localDescription.sdp, "source_image": source},
            headers=headers,
        )
        answer.raise_for_status()
        stream_id = answer.json()["id"]
        await pc.setRemoteDescription(RTCSessionDescription(answer.json()["sdp"], "answer"))
        await asyncio.sleep(seconds)
        first.kill()
        killed_at = time.monotonic()
        first.wait()
        second = facegate("serve", "--port", str(second_port), env=env, log=folder / "kill-b.log")
        try:
            other = f"http://127.0.0.1:{second_port}"
            await asyncio.to_thread(wait_healthy, other)
            up = time.monotonic() - killed_at
            shown: dict[str, object] = {}
            while time.monotonic() - killed_at < 120:
                got = await client.get(f"{other}/v1/streams/{stream_id}", headers=headers)
                shown = got.json()
                if shown.get("state") == "ended":
                    break
                await asyncio.sleep(0.5)
            swept = time.monotonic() - killed_at
        finally:
            stop_all([second])
    for task in readers:
        task.cancel()
    await pc.close()
    seen = [t for t in received if t <= killed_at]
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        row = session.get(LiveStreamRow, uuid.UUID(stream_id))
        usage = session.scalars(
            select(UsageRecord).where(UsageRecord.job_id == uuid.UUID(stream_id))
        ).one()
        ends = session.scalars(
            select(AuditEvent).where(
                AuditEvent.action == STREAM_END, AuditEvent.target == f"stream:{stream_id}"
            )
        ).all()
        summary = (row.end_reason, row.seconds, usage.duration_seconds, len(ends)) if row else None
    engine.dispose()
    after = [t - killed_at for t in received if t > killed_at]
    print(f"\nserver killed {seconds:g} s into a stream (heartbeat every {beat:g} s)")
    print(
        f"  client: {len(seen)} frames before the kill, the last one "
        f"{1000 * (killed_at - seen[-1]) if seen else math.nan:.0f} ms before it; "
        f"{len(after)} after; its track ended: "
        f"{'%.1f s after' % (track_ended[0] - killed_at) if track_ended else 'not within the run'}"
    )
    print(
        f"  second server up {up:.1f} s after the kill; GET showed the stream "
        f"{shown.get('state')} ({shown.get('end_reason')}) {swept:.1f} s after the kill"
    )
    if summary is not None:
        reason, row_seconds, billed, events = summary
        print(
            f"  database: end_reason {reason}, seconds {row_seconds:.2f} (client streamed "
            f"~{seconds:g} s), usage {billed:.2f} s, stream.end events {events}"
        )


class _Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.transport.sendto(data, addr)


class _Stamps(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.back: dict[int, float] = {}

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.back[int.from_bytes(data[:4], "big")] = time.perf_counter()


async def _round_trips(send: Any, stamps: _Stamps, count: int) -> list[float]:
    sent: dict[int, float] = {}
    for n in range(count):
        sent[n] = time.perf_counter()
        send(n.to_bytes(4, "big") + bytes(1196))  # a media packet's size
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.5)
    return sorted(stamps.back[n] - sent[n] for n in sent if n in stamps.back)


async def relay_hop(turn_port: int, secret: str, count: int = 1000) -> None:
    """The relay's own cost, without the engine or the codecs: round trips of 1,200-byte
    datagrams to a UDP echo on loopback, direct and through coturn (a TURN allocation with a
    credential made as the api makes them)."""
    loop = asyncio.get_running_loop()
    echo, _ = await loop.create_datagram_endpoint(_Echo, local_addr=("127.0.0.1", 0))
    target = echo.get_extra_info("sockname")
    direct_stamps = _Stamps()
    direct, _ = await loop.create_datagram_endpoint(lambda: direct_stamps, remote_addr=target)
    username, password = turn_credential(secret, "bench", int(time.time()) + 600)
    relay_stamps = _Stamps()
    relayed, _ = await aioice_turn.create_turn_endpoint(
        lambda: relay_stamps, ("127.0.0.1", turn_port), username, password
    )
    try:
        await _round_trips(lambda data: relayed.sendto(data, target), relay_stamps, 20)  # bind
        relay_stamps.back.clear()
        results = {}
        for name, send, stamps in (
            ("direct", direct.sendto, direct_stamps),
            ("through coturn", lambda data: relayed.sendto(data, target), relay_stamps),
        ):
            rtts = await _round_trips(send, stamps, count)
            results[name] = (len(rtts), 1000 * statistics.median(rtts), 1000 * p95(rtts))
    finally:
        relayed.close()
        direct.close()
        echo.close()
    print(f"\nrelay hop: round trips of {count} datagrams of 1,200 bytes ({load_average()})")
    for name, (got, p50, high) in results.items():
        print(f"  {name}: {got} back, p50 {p50:.3f} ms, p95 {high:.3f} ms")


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="facegate-live-") as name:
        folder = Path(name)
        url = f"sqlite:///{folder}/facegate.db"
        key = make_tenant(url)
        port = free_port()
        env = base_env(folder, url) | {"FACEGATE_WORKERS": "1"}
        turn = contextlib.ExitStack()
        servers = []
        if args.turn:
            secret = secrets.token_urlsafe(24)
            relay = turn.enter_context(local_turn(secret, folder))
            env |= {
                "FACEGATE_STREAM_ICE_URLS": json.dumps([relay.url]),
                "FACEGATE_STREAM_TURN_SECRET": secret,
            }
            # A second server, relay candidates only (its own data): both sides relay.
            both = folder / "relay-only"
            both.mkdir()
            both_url = f"sqlite:///{both}/facegate.db"
            both_key = make_tenant(both_url)
            both_port = free_port()
            both_env = base_env(both, both_url) | {
                "FACEGATE_WORKERS": "0",
                "FACEGATE_STREAM_ICE_URLS": json.dumps([relay.url]),
                "FACEGATE_STREAM_TURN_SECRET": secret,
                "FACEGATE_STREAM_ICE_RELAY_ONLY": "true",
            }
            servers.append(
                facegate("serve", "--port", str(both_port), env=both_env, log=both / "serve.log")
            )
        if args.job_two_seconds:
            env["FACEGATE_VIDEO_SEGMENT_SECONDS"] = "0"  # the job's progress is one run's
        env |= dict(args.server_env)
        if args.placed:
            # A second server on the same database without room: it hands every start here.
            full_port = free_port()
            env["FACEGATE_STREAM_PEER_URL"] = f"http://127.0.0.1:{port}"
            full_env = env | {
                "FACEGATE_WORKERS": "0",
                "FACEGATE_STREAMS_PER_PROCESS": "0",
                "FACEGATE_STREAM_ENGINES_WARM": "0",
                "FACEGATE_STREAM_PEER_URL": f"http://127.0.0.1:{full_port}",
            }
            servers.append(
                facegate("serve", "--port", str(full_port), env=full_env, log=folder / "full.log")
            )
        server = facegate("serve", "--port", str(port), env=env, log=folder / "serve.log")
        servers.append(server)
        try:
            base = f"http://127.0.0.1:{port}"
            await asyncio.to_thread(wait_healthy, base)
            mark_key = load_keys(folder / "provenance").mac_key(WATERMARK)
            marker = args.client_receiver == "marker"
            # warm-up: models loaded, graphs built; with engine children (FACEGATE_STREAM_
            # ENGINE_PROCESS), until the stream ran in one (its stage "handoff"): a new child
            # loads the engine for seconds, the stream running in the API process meanwhile
            await asyncio.sleep(args.cold_after)  # a server up for a while: warm children
            for _ in range(0 if args.cold else WARM_UP_ROUNDS):
                warm = await stream(base, key, 5, args.fps, marker)
                if "handoff" in (warm.server.get("stages_ms") or {}) or not engine_children(
                    dict(args.server_env)
                ):
                    break
            if args.turn:
                await relay_hop(relay.port, secret)
            if args.seconds and args.placed:
                full_base = f"http://127.0.0.1:{full_port}"
                await asyncio.to_thread(wait_healthy, full_base)
                for round_ in range(1, args.placed + 1):  # interleaved: same sitting
                    direct = await stream(base, key, args.seconds, args.fps, marker)
                    report(f"one stream, direct (round {round_})", direct, mark_key)
                    handed = await stream(full_base, key, args.seconds, args.fps, marker)
                    report(
                        f"one stream, sent to a server without room, handed here (round {round_})",
                        handed,
                        mark_key,
                    )
            elif args.seconds and args.turn:
                both_base = f"http://127.0.0.1:{both_port}"
                await asyncio.to_thread(wait_healthy, both_base)
                await stream(both_base, both_key, 3, args.fps, marker, relay=True)  # warm-up
                both_mark = load_keys(both / "provenance").mac_key(WATERMARK)  # made by it
                for round_ in range(1, args.turn + 1):  # interleaved: same sitting, same load
                    direct = await stream(base, key, args.seconds, args.fps, marker)
                    report(f"one stream, direct (round {round_})", direct, mark_key)
                    relayed = await stream(base, key, args.seconds, args.fps, marker, relay=True)
                    report(
                        f"one stream, the client relayed through coturn (round {round_})",
                        relayed,
                        mark_key,
                    )
                    twice = await stream(
                        both_base, both_key, args.seconds, args.fps, marker, relay=True
                    )
                    report(
                        f"one stream, both sides relayed through coturn (round {round_})",
                        twice,
                        both_mark,
                    )
            elif args.seconds:
                meter = CpuMeter(server.pid)
                one = await stream(base, key, args.seconds, args.fps, marker)
                report("one stream", one, mark_key)
                print(f"  {meter.line()}")
            if args.two_seconds:
                meter = CpuMeter(server.pid)
                pair = await asyncio.gather(
                    stream(base, key, args.two_seconds, args.fps, marker),
                    stream(base, key, args.two_seconds, args.fps, marker),
                )
                cpu = meter.line()
                for n, run in enumerate(pair, 1):
                    report(f"two streams at once, stream {n}", run, mark_key)
                print(f"  {cpu}")
            if args.job_seconds:
                clip = await asyncio.to_thread(job_clip, folder, 3 * args.job_seconds)
                beside = await with_job(base, key, args.job_seconds, args.fps, clip, marker)
                report("one stream beside a video job", beside, mark_key)
            if args.job_two_seconds:
                clip = await asyncio.to_thread(job_clip, folder, 3 * args.job_two_seconds)
                await job_beside_two(base, key, args.job_two_seconds, args.fps, clip)
        finally:
            stop_all(servers)
            turn.close()
        if args.kill_seconds:
            await killed(folder, url, key, args.kill_seconds, args.fps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="one stream (0: skip)")
    parser.add_argument("--two-seconds", type=float, default=30.0, help="two (0: skip)")
    parser.add_argument("--job-seconds", type=float, default=30.0, help="beside a job (0: skip)")
    parser.add_argument(
        "--job-two-seconds",
        type=float,
        default=0.0,
        help="a video job's progress beside two streams for this long, then alone as long "
        "(0: skip; the clip is 3x as long, run whole: segments off)",
    )
    parser.add_argument("--fps", type=float, default=30.0, help="the camera's rate")
    parser.add_argument(
        "--placed",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="the one-stream phase ROUNDS times each way, interleaved: sent to the server "
        "(direct) and sent to a second server on the same database that has no room and "
        "hands the start to the first (FACEGATE_STREAM_PEER_URL)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm-up stream: the first stream measured pays the engine child's loading "
        "(it runs on the API process's engine meanwhile), as a server's first stream does",
    )
    parser.add_argument(
        "--cold-after",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long after the server is up before the first stream (with --cold: "
        "its first stream on a server up that long, FACEGATE_STREAM_ENGINES_WARM's case)",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        metavar="NAME=VALUE",
        help="a setting of the server (repeatable), e.g. FACEGATE_STREAM_CORES=1",
    )
    parser.add_argument(
        "--kill-seconds", type=float, default=10.0, help="a server killed mid-stream (0: skip)"
    )
    parser.add_argument(
        "--client-receiver",
        choices=["marker", "aiortc"],
        default="marker",
        help="marker: the client decodes a swapped frame once its last packet is in, as "
        "a browser does; aiortc: aiortc's own receiver (waits for the next frame's first "
        "packet: one more output-frame interval of latency)",
    )
    parser.add_argument(
        "--turn",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="the one-stream phase ROUNDS times each way, interleaved: direct (host "
        "candidates), the client relayed (relay candidates only, through a coturn started "
        "on loopback: Debian's turnserver) and both sides relayed (a second server with "
        "FACEGATE_STREAM_ICE_RELAY_ONLY)",
    )
    args = parser.parse_args()
    cv2.setNumThreads(1)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
