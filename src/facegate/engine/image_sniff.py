"""Content sniffing for image uploads: which format the bytes are, and whether they are *only*
that format.

The format is decided from magic bytes, never from a file name or a declared content type.
The single-container rule (what `check_single_container` enforces) refuses polyglots, files
that one program reads as an allowed image and another as something else:

1. After the format's end marker (PNG: the IEND chunk; JPEG: the EOI marker; WebP: the RIFF
   size; BMP: the header's file size) only padding may follow: bytes 0x00 or 0xFF, as some
   cameras write. A JPEG may also be followed by further complete JPEG streams (the extra
   pictures of an MPF/MPO file). Anything else appended (ZIP, HTML, a video) is refused.
   A missing end marker means the upload was cut: `CorruptMedia`.
2. Wherever in the file, no ZIP end-of-central-directory record that points at a real central
   directory (what ZIP/JAR readers look for near the end), no PDF header in the first 1024
   bytes (where PDF readers look) and no HTML/SVG/script markup in the first 1024 bytes
   (beyond the window browsers sniff). TIFF has no end marker, so only this rule applies to it.
"""

from __future__ import annotations

import re
import struct
from typing import Literal

from facegate.engine.errors import CorruptMedia, UnsupportedMedia

ImageFormat = Literal["jpeg", "png", "webp", "bmp", "tiff"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BMP_HEADER_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})
_HEAD_WINDOW = 1024
_MARKUP = re.compile(rb"<(?:script|html|svg|iframe|body|!doctype\s+html|\?php)\b", re.IGNORECASE)
_PADDING = re.compile(rb"[\x00\xff]*\Z")


def sniff_format(data: bytes) -> ImageFormat | None:
    """The allowed format whose magic bytes `data` starts with, or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(PNG_SIGNATURE):
        return "png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    # "BM" alone is too weak (a text file may start with it): require a known DIB header size.
    if data[:2] == b"BM" and len(data) >= 18:
        if struct.unpack_from("<I", data, 14)[0] in _BMP_HEADER_SIZES:
            return "bmp"
    return None


_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"II+\x00", "a BigTIFF image"),
    (b"MM\x00+", "a BigTIFF image"),
    (b"\x00\x00\x01\x00", "an ICO icon"),
    (b"8BPS", "a Photoshop document"),
    (b"\xff\x4f\xff\x51", "a JPEG 2000 codestream"),
    (b"\x00\x00\x00\x0cjP  ", "a JPEG 2000 image"),
    (b"qoif", "a QOI image"),
    (b"\x1a\x45\xdf\xa3", "a Matroska/WebM video"),
    (b"OggS", "an Ogg stream"),
    (b"ID3", "an MP3 audio file"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
)


def describe_content(data: bytes) -> str:
    """A short human description of what `data` looks like, for error messages."""
    if not data:
        return "an empty file (0 bytes)"
    for magic, name in _SIGNATURES:
        if data.startswith(magic):
            return name
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in (b"heic", b"heix", b"mif1", b"msf1", b"hevc"):
            return "a HEIF/HEIC image"
        if brand in (b"avif", b"avis"):
            return "an AVIF image"
        return "an MP4/QuickTime file"
    if data[:4] == b"RIFF":
        return f"a RIFF {data[8:12].decode('latin-1')!r} file"
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in head):
        return "an SVG image"
    if head.startswith((b"<!doctype html", b"<html")) or _MARKUP.search(head[:_HEAD_WINDOW]):
        return "an HTML document"
    if _looks_like_text(data[:4096]):
        return "a text file"
    return f"unrecognised binary data (starts with {data[:8].hex(' ')})"


def _looks_like_text(sample: bytes) -> bool:
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sample boundary is still text.
        if exc.start < len(sample) - 3:
            return False
        text = sample[: exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\t\r\n" for ch in text)
    return printable >= 0.95 * max(len(text), 1)


def check_single_container(data: bytes, fmt: ImageFormat) -> None:
    """Enforce the single-container rule (module docstring); raise a typed error if broken."""
    label = fmt.upper() if fmt != "webp" else "WebP"
    end = _stream_end(data, fmt)
    if end is not None and not _PADDING.match(data, end):
        extra = len(data) - end
        raise UnsupportedMedia(
            f"{label} file has {extra} bytes of other data after its end marker; "
            "files that are also another format (polyglots) are refused"
        )
    if _has_zip_directory(data):
        raise UnsupportedMedia(f"{label} file also contains a ZIP archive; polyglots are refused")
    head = data[:_HEAD_WINDOW]
    if b"%PDF-" in head:
        raise UnsupportedMedia(f"{label} file also carries a PDF header; polyglots are refused")
    if _MARKUP.search(head):
        raise UnsupportedMedia(f"{label} file carries HTML/script markup; polyglots are refused")


def _stream_end(data: bytes, fmt: ImageFormat) -> int | None:
    if fmt == "png":
        return png_end(data)
    if fmt == "jpeg":
        end = jpeg_end(data, 0)
        # Further complete JPEG streams are the extra pictures of an MPF (MPO) file.
        while data.startswith(b"\xff\xd8\xff", end):
            end = jpeg_end(data, end)
        return end
    if fmt == "webp":
        riff_size = int.from_bytes(data[4:8], "little")
        end = 8 + riff_size + (riff_size & 1)
        if end > len(data):
            raise CorruptMedia(
                "WebP data ends before the size its RIFF header declares (truncated)"
            )
        return end
    if fmt == "bmp":
        file_size = int.from_bytes(data[2:6], "little")
        if file_size < 26 or file_size > len(data):
            raise CorruptMedia(
                f"BMP header declares {file_size} bytes but the file has {len(data)} (damaged)"
            )
        return file_size
    return None  # TIFF: data is reached by offsets, there is no end marker


def png_end(data: bytes) -> int:
    """Offset just past the PNG IEND chunk, walking the chunk lengths."""
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        pos += 12 + length
        if kind == b"IEND":
            if pos > len(data):
                break
            return pos
    raise CorruptMedia("PNG data ends before its IEND chunk (truncated)")


def jpeg_end(data: bytes, start: int) -> int:
    """Offset just past the EOI marker of the JPEG stream that starts at `start`."""
    pos = start + 2  # past SOI
    size = len(data)
    while pos < size:
        if data[pos] != 0xFF:
            raise CorruptMedia(f"JPEG segment structure is damaged at byte {pos}")
        while pos < size and data[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= size:
            break
        marker = data[pos]
        pos += 1
        if marker == 0xD9:
            return pos
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            continue  # standalone markers carry no length
        if pos + 2 > size:
            break
        length = struct.unpack_from(">H", data, pos)[0]
        if length < 2:
            raise CorruptMedia(f"JPEG segment length {length} at byte {pos} is invalid")
        pos += length
        if marker == 0xDA:  # start of scan: entropy-coded data runs to the next marker
            pos = _scan_end(data, pos)
            if pos < 0:
                break
    raise CorruptMedia("JPEG data ends before its end-of-image marker (truncated)")


def _scan_end(data: bytes, pos: int) -> int:
    """Offset of the first marker after entropy-coded data starting at `pos`, or -1.

    Inside a scan 0xFF is followed by 0x00 (a stuffed byte) or RST0..RST7; any other byte
    after it is a marker. (bytes.find in a loop: several times faster than a regex here.)"""
    size = len(data)
    while True:
        ff = data.find(b"\xff", pos)
        if ff < 0 or ff + 1 >= size:
            return -1
        following = data[ff + 1]
        if following == 0xFF:  # fill byte: the marker starts at the last 0xFF
            pos = ff + 1
        elif following == 0x00 or 0xD0 <= following <= 0xD7:
            pos = ff + 2
        else:
            return ff


def _has_zip_directory(data: bytes) -> bool:
    """True if an end-of-central-directory record near the end points at a real directory."""
    tail_start = max(0, len(data) - 65557)
    pos = data.rfind(b"PK\x05\x06", tail_start)
    while pos >= 0:
        if pos + 22 <= len(data):
            cd_size, cd_offset = struct.unpack_from("<II", data, pos + 12)
            # Readers accept the directory at its recorded offset or, for archives glued
            # after other data, just before the record.
            for cd_start in (cd_offset, pos - cd_size):
                if 0 <= cd_start < pos and data.startswith(b"PK\x01\x02", cd_start):
                    return True
                if cd_size == 0 and cd_start == pos:
                    return True  # an empty archive: the record alone is a valid ZIP
        pos = data.rfind(b"PK\x05\x06", tail_start, pos)
    return False
