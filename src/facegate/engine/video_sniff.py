"""Content sniffing for callers that must choose between the image and video paths: is a
file a video container we accept? Magic bytes only, so it costs no PyAV import (a ``facegate
swap`` of an image never loads the video stack); ``engine.video.probe`` opens the file for
real."""

from __future__ import annotations

from pathlib import Path

_MAGIC_AT_4 = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_MAGIC_AT_0 = (b"\x1a\x45\xdf\xa3", b"FLV\x01", b"\x00\x00\x01\xba")


def looks_like_video(head: bytes) -> bool:
    """True when the first bytes of a file are those of a video container we accept."""
    if len(head) >= 8 and head[4:8] in _MAGIC_AT_4:
        return True
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return True
    if len(head) >= 377 and head[0] == 0x47 and head[188] == 0x47 and head[376] == 0x47:
        return True  # MPEG transport stream: sync byte every 188 bytes
    return head.startswith(_MAGIC_AT_0)


def is_video_file(path: Path) -> bool:
    """Content sniffing for callers that must choose between the image and video paths."""
    with open(path, "rb") as handle:
        return looks_like_video(handle.read(512))
