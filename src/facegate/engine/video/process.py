"""``process_video``: decode -> analyse -> render -> encode, concurrently, in order.

Stages and threads (FFmpeg, OpenCV and numpy release the GIL, so they overlap on two cores):

    reader thread  -- bounded queue -->  analyse thread  -- bounded queue of futures -->
    main thread (encode + mux, in frame order; progress; cancellation)
    render calls run on a small thread pool between the analyse thread and the main thread.

``analyse`` sees every frame in order in one thread (stateful work such as tracking);
``render`` may run on several threads at once (it must be thread-safe). Memory is bounded by
the queue sizes, so a long video needs no more memory than a short one. The output is written
under a hidden temporary name in the destination folder and renamed into place only when
complete: a cancelled or failed run leaves nothing at ``dst``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import av

from facegate.engine.errors import Cancelled
from facegate.engine.types import Frame
from facegate.engine.video.convert import FrameGeometry, bgr_to_encodable
from facegate.engine.video.options import (
    VideoOptions,
    VideoProgress,
    VideoResult,
    container_for,
    output_size,
)
from facegate.engine.video.output import VideoOutput, audio_copyable
from facegate.engine.video.probe import VideoInfo, VideoLimits, probe_video
from facegate.engine.video.reader import (
    END,
    AudioItem,
    DecodedFrame,
    InputInspector,
    Reader,
    Trim,
    put,
)

ProgressFn = Callable[[VideoProgress], None]
_PROGRESS_EVERY = 0.25  # seconds between progress callbacks


class FrameInspector(Protocol):
    """Sees every output frame as it will be encoded (after ``finish``), in order, with its
    presentation time in seconds; ``end`` once all were seen, before the output is
    complete. Either may raise to fail the run (nothing appears at the destination)."""

    def see(self, frame: Frame, time: Fraction) -> None: ...

    def end(self) -> None: ...


@dataclass(frozen=True)
class FrameStages:
    """The per-frame work: ``analyse(frame, index)`` in order on one thread (may keep state),
    then ``render(frame, analysis)`` possibly on several threads (must be thread-safe), then
    ``finish(frame, index)`` in order on the encoding thread, last before the encoder (may
    keep state: the watermark), and ``inspect`` sees the result (the service's moderation);
    ``inspect_input`` sees each input frame as it is decoded (the input's moderation)."""

    render: Callable[[Frame, Any], Frame]
    analyse: Callable[[Frame, int], Any] | None = None
    finish: Callable[[Frame, int], Frame] | None = None
    inspect: FrameInspector | None = None
    inspect_input: InputInspector | None = None

    @classmethod
    def of(cls, frame_fn: Callable[[Frame], Frame]) -> FrameStages:
        return cls(render=lambda frame, _analysis: frame_fn(frame))


def process_video(
    src: Path,
    dst: Path,
    stages: FrameStages | Callable[[Frame], Frame],
    options: VideoOptions | None = None,
    on_progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    limits: VideoLimits | None = None,
) -> VideoResult:
    """Process every frame of ``src`` into ``dst`` (container from its suffix)."""
    if not isinstance(stages, FrameStages):
        stages = FrameStages.of(stages)
    muxer, encoder = container_for(dst)
    options = options or VideoOptions()
    info = probe_video(src, limits)
    tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.part")
    run = _Run(info, stages, options, on_progress, cancel or threading.Event())
    try:
        result = run.execute(src, tmp, muxer, encoder)
        os.replace(tmp, dst)
        return result
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


class _Run:
    def __init__(
        self,
        info: VideoInfo,
        stages: FrameStages,
        options: VideoOptions,
        on_progress: ProgressFn | None,
        cancel: threading.Event,
    ) -> None:
        self.info, self.stages, self.options = info, stages, options
        self.on_progress, self.cancel = on_progress, cancel
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.audio_items: queue.SimpleQueue[AudioItem] = queue.SimpleQueue()
        end = options.end if options.end is not None else info.duration
        self.total = max(1, min(info.frames, round((end - options.start) * float(info.fps))))

    def execute(self, src: Path, tmp: Path, muxer: str, encoder: str) -> VideoResult:
        width, height = output_size(self.info.width, self.info.height, self.options)
        geometry = FrameGeometry.for_rotation(
            width, height, self.info.rotation, self.info.color_range == 2
        )
        started = time.monotonic()
        with av.open(str(src)) as container:
            output = VideoOutput(
                tmp,
                muxer,
                encoder,
                (width, height),
                container.streams.video[0],
                self.options,
                self.info.rotation,
                self.info.color_range,
            )
            try:
                copy = False
                if container.streams.audio:
                    copy = output.add_audio(container.streams.audio[0])
                reader = Reader(
                    container,
                    geometry,
                    Trim(self.options.start, self.options.end),
                    self.audio_items.put if container.streams.audio else None,
                    copy,
                    self.stages.inspect_input,
                )
                frames = self._pump(reader, output, geometry, started)
                self._drain_audio(output)
                output.finish()
            except BaseException:
                output.abort()
                raise
        has_audio = output.audio is not None
        return VideoResult(
            frames=frames,
            width=width,
            height=height,
            duration=frames / float(self.info.fps),
            has_audio=has_audio,
            seconds=time.monotonic() - started,
        )

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                target()
            except BaseException as exc:  # handed to the main thread, which re-raises it
                self.errors.append(exc)
                self.stop.set()

        return body

    def _pump(
        self, reader: Reader, output: VideoOutput, geometry: FrameGeometry, started: float
    ) -> int:
        decoded: queue.Queue[object] = queue.Queue(self.options.queue_size)
        pending: queue.Queue[object] = queue.Queue(self.options.queue_size)
        pool = ThreadPoolExecutor(self.options.workers, thread_name_prefix="video-render")
        threads = [
            threading.Thread(
                target=self._guard(lambda: reader.run(decoded, self.stop)),
                name="video-read",
                daemon=True,
            ),
            threading.Thread(
                target=self._guard(lambda: self._analyse(decoded, pending, pool)),
                name="video-analyse",
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            return self._encode(pending, output, geometry, started)
        finally:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            for thread in threads:
                thread.join(timeout=5)

    def _analyse(
        self, decoded: queue.Queue[object], pending: queue.Queue[object], pool: ThreadPoolExecutor
    ) -> None:
        analyse, render = self.stages.analyse, self.stages.render
        while not self.stop.is_set():
            try:
                item = decoded.get(timeout=0.05)
            except queue.Empty:
                continue
            if item is END:
                put(pending, END, self.stop)
                return
            assert isinstance(item, DecodedFrame)
            analysis = analyse(item.frame, item.index) if analyse is not None else None
            future = pool.submit(render, item.frame, analysis)
            if not put(pending, (item, future), self.stop):
                return

    def _encode(
        self,
        pending: queue.Queue[object],
        output: VideoOutput,
        geometry: FrameGeometry,
        started: float,
    ) -> int:
        done, last_report = 0, 0.0
        while True:
            if self.cancel.is_set():
                raise Cancelled("the video run was cancelled")
            if self.errors:
                raise self.errors[0]
            try:
                entry = pending.get(timeout=0.05)
            except queue.Empty:
                continue
            if entry is END:
                if self.stages.inspect is not None:
                    self.stages.inspect.end()
                self._report(done, started, final=True)
                return done
            assert isinstance(entry, tuple)
            item: DecodedFrame = entry[0]
            frame = self._result(entry[1])
            if self.stages.finish is not None:
                frame = self.stages.finish(frame, item.index)
            if self.stages.inspect is not None:
                self.stages.inspect.see(frame, item.time)
            output.write_video(bgr_to_encodable(frame, geometry), item.pts)
            self._drain_audio(output)
            done += 1
            now = time.monotonic()
            if now - last_report >= _PROGRESS_EVERY:
                last_report = now
                self._report(done, started)

    def _result(self, future: Future[Frame]) -> Frame:
        # Wait in short slices so a cancel during a slow frame is still seen within ~50 ms.
        while True:
            if self.cancel.is_set():
                raise Cancelled("the video run was cancelled")
            try:
                return future.result(timeout=0.05)
            except TimeoutError:
                continue

    def _drain_audio(self, output: VideoOutput) -> None:
        while True:
            try:
                item = self.audio_items.get_nowait()
            except queue.Empty:
                return
            output.write_audio(item)

    def _report(self, done: int, started: float, final: bool = False) -> None:
        if self.on_progress is None:
            return
        elapsed = max(time.monotonic() - started, 1e-6)
        fps = done / elapsed
        total = done if final else max(self.total, done)
        eta = (total - done) / fps if fps > 0 else None
        self.on_progress(VideoProgress(done, total, fps, eta, elapsed))


__all__ = ["FrameInspector", "FrameStages", "audio_copyable", "process_video"]
