"""One live stream from offer to end: the peer connection, the tasks that run it, and its
ending (for whatever reason, once), which meters and audits it.

Tasks, on the event loop:

- *pump* reads the camera track as fast as it arrives and keeps only the newest frame
  (``media.Newest``): aiortc's own queue never grows, whatever the engine's speed;
- *work* waits while the process is over its streams' core budget (``stream_cpu``, while
  jobs run on this node), then hands the newest frame to the stream's one engine thread,
  which has it swapped by the stream's engine child (``engines.ChildStream``; with
  ``stream_engine_process`` off, in the thread itself: ``frames.LiveFrames``), and the
  swapped frame to the outgoing track; frames that came meanwhile were dropped;
- *watch* ends the stream at ``max_stream_seconds``, when the client went silent, when
  its key was revoked or its tenant suspended (the credentials checked again every
  ``stream_check_seconds``), or when a ``DELETE`` answered by another API process asked
  for its end (read every round, a second at most), and reports progress (Prometheus;
  the data channel);
- *moderate* scores one output frame every ``stream_moderation_seconds`` when the
  tenant's policy has moderation: a refusal ends the stream with its reason.

Audio passes through: the client's audio track is sent back as it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog
from aiortc import (
    MediaStreamTrack,
    RTCDataChannel,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

from facegate.database import SessionFactory, session_scope, utcnow
from facegate.engine.image import load_image
from facegate.engine.moderation import Moderator
from facegate.engine.pipeline import Pipeline
from facegate.engine.processors.base import JobContext
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import Frame
from facegate.errors import BadRequest
from facegate.jobs.service import input_limits
from facegate.machine import machine_cores
from facegate.moderation_policy import JOB_MODERATION
from facegate.observability import metrics
from facegate.principal import Principal
from facegate.provenance.marker import JobMark
from facegate.settings import Settings
from facegate.stream_registry import StreamRecord, StreamRegistry
from facegate.streams import placement
from facegate.streams.engines import (
    FRAME_SECONDS,
    ChildStream,
    EngineChildLost,
    StreamEngines,
    Swapped,
)
from facegate.streams.frames import LiveFrames, fit_frame
from facegate.streams.ice import server_configuration
from facegate.streams.media import Newest, SwappedTrack, release_on_marker
from facegate.streams.schemas import SHARED_STATS, StreamOut
from facegate.streams.service import (
    DEVICE,
    StreamPlan,
    StreamUsage,
    checkpoint,
    close_stream,
    stop_problem,
)
from facegate.usage.service import Consumption

log = structlog.get_logger("facegate.streams")
LIVE_FRAME = "live frame"  # what moderation names in a refusal
FIRST_FRAME_SECONDS = 15.0  # a client's first frame may take this long (connection set-up)
#: with an engine child, a camera frame older than this when the child can take the next is
#: dropped for the next one to arrive, waited for at most FRESH_WAIT_SECONDS (a 30-fps
#: camera's interval and a little)
FRESH_SECONDS = 0.008
FRESH_WAIT_SECONDS = 0.04


def check_offer(sdp: str) -> None:
    """400 before any work for text that is no SDP offer with video."""
    lines = [line.strip() for line in sdp.splitlines() if line.strip()]
    if not lines or lines[0] != "v=0" or not any(line.startswith("m=") for line in lines):
        raise BadRequest("the offer is not an SDP session description", code="invalid-sdp")
    if not any(line.startswith("m=video ") for line in lines):
        raise BadRequest("the offer has no video track", code="invalid-sdp")


@dataclass(frozen=True)
class StreamDeps:
    """What a stream uses of its process (passed in: the app's state, a benchmark's)."""

    settings: Settings
    session_factory: SessionFactory
    engine: EngineRuntime
    registry: StreamRegistry
    #: the engine children (None: each stream's engine runs in a thread of this process)
    engines: StreamEngines | None = None


class LiveStream:
    def __init__(
        self, deps: StreamDeps, principal: Principal, plan: StreamPlan, record: StreamRecord
    ) -> None:
        self.deps = deps
        self.principal = principal
        self.plan = plan
        self.record = record
        self.pc = RTCPeerConnection(
            server_configuration(deps.settings, record.id, record.max_seconds)
        )
        self.inputs: Newest[tuple[VideoFrame, float]] = Newest()
        self.outputs: Newest[tuple[VideoFrame, float]] = Newest()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"stream-{record.id.hex[:8]}")
        self.camera: MediaStreamTrack | None = None
        self.channel: RTCDataChannel | None = None
        self.frames: LiveFrames | None = None
        self.child: ChildStream | None = None  # the stream's engine child, once ready
        self._child_lock = threading.Lock()
        self.mark: JobMark | None = None
        #: frames handed to the engine child: number -> pts, time base, arrival, convert s
        self._pending: dict[int, tuple[int | None, Any, float, float]] = {}
        #: the frame handed to the child last, and whether the next may go in as soon as
        #: the child renders it (True) or only once it is out (False)
        self._awaiting: tuple[int, bool] = (-1, False)
        self._taken: Callable[[int], None] = lambda number: None
        self.last_output: Frame | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.ending = False
        self._metered = (0.0, 0, 0)  # seconds, frames out, dropped already reported
        record.stop = self.end

    async def answer(self, offer: str) -> str:
        """Negotiate: the answer's SDP (400 for an offer aiortc cannot take)."""
        pc = self.pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video" and self.camera is None:
                self.camera = track
                stats = self.record.stats
                pc.addTrack(SwappedTrack(self.outputs, lambda s: stats.stage("send", s)))
            elif track.kind == "audio":
                pc.addTrack(track)  # passes through untouched

        @pc.on("datachannel")
        def on_channel(channel: RTCDataChannel) -> None:
            self.channel = channel

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self.end("client-ended")

        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        except Exception as exc:  # aiortc raises ValueError and others for bad offers
            await pc.close()
            raise BadRequest(f"the SDP offer was refused: {exc}", code="invalid-sdp") from None
        if self.camera is None:
            await pc.close()
            raise BadRequest("the offer has no video track", code="invalid-sdp")
        release_on_marker(pc)  # a camera frame is decoded once its last packet is in
        await pc.setLocalDescription(await pc.createAnswer())
        return str(pc.localDescription.sdp)

    def run(self, pipeline: Pipeline, ctx: JobContext, mark: JobMark) -> None:
        """Start the tasks (the stream is admitted and opened). With engine children, the
        frames are swapped in this process's thread until the stream's child is ready (a
        new child loads the engine for seconds), then by the child."""
        self.mark = mark
        self.frames = LiveFrames(pipeline, ctx, self.plan.policy, mark)
        metrics.stream_started(self.record.tenant_id)
        self.record.stats.last_input_at = time.monotonic()
        self._spawn(self._pump())
        self._spawn(self._work())
        self._spawn(self._watch())
        if self.plan.policy.moderation:
            self._spawn(self._moderate())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(work))

    async def _pump(self) -> None:
        assert self.camera is not None
        silence = self.deps.settings.stream_silence_seconds
        stats = self.record.stats
        # The first frame comes after ICE and DTLS have connected: more time for it.
        wait = max(silence, FIRST_FRAME_SECONDS)
        while not self.ending:
            try:
                frame = await asyncio.wait_for(self.camera.recv(), timeout=wait)
            except TimeoutError:
                await self.end("client-silent", f"no video frame for {wait:g} s")
                return
            except MediaStreamError:
                await self.end("client-ended")
                return
            wait = silence
            assert isinstance(frame, VideoFrame)
            stats.frame_in()
            if self.inputs.put((frame, time.monotonic())):
                stats.frames_dropped += 1

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        stats, budget = self.record.stats, self.deps.registry.cpu
        ready = asyncio.Event()
        opening = None
        if self.deps.engines is not None:
            opening = loop.run_in_executor(None, self._open_child, loop, ready)
            # read even when the stream ended first (a stopping server refuses the child)
            opening.add_done_callback(lambda done: done.cancelled() or done.exception())
        while not self.ending:
            if opening is not None and opening.done():
                if opening.exception() is None and self.child is not None:
                    await loop.run_in_executor(self.executor, self._close_frames)
                    await self._work_child(ready)
                    return
                log.error(  # the stream goes on in this process's thread
                    "stream.engine_unavailable",
                    stream_id=str(self.record.id),
                    error=repr(opening.exception()),
                )
                opening = None
            # Before the frame is taken: the newest one is taken after the wait.
            stats.stage("paced", await budget.pace())
            item = await self.inputs.take()
            if item is None:
                return
            frame, arrived = item
            try:
                out, image, compute = await loop.run_in_executor(
                    self.executor, self._swap, frame, arrived
                )
            except Exception as exc:
                log.exception("stream.failed", stream_id=str(self.record.id))
                await self.end("failed", type(exc).__name__)
                return
            self.last_output = image
            self.record.height, self.record.width = image.shape[:2]
            if self.outputs.put((out, time.monotonic())):
                self.record.stats.frames_dropped += 1
            self.record.stats.frame_out(arrived, compute)

    async def _work_child(self, ready: asyncio.Event) -> None:
        """*work* with an engine child: the newest camera frame is converted here and
        handed over as soon as the child can analyse it (while it renders the one before);
        the swapped frames come back on the child's reader thread (``_done``)."""
        loop = asyncio.get_running_loop()
        stats, budget = self.record.stats, self.deps.registry.cpu
        number, cores = 0, machine_cores()
        while not self.ending:
            stats.stage("paced", await budget.pace())
            item = await self._fresh()
            if item is None:
                return
            frame, arrived = item
            ready.clear()
            # Overlapped (the next frame analysed while this one renders) when the machine
            # has two cores for each stream; otherwise the next is taken once this one is out.
            self._awaiting = (number, len(self.deps.registry.live()) * 2 <= cores)
            try:
                await loop.run_in_executor(self.executor, self._submit, frame, arrived, number)
            except Exception as exc:
                log.exception("stream.failed", stream_id=str(self.record.id))
                await self.end("failed", type(exc).__name__)
                return
            number += 1
            try:
                await asyncio.wait_for(ready.wait(), FRAME_SECONDS)
            except TimeoutError:
                await self.end("failed", EngineChildLost.__name__)
                return

    async def _fresh(self) -> tuple[VideoFrame, float] | None:
        """The newest camera frame, if it came within ``FRESH_SECONDS``; else the next one
        to come (the one waiting dropped), up to ``FRESH_WAIT_SECONDS``: a frame taken as it
        arrives is not a frame interval old before the engine starts on it."""
        item = await self.inputs.take()
        if item is None or time.monotonic() - item[1] <= FRESH_SECONDS:
            return item
        try:
            newer = await asyncio.wait_for(self.inputs.take(), FRESH_WAIT_SECONDS)
        except TimeoutError:
            return item  # the camera is slower than that: the one there is the newest
        if newer is not None:
            self.record.stats.frames_dropped += 1
        return newer

    def _open_child(self, loop: asyncio.AbstractEventLoop, ready: asyncio.Event) -> None:
        """In a thread of its own: an engine child with the stream's source prepared, in
        ``child`` (closed at once when the stream ended meanwhile)."""
        engines, plan = self.deps.engines, self.plan
        assert engines is not None
        assert self.mark is not None
        source = load_image(plan.source, input_limits(plan.policy)).frame

        def call(callback: Callable[..., Any], *args: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the app has stopped
                loop.call_soon_threadsafe(callback, *args)

        def taken(number: int) -> None:
            if self._awaiting[0] == number:
                ready.set()

        def rendering(number: int) -> None:
            if self._awaiting == (number, True):
                ready.set()

        self._taken = taken

        def lost(reason: str) -> None:
            kind = reason.split(":", 1)[0]
            call(lambda: self.tasks.append(loop.create_task(self.end("failed", kind))))

        child: ChildStream | None = ChildStream(
            engines,
            plan.spec,
            source,
            plan.model_request,
            plan.policy,
            self.mark,
            on_next=lambda number: call(rendering, number),
            on_done=lambda swapped: self._done(swapped, call),
            on_lost=lost,
        )
        with self._child_lock:
            if not self.ending:
                self.child, child = child, None
        if child is not None:
            child.close()

    def _submit(self, frame: VideoFrame, arrived: float, number: int) -> None:
        """In the stream's engine thread: the camera frame converted, scaled to the
        policy's resolution and handed to the child."""
        stats = self.record.stats
        stats.stage("queue", time.monotonic() - arrived)
        started = time.perf_counter()
        camera: Frame = frame.to_ndarray(format="bgr24")  # type: ignore[assignment]
        camera = fit_frame(camera, self.plan.policy.max_output_resolution)
        converted = time.perf_counter() - started
        self._pending[number] = (frame.pts, frame.time_base, arrived, converted)
        assert self.child is not None
        self.child.submit(camera, number)

    def _done(self, swapped: Swapped, call: Callable[..., None]) -> None:
        """On the child's reader thread: a swapped frame made a VideoFrame, then sent."""
        pending = self._pending.pop(swapped.number, None)
        if pending is None:
            return
        pts, time_base, arrived, converted = pending
        started = time.perf_counter()
        out = VideoFrame.from_ndarray(swapped.image, format="bgr24")
        out.pts, out.time_base = pts, time_base
        converted += time.perf_counter() - started
        call(self._emit, out, swapped, arrived, converted)

    def _emit(self, out: VideoFrame, swapped: Swapped, arrived: float, converted: float) -> None:
        """On the event loop: the swapped frame to the outgoing track, and its stats."""
        if self.ending:
            return
        stats = self.record.stats
        image = swapped.image
        self.last_output = image
        self.record.height, self.record.width = image.shape[:2]
        stats.stage("convert", converted)
        for name, seconds in swapped.stages.items():
            stats.stage(name, seconds)
        if self.outputs.put((out, time.monotonic())):
            stats.frames_dropped += 1
        if self._awaiting == (swapped.number, False):
            self._taken(swapped.number)
        compute = converted + sum(
            swapped.stages.get(name, 0.0) for name in ("fit", "analyse", "render", "finish")
        )
        stats.frame_out(arrived, compute)

    def _close_frames(self) -> None:
        """In the stream's engine thread, after any frame in hand: the thread's engine
        (once the child took over, or at the end) and, at the end, the child's."""
        frames, self.frames = self.frames, None
        if frames is not None:
            frames.close()
        if self.ending:
            with self._child_lock:
                child, self.child = self.child, None
            if child is not None:
                child.close()

    def _swap(self, frame: VideoFrame, arrived: float) -> tuple[VideoFrame, Frame, float]:
        """In the stream's engine thread: camera frame -> swapped frame (same timestamp);
        the time of each stage goes into the stream's stats."""
        stats = self.record.stats
        stats.stage("queue", time.monotonic() - arrived)
        started = time.perf_counter()
        assert isinstance(self.frames, LiveFrames)
        camera: Frame = frame.to_ndarray(format="bgr24")  # type: ignore[assignment]
        converted = time.perf_counter() - started
        image = self.frames.process(camera)
        processed = time.perf_counter()
        out = VideoFrame.from_ndarray(image, format="bgr24")
        out.pts, out.time_base = frame.pts, frame.time_base
        done = time.perf_counter()
        stats.stage("convert", converted + done - processed)
        for name, seconds in self.frames.stages.items():
            stats.stage(name, seconds)
        return out, image, done - started

    async def _watch(self) -> None:
        settings = self.deps.settings
        last_check = last_checkpoint = time.monotonic()
        while not self.ending:
            await asyncio.sleep(
                min(1.0, settings.stream_check_seconds, settings.stream_checkpoint_seconds)
            )
            self._report()
            if time.monotonic() - last_checkpoint >= settings.stream_checkpoint_seconds:
                last_checkpoint = time.monotonic()
                await asyncio.to_thread(self._write_usage, None)
            if self.record.seconds >= self.record.max_seconds:
                await self.end("max_stream_seconds", f"the limit is {self.record.max_seconds} s")
                return
            # A stop asked by another process is read every round (a second at most); the
            # credentials every stream_check_seconds.
            credentials = time.monotonic() - last_check >= settings.stream_check_seconds
            if credentials:
                last_check = time.monotonic()
            problem = await asyncio.to_thread(self._stop_problem, credentials)
            if problem is not None:
                await self.end(problem)
                return

    def _stop_problem(self, credentials: bool) -> str | None:
        with session_scope(self.deps.session_factory, read_only=True) as session:
            return stop_problem(session, self.principal, self.record.id, credentials=credentials)

    async def _moderate(self) -> None:
        every = self.deps.settings.stream_moderation_seconds
        moderator = await asyncio.to_thread(Moderator, self.deps.engine.hub)
        tenant_id = self.record.tenant_id
        while not self.ending:
            await asyncio.sleep(every)
            frame = self.last_output
            if frame is None:
                continue
            result = await asyncio.to_thread(moderator.assess, LIVE_FRAME, [frame], JOB_MODERATION)
            metrics.moderation_decision(tenant_id, "refused" if result.blocked else "allowed")
            if result.blocked:
                await self.end("content-policy-violation", result.violation().detail)
                return

    def _report(self) -> None:
        """Prometheus (stream-seconds, frames) since the last report; stats on the channel."""
        stats = self.record.stats
        seconds, out, dropped = self._metered
        now = (self.record.seconds, stats.frames_out, stats.frames_dropped)
        metrics.stream_progress(
            self.record.tenant_id, now[0] - seconds, now[1] - out, now[2] - dropped
        )
        self._metered = now
        self._send({"event": "stats", "fps": stats.fps(), "latency_ms": stats.latency_ms()})

    def _send(self, message: dict[str, Any]) -> None:
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            channel.send(json.dumps(message))

    async def end(self, reason: str, detail: str | None = None) -> None:
        """End the stream (once): the client is told why on the data channel, the peer
        connection closes, and the usage record and ``stream.end`` are written."""
        if self.ending or not self.tasks:
            return  # ended already, or never started (a refused start closes its peer)
        self.ending = True
        record = self.record
        record.ended, record.ended_at = time.monotonic(), utcnow()
        record.state, record.end_reason, record.end_detail = "ended", reason, detail
        self.inputs.close()
        self.outputs.close()
        if self.channel is not None and self.channel.readyState == "open":
            self._send({"event": "ended", "reason": reason, "detail": detail})
            await asyncio.sleep(0.1)  # let the message leave before the transport closes
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        await self.pc.close()
        self._report()
        metrics.stream_ended(record.tenant_id, reason)
        await asyncio.get_running_loop().run_in_executor(self.executor, self._close_frames)
        self.executor.shutdown(wait=False)
        try:
            await asyncio.to_thread(self._write_usage, reason)
        finally:
            self.deps.registry.release(record)
        with contextlib.suppress(Exception):  # its room said at once (else at the next beat)
            deps = self.deps
            await asyncio.to_thread(
                placement.beat, deps.settings, deps.session_factory, deps.registry
            )
        log.info(
            "stream.ended",
            stream_id=str(record.id),
            tenant_id=record.tenant_id,
            reason=reason,
            seconds=record.seconds,
            frames=record.stats.frames_out,
        )

    def _write_usage(self, reason: str | None) -> None:
        """The usage record as of now (a checkpoint), or the last one and ``stream.end``
        (``reason``: the stream ended)."""
        record, stats = self.record, self.record.stats
        pixels = (record.width or 0) * (record.height or 0)
        consumption = Consumption(
            compute_seconds=stats.compute_seconds,
            device=DEVICE,
            frames=stats.frames_out,
            input_pixels=pixels * stats.frames_out,
            output_pixels=pixels * stats.frames_out,
        )
        with session_scope(self.deps.session_factory) as session:
            usage = StreamUsage(
                record.id,
                record.tenant_id,
                list(self.plan.spec.processors),
                consumption,
                record.created_at,
                record.ended_at or utcnow(),
                record.seconds,
                StreamOut.of(record).model_dump(mode="json", include=set(SHARED_STATS)),
            )
            if reason is None:
                checkpoint(session, usage)
            else:
                close_stream(session, usage, reason)
