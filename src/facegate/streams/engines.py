"""A stream's engine work in a child process (``FACEGATE_STREAM_ENGINE_PROCESS``, on by
default), so the face work does not share the API process's interpreter lock with aiortc
(VP8 decode and encode, the network) and the event loop.

Measured (docs/live.md): with the engine in a thread of the API process, one stream held
that process at ~1.00 core on 2 cores whatever the budget: the engine thread, the decoder,
the encoder and the event loop took turns on one lock. In a child, the camera frames are
decoded and the swapped frames encoded in the API process while the child swaps the next.

- **Children**: started with multiprocessing's ``spawn`` (as serve's worker children,
  facegate.worker.children: a fresh interpreter running :func:`engine_child_main`, nothing
  from a request on its command line), each builds the installation's engine once
  (``installation_engine``) and then serves one stream at a time. A child whose stream
  ended goes back to the process's :class:`StreamEngines` and is reused by the next stream
  (its models are loaded); there are at most ``streams_per_process`` of them. The app
  starts ``stream_engines_warm`` of them at start-up (``StreamEngines.warm_up``), so the
  first streams do not run in the API process while a child loads.
- **Frames through shared memory**: per stream two ``multiprocessing.shared_memory``
  buffers (camera frame in, swapped frame out), sized for the policy's
  ``max_output_resolution`` (the camera frame is scaled to fit it in the API process
  first; the out buffer holds ``OUT_SLOTS`` swapped frames). Over the pipe go only a
  frame's shape and, back, the stages' seconds: no frame is pickled. The child analyses
  frame N+1 while it renders N, and asks for the next camera frame only once it can take
  it, so one camera frame is in the in buffer at a time.
- **What the stream guarantees is unchanged**: the child runs ``LiveFrames`` (tracking,
  the processors, the disclosure label, the stream's watermark on every frame); the API
  process keeps the pacing, moderation (on the returned frame), metering and audit. The
  children's CPU counts in the streams' core budget (``facegate.stream_cpu``).
- **A child that dies** (killed, out of memory) fails its stream's frame at once: the
  stream ends (``failed``, ``EngineChildLost``) and is metered as any other ending. A
  child whose parent is gone sees its pipe close and exits.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import structlog

from facegate.engine.modelstore.tags import ModelRequest
from facegate.engine.pipeline import PipelineSpec
from facegate.engine.types import Frame
from facegate.models.requests import installation_engine
from facegate.observability.logging import configure_logging
from facegate.observability.nativelog import filter_native_logs
from facegate.provenance.marker import JobMark
from facegate.settings import Settings
from facegate.streams.frames import LiveFrames, fit_frame
from facegate.tenancy.tables import Policy, resolution_dimensions

log = structlog.get_logger("facegate.streams")

#: seconds a new child may take to load the engine before its stream fails
START_SECONDS = 120.0
#: seconds a stream's source may take to be prepared in the child
PREPARE_SECONDS = 60.0
#: seconds one frame may take in the child before its stream fails
FRAME_SECONDS = 30.0
#: swapped frames the child may have written that the parent has not read yet
OUT_SLOTS = 2
#: a stopping child gets this long to exit before it is killed
STOP_SECONDS = 5.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class EngineChildLost(RuntimeError):
    """The stream's engine child died, or stopped answering."""


def frame_bytes(policy: Policy) -> int:
    """The bytes of the largest BGR frame the policy's resolution lets through."""
    long, short = resolution_dimensions(policy.max_output_resolution)
    return long * short * 3


# -- the child -----------------------------------------------------------------------------


def _attach(name: str) -> SharedMemory:
    """The parent's buffer (the parent unlinks it)."""
    return SharedMemory(name=name)  # spawn: the parent's tracker (a set: no second entry)


#: the next camera frame is asked for this much before the render would need it
NEXT_MARGIN_SECONDS = 0.004


def _recent(average: float, seconds: float) -> float:
    """A moving average of recent seconds (the first one taken as it is)."""
    return seconds if average == 0.0 else 0.8 * average + 0.2 * seconds


class _Lanes:
    """One stream's work in the child, pipelined: the *analyse* thread fits and analyses a
    frame (tracking is in frame order) while the *render* thread swaps, labels and marks
    the one before. The parent is told ``next`` during a render, when the next camera
    frame's analysis would end as the render does (the render's recent time less the
    analysis's), so the frame taken is the newest and waits little for the renderer."""

    def __init__(self, frames: Any, buffers: list[SharedMemory], send: Any) -> None:
        self.frames = frames
        self.buffers = buffers
        self.send = send
        self.analyse_q: queue.Queue[tuple[int, Frame, float] | None] = queue.Queue()
        self.render_q: queue.Queue[tuple[int, Frame, Any, dict[str, float], float] | None] = (
            queue.Queue()
        )
        #: recent seconds of a render (with its finish) and of an analysis (with the fit)
        self.render_seconds = 0.0
        self.analyse_seconds = 0.0
        self.free: queue.Queue[int] = queue.Queue()
        for slot in range(OUT_SLOTS):
            self.free.put(slot)
        self.threads = [
            threading.Thread(target=self._analyse, name="stream-analyse", daemon=True),
            threading.Thread(target=self._render, name="stream-render", daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def frame(self, number: int, height: int, width: int) -> None:
        # copied at once: the parent writes the next camera frame once told ``next``
        view: Frame = np.ndarray((height, width, 3), np.uint8, buffer=self.buffers[0].buf)
        self.analyse_q.put((number, view.copy(), time.perf_counter()))

    def _analyse(self) -> None:
        frames = self.frames
        while (item := self.analyse_q.get()) is not None:
            number, camera, received = item
            try:
                t0 = time.perf_counter()
                camera = fit_frame(camera, frames.resolution)
                t1 = time.perf_counter()
                found = frames.swap.analyse(camera, number)
                t2 = time.perf_counter()
            except Exception as exc:
                log.exception("stream.engine_failed")
                self.send(("error", type(exc).__name__, str(exc)))
                continue
            stages = {"fit": t1 - t0, "analyse": t2 - t1, "child": t0 - received}
            self.analyse_seconds = _recent(self.analyse_seconds, t2 - t0)
            self.render_q.put((number, camera, found, stages, t2))
        self.render_q.put(None)

    def _render(self) -> None:
        frames = self.frames
        while (item := self.render_q.get()) is not None:
            number, camera, found, stages, analysed = item
            # the analyser is free: the next camera frame, timed to be analysed by the end
            lead = self.render_seconds - self.analyse_seconds - NEXT_MARGIN_SECONDS
            if lead > 0:
                timer = threading.Timer(lead, self.send, args=(("next", number),))
                timer.daemon = True
                timer.start()
            else:
                self.send(("next", number))
            try:
                t0 = time.perf_counter()
                rendered = frames.swap.render(camera, found)
                t1 = time.perf_counter()
                out = frames.finish(rendered, number)
                t2 = time.perf_counter()
            except Exception as exc:
                log.exception("stream.engine_failed")
                self.send(("error", type(exc).__name__, str(exc)))
                continue
            slot = self.free.get()
            oh, ow = out.shape[:2]
            size = oh * ow * 3
            target: Frame = np.ndarray(
                (oh, ow, 3), np.uint8, buffer=self.buffers[1].buf, offset=slot * size
            )
            target[...] = out
            stages.update(handoff=t0 - analysed, render=t1 - t0, finish=t2 - t1)
            self.render_seconds = _recent(self.render_seconds, t2 - t0)
            self.send(("done", number, slot, oh, ow, stages))

    def stop(self) -> None:
        """Finish the frames in hand, then stop both threads."""
        self.analyse_q.put(None)
        for thread in self.threads:
            thread.join()


def engine_child_main(settings: Settings, conn: Connection) -> None:
    """The entry of one engine child (module-level: spawn imports it by name)."""
    filter_native_logs(settings.native_logs)
    configure_logging(settings.log_level, fmt=settings.log_format, secrets=settings.secret_values())
    engine = installation_engine(settings)
    sending = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with sending, contextlib.suppress(OSError):
            conn.send(message)

    send(("ready", os.getpid()))
    frames: Any = None
    lanes: _Lanes | None = None
    buffers: list[SharedMemory] = []
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            kind = message[0]
            try:
                if kind == "frame" and lanes is not None:
                    lanes.frame(*message[1:])
                elif kind == "free" and lanes is not None:
                    lanes.free.put(message[1])
                elif kind == "start":
                    _, spec, source, model_request, policy, mark, names = message
                    pipeline = engine.pipeline(spec)
                    ctx = pipeline.prepare([source], model_request=model_request)
                    frames = LiveFrames(pipeline, ctx, policy, mark)
                    buffers = [_attach(name) for name in names]
                    lanes = _Lanes(frames, buffers, send)
                    send(("started",))
                elif kind == "end":
                    if lanes is not None:
                        lanes.stop()  # the parent frees the slots until it reads "ended"
                    lanes = None
                    if frames is not None:
                        frames.close()
                    frames = None
                    for shm in buffers:
                        shm.close()
                    buffers = []
                    send(("ended",))
                elif kind == "stop":
                    return
            except Exception as exc:  # the stream fails; the child serves the next one
                log.exception("stream.engine_failed")
                send(("error", type(exc).__name__, str(exc)))
    finally:
        engine.close()


# -- the API process's side ----------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """A live process's CPU seconds (user and system) from /proc; 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class EngineChild:
    process: SpawnProcess
    conn: Connection
    pid: int
    last_cpu: float = 0.0
    #: ``stop`` runs once: the app's shutdown and a stream's or a start's own clean-up can
    #: both stop a child, from two threads (closing its pipe twice at once: EBADF)
    stopping: threading.Lock = field(default_factory=threading.Lock, repr=False)
    stopped: bool = False

    def cpu_seconds(self) -> float:
        if self.process.is_alive():
            self.last_cpu = max(self.last_cpu, _cpu_seconds(self.pid))
        return self.last_cpu

    def ask(self, message: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
        """Send ``message``, the answer (EngineChildLost: it died or did not answer)."""
        try:
            self.conn.send(message)
            if not self.conn.poll(timeout):
                raise EngineChildLost(f"the engine child did not answer in {timeout:g} s")
            answer: tuple[Any, ...] = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            raise EngineChildLost(f"the engine child is gone ({type(exc).__name__})") from None
        if answer[0] == "error":
            raise RuntimeError(f"{answer[1]}: {answer[2]}")
        return answer

    def stop(self) -> None:
        with self.stopping:
            if self.stopped:
                return
            self.stopped = True
        try:
            self.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        self.process.join(STOP_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(STOP_SECONDS)
        self.conn.close()


@dataclass
class StreamEngines:
    """This process's engine children: idle ones (warm) kept for the next stream."""

    settings: Settings
    context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))
    idle: list[EngineChild] = field(default_factory=list)
    busy: list[EngineChild] = field(default_factory=list)
    #: children loading the engine (their CPU counts from their start)
    starting: list[EngineChild] = field(default_factory=list)
    retired_cpu: float = 0.0
    closed: bool = False
    #: children being started ahead of any stream (:meth:`warm_up`): a stream that finds
    #: no idle child waits for one of them rather than loading a second engine beside it
    warming: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)  # a warming child is ready or gone

    def cpu_seconds(self) -> float:
        """The CPU seconds of every child this pool ran (those gone: as last read)."""
        with self.lock:
            children = [*self.idle, *self.busy, *self.starting]
            retired = self.retired_cpu
        return retired + sum(child.cpu_seconds() for child in children)

    def acquire(self) -> EngineChild:
        """An idle child (one warming up: when it is ready), else a new one (blocks while it
        loads the engine: the stream is swapped in the API process meanwhile). No spare is
        started beside a running stream: loading one takes a core for seconds, which the
        stream would pay for in its latency; :meth:`warm_up` starts them before any."""
        child = self._take_idle()
        if child is None and self._wait_for_warming():
            child = self._take_idle()
        if child is not None:
            return child
        child = self._spawn()
        with self.lock:
            closed = self.closed
        if closed:
            self.release(child, healthy=False)
            raise EngineChildLost("the server is stopping")
        return child

    def warm_up(self, count: int) -> int:
        """Start ``count`` children one after the other and keep them idle for the first
        streams (the app's start-up, in a thread of its own: no stream pays for their
        loading); how many started. One that fails is logged and ends the warm-up: a stream
        then starts its own child as without one."""
        started = 0
        for _ in range(count):
            with self.lock:
                if self.closed:
                    break
                self.warming += 1
            try:
                child = self._spawn()
            except EngineChildLost as exc:
                self._warmed()
                if not self.closed:  # else the app stopped while it loaded: nothing failed
                    log.warning("stream.engine_warm_up_failed", error=str(exc))
                break
            self.release(child, healthy=True)  # idle before it stops counting as warming
            self._warmed()
            started += 1
        return started

    def _warmed(self) -> None:
        with self.changed:
            self.warming -= 1
            self.changed.notify_all()

    def _wait_for_warming(self) -> bool:
        """Wait while a child is warming up and none is idle; True when one is idle."""
        with self.changed:
            self.changed.wait_for(
                lambda: self.closed or self.idle or not self.warming, START_SECONDS
            )
            return bool(self.idle)

    def _take_idle(self) -> EngineChild | None:
        with self.lock:
            if self.closed:
                raise EngineChildLost("the server is stopping")
            while self.idle:
                child = self.idle.pop()
                if child.process.is_alive():
                    self.busy.append(child)
                    return child
                self._retire(child)
        return None

    def release(self, child: EngineChild, healthy: bool) -> None:
        """Back to the idle ones (``healthy``), else stopped."""
        with self.lock:
            if child in self.busy:
                self.busy.remove(child)
            keep = healthy and not self.closed and child.process.is_alive()
            if keep:
                self.idle.append(child)
            else:
                self._retire(child)
        if not keep:
            child.stop()

    def _retire(self, child: EngineChild) -> None:
        self.retired_cpu += child.cpu_seconds()

    def _spawn(self) -> EngineChild:
        started = time.monotonic()
        parent_end, child_end = self.context.Pipe()
        process = self.context.Process(
            target=engine_child_main,
            args=(self.settings, child_end),
            name="facegate-stream-engine",
            daemon=True,
        )
        process.start()
        child_end.close()
        child = EngineChild(process, parent_end, process.pid or 0)
        with self.lock:
            self.starting.append(child)
        try:
            if not parent_end.poll(START_SECONDS):
                raise EngineChildLost(f"the engine child did not start in {START_SECONDS:g} s")
            parent_end.recv()
        except BaseException as exc:
            child.stop()
            with self.lock:
                self.starting.remove(child)
                self._retire(child)
            if isinstance(exc, (EOFError, OSError)):
                lost = f"the engine child died starting ({type(exc).__name__})"
                raise EngineChildLost(lost) from None
            raise
        with self.lock:  # busy at once: its CPU is counted throughout
            self.starting.remove(child)
            self.busy.append(child)
        log.info(
            "stream.engine_started", pid=child.pid, seconds=round(time.monotonic() - started, 2)
        )
        return child

    def close(self) -> None:
        """Stop every child (the app's shutdown; streams have ended first)."""
        with self.changed:
            self.closed = True
            children = [*self.idle, *self.busy, *self.starting]
            self.idle, self.busy = [], []
            self.changed.notify_all()
        for child in children:
            child.stop()


@dataclass
class Swapped:
    """A swapped frame back from the child: its number, the image, the stages' seconds."""

    number: int
    image: Frame
    stages: dict[str, float]


class ChildStream:
    """One stream's side of its engine child. ``submit`` writes a camera frame to shared
    memory (the stream's thread; call it again only after ``on_next``); a reader thread
    takes the child's answers: ``on_next(number)`` when the child can take the frame
    after ``number`` (it is rendering ``number``),
    ``on_done(Swapped)`` for each swapped frame (in order), ``on_lost(reason)`` once when
    the child failed or died."""

    def __init__(
        self,
        engines: StreamEngines,
        spec: PipelineSpec,
        source: Frame,
        model_request: ModelRequest,
        policy: Policy,
        mark: JobMark,
        on_next: Callable[[int], None],
        on_done: Callable[[Swapped], None],
        on_lost: Callable[[str], None],
    ) -> None:
        size = frame_bytes(policy)
        self.engines = engines
        self.on_next, self.on_done, self.on_lost = on_next, on_done, on_lost
        self.buffers = [
            SharedMemory(create=True, size=size),
            SharedMemory(create=True, size=size * OUT_SLOTS),
        ]
        self.healthy = False
        self.closing = False
        self.sending = threading.Lock()
        self.child: EngineChild | None = None
        self.reader: threading.Thread | None = None
        self.ended = threading.Event()
        try:
            self.child = engines.acquire()
            names = [shm.name for shm in self.buffers]
            self.child.ask(
                ("start", spec, source, model_request, policy, mark, names), PREPARE_SECONDS
            )
            self.healthy = True
        except BaseException:
            self.close()
            raise
        self.reader = threading.Thread(target=self._read, name="stream-engine-read", daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int | None:
        return None if self.child is None else self.child.pid

    def _send(self, message: tuple[Any, ...]) -> None:
        assert self.child is not None
        with self.sending:
            self.child.conn.send(message)

    def submit(self, frame: Frame, number: int) -> None:
        """Hand the child a camera frame (EngineChildLost: the child is gone)."""
        height, width = frame.shape[:2]
        np.ndarray((height, width, 3), np.uint8, buffer=self.buffers[0].buf)[...] = frame
        try:
            self._send(("frame", number, height, width))
        except (OSError, BrokenPipeError) as exc:
            self.healthy = False
            raise EngineChildLost(f"the engine child is gone ({type(exc).__name__})") from None

    def _read(self) -> None:
        assert self.child is not None
        conn = self.child.conn
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError) as exc:
                self.healthy = False
                if not self.closing:
                    self.on_lost(f"EngineChildLost: {type(exc).__name__}")
                self.ended.set()
                return
            kind = message[0]
            if kind == "next":
                self.on_next(message[1])
            elif kind == "done":
                _, number, slot, oh, ow, stages = message
                size = oh * ow * 3
                view: Frame = np.ndarray(
                    (oh, ow, 3), np.uint8, buffer=self.buffers[1].buf, offset=slot * size
                )
                image: Frame = view.copy()
                with contextlib.suppress(OSError, BrokenPipeError), self.sending:
                    conn.send(("free", slot))
                self.on_done(Swapped(number, image, stages))
            elif kind == "error":
                self.healthy = False
                self.on_lost(f"{message[1]}: {message[2]}")
            elif kind == "ended":
                self.ended.set()
                return

    def close(self) -> None:
        """End the stream's work in the child (the child goes back to the pool when it
        answered), and free the buffers."""
        self.closing = True
        child, self.child = self.child, None
        if child is not None:
            healthy = self.healthy and child.process.is_alive()
            if healthy:
                try:
                    with self.sending:
                        child.conn.send(("end",))
                    if self.reader is not None:
                        healthy = self.ended.wait(PREPARE_SECONDS)
                except (OSError, BrokenPipeError):
                    healthy = False
            self.engines.release(child, healthy)
        for shm in self.buffers:
            shm.close()
            with contextlib.suppress(FileNotFoundError):
                shm.unlink()
        self.buffers = []
