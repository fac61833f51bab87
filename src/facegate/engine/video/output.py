"""The output container: one video encoder and the source's first audio track, copied when
the container accepts its codec and re-encoded otherwise. Used from one thread only (FFmpeg
muxers are not thread-safe); the pipeline funnels everything to it in order."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import av

from facegate.engine.video.options import VideoOptions

# Audio codecs each muxer takes as they are; anything else is re-encoded.
_COPYABLE: Mapping[str, frozenset[str] | None] = MappingProxyType(
    {
        "mp4": frozenset({"aac", "mp3", "alac", "ac3", "eac3"}),
        "mov": frozenset({"aac", "mp3", "alac", "ac3", "eac3", "pcm_s16le"}),
        "matroska": None,  # takes anything
        "webm": frozenset({"opus", "vorbis"}),
    }
)
_AUDIO_ENCODER = MappingProxyType({"webm": "libopus"})


def audio_copyable(muxer: str, codec: str) -> bool:
    """Whether ``codec`` can be copied into ``muxer`` without re-encoding."""
    allowed = _COPYABLE.get(muxer)
    return allowed is None or codec in allowed


def audio_encoder(muxer: str, source: av.AudioStream) -> tuple[str, int]:
    """(encoder, sample rate) for a track that ``muxer`` cannot take as it is."""
    encoder = _AUDIO_ENCODER.get(muxer, "aac")
    rate = 48000 if encoder == "libopus" else (source.codec_context.sample_rate or 48000)
    return encoder, rate


class VideoOutput:
    """Encoder + muxer for one output file."""

    def __init__(
        self,
        path: Path,
        muxer: str,
        encoder: str,
        size: tuple[int, int],
        source: av.VideoStream,
        options: VideoOptions,
        rotation: int,
        color_range: int,
    ) -> None:
        self.container = av.open(str(path), "w", format=muxer)
        self.muxer = muxer
        rate = source.average_rate or source.guessed_rate or Fraction(25)
        video = self.container.add_stream(encoder, rate=rate)
        assert isinstance(video, av.VideoStream)
        self.video = video
        self.video.width, self.video.height = size
        self.video.pix_fmt = "yuv420p"
        # Keep the source's clock so variable-frame-rate timestamps pass through untouched.
        self.time_base = source.time_base or Fraction(1, 90000)
        self.video.time_base = self.time_base
        self.video.codec_context.time_base = self.time_base
        context = source.codec_context
        self.video.codec_context.color_range = color_range
        for name in ("colorspace", "color_primaries", "color_trc"):
            setattr(self.video.codec_context, name, getattr(context, name))
        self.video.options = dict(_encoder_options(encoder, options))
        if rotation:
            self.video.set_display_rotation(rotation)
        self.audio: av.AudioStream | None = None
        self.audio_copy = False
        self._last_pts = -1

    def add_audio(self, source: av.AudioStream) -> bool:
        """Add the audio track; returns True when packets are copied, False to re-encode."""
        if audio_copyable(self.muxer, source.codec_context.name):
            stream: Any = self.container.add_stream_from_template(source)
            self.audio_copy = True
        else:
            encoder, rate = audio_encoder(self.muxer, source)
            stream = self.container.add_stream(encoder, rate=rate)
            assert isinstance(stream, av.AudioStream)
            stream.layout = source.codec_context.layout
        assert isinstance(stream, av.AudioStream)
        self.audio = stream
        return self.audio_copy

    def write_video(self, picture: av.VideoFrame, pts: int) -> None:
        # Encoders refuse non-increasing timestamps; damaged sources can have them.
        pts = max(pts, self._last_pts + 1)
        self._last_pts = pts
        picture.pts, picture.time_base = pts, self.time_base
        self.container.mux(self.video.encode(picture))

    def write_audio(self, item: av.Packet[Any] | av.AudioFrame) -> None:
        assert self.audio is not None
        if isinstance(item, av.Packet):
            item.stream = self.audio
            self.container.mux(item)
        else:
            self.container.mux(self.audio.encode(item))

    def finish(self) -> None:
        """Flush the encoders and write the trailer."""
        self.container.mux(self.video.encode())
        if self.audio is not None and not self.audio_copy:
            self.container.mux(self.audio.encode())
        self.container.close()

    def abort(self) -> None:
        """Close without flushing (the file is deleted by the caller)."""
        try:
            self.container.close()
        except av.error.FFmpegError:
            pass


def _encoder_options(encoder: str, options: VideoOptions) -> dict[str, str]:
    if encoder == "libvpx-vp9":
        # Constant quality (crf with b:v 0), the realtime deadline and row threading: VP9's
        # "good" deadline is ~10x slower and not usable for real-time output on a CPU.
        return {
            "crf": str(min(options.crf + 10, 63)),
            "b:v": "0",
            "deadline": "realtime",
            "cpu-used": "8",
            "row-mt": "1",
        }
    return {"crf": str(min(options.crf, 51)), "preset": options.preset}
