"""Bad image inputs built in memory, for every test that must refuse them (the engine's image
tests, the service's upload tests).

Each generator is a plain function returning `BadInput(name, data, error)`: `error` is the
`EngineError` subclass `load_image` must raise. `bad_inputs()` returns them all.
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from PIL import Image

from facegate.engine.errors import CorruptMedia, EngineError, MediaTooLarge, UnsupportedMedia

DEFAULT_MAX_BYTES = 25 * 1024 * 1024


class BadInput(NamedTuple):
    name: str
    data: bytes
    error: type[EngineError]


# --- valid building blocks -------------------------------------------------------------------


def sample_rgb(width: int = 64, height: int = 48) -> Image.Image:
    """A deterministic colour gradient (every channel varies, so codecs have work to do)."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def encode_sample(fmt: str, image: Image.Image | None = None, **params: object) -> bytes:
    out = io.BytesIO()
    (image or sample_rgb()).save(out, fmt, **params)
    return out.getvalue()


def half_red_image(width: int = 40, height: int = 20) -> Image.Image:
    """Left half red, right half blue: shows where the stored left edge ends up."""
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[:, : width // 2] = (255, 0, 0)
    rgb[:, width // 2 :] = (0, 0, 255)
    return Image.fromarray(rgb, "RGB")


def exif_jpeg(orientation: int) -> bytes:
    """A 40 x 20 JPEG (left half red) whose EXIF orientation tag is `orientation`."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode_sample("JPEG", half_red_image(), quality=95, exif=exif)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def build_png(
    width: int, height: int, idat: bytes, color_type: int = 2, bit_depth: int = 8
) -> bytes:
    """A PNG from an already compressed IDAT stream (rows with their filter bytes)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


def zero_zlib_stream(size: int) -> bytes:
    """A valid zlib stream of `size` zero bytes, built without compressing them all.

    After a full flush deflate starts afresh, so compressing the same zero block again gives
    the same bytes: one block is compressed and repeated. The Adler-32 of n zeros is
    (n mod 65521) << 16 | 1, so the trailer is computed rather than summed over gigabytes.
    """
    block = 1 << 20
    count, rest = divmod(size, block)
    if count < 2:
        return zlib.compress(bytes(size), 9)
    comp = zlib.compressobj(9)
    first = comp.compress(bytes(block)) + comp.flush(zlib.Z_FULL_FLUSH)  # with the zlib header
    repeat = comp.compress(bytes(block)) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.compress(bytes(rest)) + comp.flush(zlib.Z_FINISH)
    adler = ((size % 65521) << 16) | 1
    return first + repeat * (count - 1) + tail[:-4] + struct.pack(">I", adler)


@functools.lru_cache(maxsize=4)
def png_zero_image(width: int, height: int) -> bytes:
    """A valid all-black RGB PNG of any size; 30000 x 30000 is ~2.6 MB for 2.7 GB of pixels."""
    return build_png(width, height, zero_zlib_stream(height * (1 + 3 * width)))


def zip_archive() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("payload.html", "<script>alert(document.cookie)</script>")
    return out.getvalue()


def png_with_text_chunk(text: bytes) -> bytes:
    """A valid PNG with a tEXt chunk right after IHDR (inside the first bytes of the file)."""
    png = encode_sample("PNG")
    ihdr_end = 8 + 25
    return png[:ihdr_end] + png_chunk(b"tEXt", b"Comment\x00" + text) + png[ihdr_end:]


def jpeg_with_comment(comment: bytes) -> bytes:
    """A valid JPEG with a COM segment right after SOI."""
    jpeg = encode_sample("JPEG")
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + jpeg[2:]


# --- bad inputs --------------------------------------------------------------------------------


def zero_bytes() -> BadInput:
    return BadInput("zero-bytes", b"", UnsupportedMedia)


def truncated_jpeg() -> BadInput:
    jpeg = encode_sample("JPEG", sample_rgb(256, 192))
    return BadInput("truncated-jpeg", jpeg[: len(jpeg) * 2 // 3], CorruptMedia)


def truncated_png() -> BadInput:
    png = encode_sample("PNG", sample_rgb(256, 192))
    return BadInput("truncated-png", png[: len(png) // 2], CorruptMedia)


def truncated_webp() -> BadInput:
    webp = encode_sample("WEBP", sample_rgb(256, 192))
    return BadInput("truncated-webp", webp[: len(webp) // 2], CorruptMedia)


def damaged_png_data() -> BadInput:
    """Structure intact (chunks, IEND) but the compressed pixel data overwritten."""
    png = bytearray(encode_sample("PNG", sample_rgb(256, 192)))
    idat = png.index(b"IDAT") + 4
    png[idat + 2 : idat + 66] = b"\xff" * 64
    return BadInput("damaged-png-data", bytes(png), CorruptMedia)


def damaged_jpeg_header() -> BadInput:
    """A JPEG whose frame header (SOF0) declares zero components."""
    jpeg = bytearray(encode_sample("JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 9] = 0
    return BadInput("damaged-jpeg-header", bytes(jpeg), CorruptMedia)


def gif_image() -> BadInput:
    return BadInput("gif", encode_sample("GIF"), UnsupportedMedia)


def html_page() -> BadInput:
    html = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"
    return BadInput("html", html, UnsupportedMedia)


def svg_image() -> BadInput:
    svg = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
    return BadInput("svg", svg, UnsupportedMedia)


def pdf_document() -> BadInput:
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    return BadInput("pdf", pdf, UnsupportedMedia)


def zip_file() -> BadInput:
    return BadInput("zip", zip_archive(), UnsupportedMedia)


def text_renamed_jpg() -> BadInput:
    """What a user uploads as notes.jpg: the name says JPEG, the content is text."""
    return BadInput(
        "text-renamed.jpg", b"meeting notes\nBM and JPEG are formats\n", UnsupportedMedia
    )


def polyglot_png_zip_appended() -> BadInput:
    return BadInput("polyglot-png+zip", encode_sample("PNG") + zip_archive(), UnsupportedMedia)


def polyglot_jpeg_html_appended() -> BadInput:
    html = b"<html><script>alert(1)</script></html>"
    return BadInput("polyglot-jpeg+html", encode_sample("JPEG") + html, UnsupportedMedia)


def polyglot_jpeg_zip_in_comment() -> BadInput:
    """A JPEG carrying a whole ZIP in a comment segment: image viewers and ZIP readers both
    open it, and nothing follows the end marker."""
    return BadInput("polyglot-jpeg-zip-inside", jpeg_with_comment(zip_archive()), UnsupportedMedia)


def polyglot_png_pdf_header() -> BadInput:
    return BadInput("polyglot-png-pdf", png_with_text_chunk(b"%PDF-1.4 obj"), UnsupportedMedia)


def polyglot_png_script() -> BadInput:
    return BadInput(
        "polyglot-png-script", png_with_text_chunk(b"<script>x</script>"), UnsupportedMedia
    )


def polyglot_webp_zip_appended() -> BadInput:
    return BadInput("polyglot-webp+zip", encode_sample("WEBP") + zip_archive(), UnsupportedMedia)


def over_max_bytes(max_bytes: int = DEFAULT_MAX_BYTES) -> BadInput:
    data = encode_sample("JPEG")
    return BadInput("over-max-bytes", data + bytes(max_bytes + 1 - len(data)), MediaTooLarge)


def png_pixel_bomb() -> BadInput:
    """30000 x 30000 RGB: 2.7 GB of pixels in ~2.6 MB of valid PNG."""
    return BadInput("png-30000x30000", png_zero_image(30000, 30000), MediaTooLarge)


def webp_pixel_bomb() -> BadInput:
    """A lossless WebP header declaring 16383 x 16383 (libwebp allocates its canvas at open)."""
    bits = (16383 - 1) | ((16383 - 1) << 14)
    body = b"\x2f" + bits.to_bytes(4, "little") + bytes(27)
    chunk = b"VP8L" + struct.pack("<I", len(body)) + body
    return BadInput(
        "webp-16383x16383",
        b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk,
        MediaTooLarge,
    )


def jpeg_pixel_bomb() -> BadInput:
    """A small valid JPEG whose frame header claims 65000 x 65000."""
    jpeg = bytearray(encode_sample("JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 65000, 65000)
    return BadInput("jpeg-65000x65000", bytes(jpeg), MediaTooLarge)


BAD_INPUT_FACTORIES: tuple[Callable[[], BadInput], ...] = (
    zero_bytes,
    truncated_jpeg,
    truncated_png,
    truncated_webp,
    damaged_png_data,
    damaged_jpeg_header,
    gif_image,
    html_page,
    svg_image,
    pdf_document,
    zip_file,
    text_renamed_jpg,
    polyglot_png_zip_appended,
    polyglot_jpeg_html_appended,
    polyglot_jpeg_zip_in_comment,
    polyglot_png_pdf_header,
    polyglot_png_script,
    polyglot_webp_zip_appended,
    over_max_bytes,
    png_pixel_bomb,
    webp_pixel_bomb,
    jpeg_pixel_bomb,
)


def bad_inputs() -> list[BadInput]:
    """Every bad input, refused under the default `ImageLimits`."""
    return [factory() for factory in BAD_INPUT_FACTORIES]
