"""Joining the parts of a segmented run into one file, without re-encoding a frame.

A long video can be rendered as parts (``VideoOptions.start``/``end``: each part is encoded
from its own first frame, which is a keyframe, with the timestamps of the trimmed range
starting at zero). ``concat_parts`` copies the parts' video packets in order, each shifted
back to where its range starts in the original, and the original's first audio track (copied
where the container takes its codec, re-encoded otherwise, as ``process_video`` does), the
two interleaved by decoding time. The result has the frames, timestamps and audio of the run
that rendered the whole video at once; only the keyframes at the part borders differ.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from facegate.engine.errors import CorruptMedia
from facegate.engine.video.options import container_for
from facegate.engine.video.output import audio_copyable, audio_encoder


@dataclass(frozen=True)
class Part:
    """One rendered part and where its range starts in the original, in seconds."""

    path: Path
    start: Fraction


@dataclass(frozen=True)
class ConcatResult:
    """What the joined file holds."""

    frames: int
    width: int
    height: int
    has_audio: bool


def concat_parts(
    parts: Sequence[Part], audio_from: Path | None, dst: Path, rotation: int = 0
) -> ConcatResult:
    """Write ``parts`` (in order) and the audio of ``audio_from`` into ``dst`` (container
    from its suffix); nothing appears at ``dst`` unless it completes."""
    if not parts:
        raise ValueError("no parts to join")
    muxer, _ = container_for(dst)
    tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.part")
    try:
        result = _write(parts, audio_from, tmp, muxer, rotation)
        os.replace(tmp, dst)
        return result
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _write(
    parts: Sequence[Part], audio_from: Path | None, tmp: Path, muxer: str, rotation: int
) -> ConcatResult:
    with contextlib.ExitStack() as stack:
        inputs = [stack.enter_context(av.open(str(part.path))) for part in parts]
        template = inputs[0].streams.video[0]
        extradata = template.codec_context.extradata
        for number, container in enumerate(inputs[1:], start=2):
            if container.streams.video[0].codec_context.extradata != extradata:
                raise CorruptMedia(f"part {number} was encoded with other parameters")
        source = stack.enter_context(av.open(str(audio_from))) if audio_from else None
        out = stack.enter_context(av.open(str(tmp), "w", format=muxer))
        video: Any = out.add_stream_from_template(template)
        if rotation:
            video.set_display_rotation(rotation)
        streams: list[Iterator[tuple[float, int, av.Packet[Any]]]] = [
            _video_packets(inputs, parts, video)
        ]
        audio, encoding = None, False
        if source is not None and source.streams.audio:
            audio, encoding, packets = _audio(out, source, muxer)
            streams.append(packets)
        frames = 0
        for _, _, packet in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
            if packet.stream is video:
                frames += 1
            out.mux(packet)
        if encoding and audio is not None:
            out.mux(audio.encode())
        return ConcatResult(frames, template.width, template.height, audio is not None)


def _video_packets(
    inputs: Sequence[av.container.InputContainer], parts: Sequence[Part], stream: Any
) -> Iterator[tuple[float, int, av.Packet[Any]]]:
    """Each part's packets, shifted to the start of its range (0 sorts video first among
    packets of the same decoding time, as the encoder's own output has it)."""
    for container, part in zip(inputs, parts, strict=True):
        source = container.streams.video[0]
        base = source.time_base or Fraction(1, 90000)
        shift = round(part.start / base)
        for packet in container.demux(source):
            if packet.size == 0 or packet.pts is None:
                continue  # the demuxer's flush packet
            packet.pts += shift
            packet.dts = (packet.dts if packet.dts is not None else packet.pts - shift) + shift
            seconds = float(packet.dts * base)
            packet.stream = stream
            yield seconds, 0, packet


def _audio(
    out: av.container.OutputContainer, source: av.container.InputContainer, muxer: str
) -> tuple[Any, bool, Iterator[tuple[float, int, av.Packet[Any]]]]:
    """The original's first audio track: copied, or re-encoded where the muxer refuses its
    codec (the same choice ``VideoOutput.add_audio`` makes)."""
    track = source.streams.audio[0]
    if audio_copyable(muxer, track.codec_context.name):
        stream: Any = out.add_stream_from_template(track)
        return stream, False, _copied(source, track, stream)
    encoder, rate = audio_encoder(muxer, track)
    stream = out.add_stream(encoder, rate=rate)
    stream.layout = track.codec_context.layout
    return stream, True, _encoded(source, track, stream)


def _copied(
    source: av.container.InputContainer, track: av.AudioStream, stream: Any
) -> Iterator[tuple[float, int, av.Packet[Any]]]:
    for packet in source.demux(track):
        if packet.pts is None or packet.time_base is None:
            continue
        seconds = float((packet.dts if packet.dts is not None else packet.pts) * packet.time_base)
        packet.stream = stream
        yield seconds, 1, packet


def _encoded(
    source: av.container.InputContainer, track: av.AudioStream, stream: Any
) -> Iterator[tuple[float, int, av.Packet[Any]]]:
    for packet in source.demux(track):
        for chunk in packet.decode():
            assert isinstance(chunk, av.AudioFrame)
            for encoded in stream.encode(chunk):
                if encoded.dts is None or encoded.time_base is None:
                    continue
                yield float(encoded.dts * encoded.time_base), 1, encoded
