"""The reading stage: demux, decode, trim, convert to BGR. Runs in its own thread and hands
frames to the next stage through a bounded queue (FFmpeg releases the GIL while decoding)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, Union

import av
import av.error

from facegate.engine.errors import CorruptMedia
from facegate.engine.types import Frame
from facegate.engine.video.convert import FrameGeometry, decoded_to_bgr, pixels_of
from facegate.engine.video.probe import ffmpeg_reason


@dataclass
class DecodedFrame:
    """One frame between stages: its position, its output timestamp (in the stream's time
    base, and ``time`` in seconds), its pixels."""

    index: int
    pts: int
    frame: Frame
    time: Fraction = Fraction(0)


AudioItem = Union["av.Packet[Any]", av.AudioFrame]  # Packet is generic only in the stubs


class End:
    """Sentinel closing a stage's queue."""


END = End()


def put(q: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put without blocking forever; False when the run is being stopped."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


@dataclass
class Trim:
    """The kept time range in seconds, and the shift applied to every timestamp."""

    start: float
    end: float | None

    def keeps(self, seconds: float) -> bool:
        return seconds >= self.start - 1e-6 and (self.end is None or seconds < self.end - 1e-6)

    def shift(self, pts: int, time_base: Fraction) -> int:
        return pts - round(self.start / time_base) if self.start else pts


class InputInspector(Protocol):
    """Sees every decoded input frame in order, as a way to get its pixels (called only for
    the frames it checks) and its presentation time in seconds; ``end`` after the last.
    Either may raise to fail the run (the service's moderation of the input video, done as
    the run decodes it instead of in a decode of its own)."""

    def see(self, frame: Callable[[], Frame], time: Fraction) -> None: ...

    def end(self) -> None: ...


class Reader:
    """Decodes ``container``'s first video stream (and routes its first audio stream);
    ``inspect`` sees each kept frame as decoded."""

    def __init__(
        self,
        container: av.container.InputContainer,
        geometry: FrameGeometry,
        trim: Trim,
        audio_sink: Callable[[AudioItem], None] | None,
        audio_copy: bool,
        inspect: InputInspector | None = None,
    ) -> None:
        self.inspect = inspect
        self.container = container
        self.video = container.streams.video[0]
        self.video.thread_type = "AUTO"
        self.audio = container.streams.audio[0] if audio_sink and container.streams.audio else None
        self.geometry = geometry
        self.trim = trim
        self.audio_sink = audio_sink
        self.audio_copy = audio_copy
        self.fps = self.video.average_rate or self.video.guessed_rate or Fraction(25)
        self.time_base = self.video.time_base or Fraction(1, 90000)

    def run(self, out: queue.Queue[object], stop: threading.Event) -> None:
        """Decode until the end (or ``trim.end``), putting DecodedFrame items then END."""
        if self.trim.start:
            self.container.seek(int(self.trim.start * av.time_base), backward=True)
        streams = [s for s in (self.video, self.audio) if s is not None]
        index = 0
        try:
            for packet in self.container.demux(*streams):
                if stop.is_set():
                    return
                if packet.stream is self.audio:
                    self._route_audio(packet)
                    continue
                for picture in packet.decode():
                    assert isinstance(picture, av.VideoFrame)
                    seconds = self._seconds(picture, index)
                    if self.trim.end is not None and seconds >= self.trim.end - 1e-6:
                        self._end()
                        put(out, END, stop)
                        return
                    if not self.trim.keeps(seconds):
                        continue
                    if self.inspect is not None:
                        self.inspect.see(pixels_of(picture), self._time(picture, index))
                    pts = self.trim.shift(round(seconds / self.time_base), self.time_base)
                    item = DecodedFrame(
                        index, pts, decoded_to_bgr(picture, self.geometry), pts * self.time_base
                    )
                    if not put(out, item, stop):
                        return
                    index += 1
        except av.error.FFmpegError as exc:
            raise CorruptMedia(f"the video data is damaged: {ffmpeg_reason(exc)}") from None
        self._end()
        put(out, END, stop)

    def _end(self) -> None:
        if self.inspect is not None:
            self.inspect.end()

    def _time(self, picture: av.VideoFrame, index: int) -> Fraction:
        if picture.pts is None:
            return index / Fraction(self.fps) + Fraction(self.trim.start)
        return picture.pts * Fraction(self.time_base)

    def _seconds(self, picture: av.VideoFrame, index: int) -> float:
        if picture.pts is None:
            return float(index / self.fps) + self.trim.start
        return float(picture.pts * self.time_base)

    def _route_audio(self, packet: av.Packet[Any]) -> None:
        assert self.audio_sink is not None
        if packet.pts is None or packet.time_base is None:
            return
        if not self.trim.keeps(float(packet.pts * packet.time_base)) and self.trim.start:
            return
        if self.trim.end is not None and float(packet.pts * packet.time_base) >= self.trim.end:
            return
        if self.audio_copy:
            packet.pts = self.trim.shift(packet.pts, packet.time_base)
            if packet.dts is not None:
                packet.dts = self.trim.shift(packet.dts, packet.time_base)
            self.audio_sink(packet)
            return
        for chunk in packet.decode():
            assert isinstance(chunk, av.AudioFrame)
            if chunk.pts is not None and chunk.time_base is not None:
                chunk.pts = self.trim.shift(chunk.pts, chunk.time_base)
            self.audio_sink(chunk)
