"""Safe image decode and encode.

Every upload goes through `load_image` (or `verify_image` when it is only validated and
stored as is, `probe_image` when only the size is needed). The
checks run cheapest first and each refuses with a typed error before the next, costlier step:

1. size in bytes against `ImageLimits.max_bytes` (`MediaTooLarge`, limit_name "max_bytes");
2. the format from magic bytes, allowlist JPEG, PNG, WebP, BMP, TIFF (`UnsupportedMedia`
   naming what was found); Pillow is then told to try that one format only;
3. the single-container rule of `image_sniff` (polyglots: `UnsupportedMedia`; a missing end
   marker: `CorruptMedia`);
4. width x height from the header against `max_pixels` (`MediaTooLarge`, "max_pixels"),
   before any pixel is decoded or allocated;
5. a full decode (`CorruptMedia` on any decoder failure; truncated data is never padded),
   EXIF orientation, conversion to a BGR frame with a separate alpha plane (`image_convert`).
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from facegate.engine.errors import CorruptMedia, InvalidOptions, MediaTooLarge, UnsupportedMedia
from facegate.engine.image_convert import convert_image, swap_red_blue, uncomposite
from facegate.engine.image_sniff import (
    ImageFormat,
    check_single_container,
    describe_content,
    sniff_format,
)
from facegate.engine.types import Frame

# Pillow's own bomb guard is process-wide state (one number for every caller) and would
# override the per-tenant limit passed in here, so it is switched off once and the explicit
# `ImageLimits.max_pixels` check below governs every decode. Truncated data must stay an error.
Image.MAX_IMAGE_PIXELS = None
ImageFile.LOAD_TRUNCATED_IMAGES = False

_PIL_FORMATS: Mapping[ImageFormat, str] = MappingProxyType(
    {
        "jpeg": "JPEG",
        "png": "PNG",
        "webp": "WEBP",
        "bmp": "BMP",
        "tiff": "TIFF",
    }
)
OutputFormat = Literal["jpeg", "png", "webp"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("jpeg", "png", "webp")


@dataclass(frozen=True)
class ImageLimits:
    """Explicit per-call decode limits (a tenant policy sets them; the defaults are generous)."""

    max_bytes: int = 25 * 1024 * 1024
    max_pixels: int = 40_000_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_pixels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidOptions(
                    f"ImageLimits.{name} must be a positive integer, not {value!r}"
                )


@dataclass(frozen=True)
class ImageInfo:
    """What the header says: format and displayed size (EXIF orientation applied)."""

    format: ImageFormat
    width: int
    height: int


@dataclass(frozen=True, eq=False)
class LoadedImage:
    """A decoded image. `frame` is BGR uint8 (H, W, 3), contiguous, upright, colour composited
    over white where transparent; `alpha` is the straight alpha plane (H, W) uint8 or None;
    `is_grayscale` says the source held no colour (so a swap may keep the target's chroma)."""

    frame: Frame
    alpha: npt.NDArray[np.uint8] | None
    format: ImageFormat
    width: int
    height: int
    is_grayscale: bool


def probe_image(data: bytes, limits: ImageLimits) -> ImageInfo:
    """Format and size from the header only, after the byte, type and pixel checks."""
    return _header_info(*_open_checked(data, limits))


def _header_info(fmt: ImageFormat, image: Image.Image) -> ImageInfo:
    width, height = image.size
    # A 90-degree orientation swaps the axes. Pillow's TIFF plugin already reports the
    # oriented size (it applies the tag itself when it loads), so TIFF is left as it is.
    if fmt != "tiff" and _orientation(image, header_only=True) in (5, 6, 7, 8):
        width, height = height, width
    return ImageInfo(fmt, width, height)


def verify_image(data: bytes, limits: ImageLimits) -> ImageInfo:
    """Every check of `load_image`, the full decode included (damage shows only there),
    without the conversion to a frame, which costs several times the decode: for
    validating an upload that is stored as is."""
    fmt, image = _open_checked(data, limits)
    info = _header_info(fmt, image)  # before the decode, which may apply a TIFF's orientation
    if fmt == "jpeg":
        # libjpeg's DCT scaling: every entropy-coded byte is still decoded (truncation and
        # damage surface exactly as in a full decode), but the inverse DCT runs at 1/8
        # scale: ~1.4 ms instead of ~3.8 ms for a 0.8 MP upload.
        image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
    _decode(fmt, image)
    return info


def load_image(data: bytes, limits: ImageLimits) -> LoadedImage:
    """Decode `data` safely (module docstring) into an upright BGR frame plus alpha."""
    fmt, image = _open_checked(data, limits)
    _decode(fmt, image)
    upright: Image.Image = image
    if _orientation(image) != 1:  # exif_transpose copies the image even when upright
        try:
            upright = ImageOps.exif_transpose(image)
        except MemoryError:
            raise
        except Exception:
            upright = image  # unreadable EXIF: the pixels are fine, show them as stored
    converted = convert_image(upright)
    height, width = converted.frame.shape[:2]
    return LoadedImage(
        frame=converted.frame,
        alpha=converted.alpha,
        format=fmt,
        width=width,
        height=height,
        is_grayscale=converted.is_grayscale,
    )


def _decode(fmt: ImageFormat, image: Image.Image) -> None:
    try:
        image.load()
    except MemoryError:
        raise
    except Exception as exc:
        # Pillow's decoders signal damage with many exception types (OSError, SyntaxError,
        # ValueError, struct.error, EOFError, ...); all of them mean the same to a caller.
        raise CorruptMedia(f"{fmt.upper()} data is damaged: {_reason(exc)}") from exc


def load_image_file(path: str | os.PathLike[str], limits: ImageLimits) -> LoadedImage:
    """`load_image` on a file, reading at most max_bytes + 1 bytes of it."""
    with open(path, "rb") as file:
        data = file.read(limits.max_bytes + 1)
        if len(data) > limits.max_bytes:
            actual = os.fstat(file.fileno()).st_size
            raise _too_many_bytes(max(actual, len(data)), limits)
    return load_image(data, limits)


def encode_image(
    frame: Frame,
    fmt: OutputFormat,
    quality: int = 90,
    alpha: npt.NDArray[np.uint8] | None = None,
) -> bytes:
    """Encode a BGR frame. quality 1..100: JPEG/WebP quality (WebP 100 is lossless); for PNG
    it picks the zlib level (100 -> fastest, 1 -> smallest). Alpha is written for PNG and
    WebP and dropped for JPEG (the frame is already composited over white). No metadata is
    copied into the output."""
    if fmt not in OUTPUT_FORMATS:
        raise InvalidOptions(
            f"output format must be one of {', '.join(OUTPUT_FORMATS)}, not {fmt!r}"
        )
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise InvalidOptions(f"output quality must be an integer from 1 to 100, not {quality!r}")
    if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3):
        raise InvalidOptions("frame must be a uint8 array of shape (H, W, 3)")
    if frame.shape[2] != 3 or frame.shape[0] < 1 or frame.shape[1] < 1:
        raise InvalidOptions(f"frame must have shape (H, W, 3), not {frame.shape}")
    if alpha is not None and (alpha.dtype != np.uint8 or alpha.shape != frame.shape[:2]):
        raise InvalidOptions(f"alpha must be uint8 of shape {frame.shape[:2]}, not {alpha.shape}")
    if alpha is not None and fmt != "jpeg":
        rgba = np.dstack([uncomposite(frame, alpha)[..., ::-1], alpha])
        image = Image.fromarray(np.ascontiguousarray(rgba), "RGBA")
    else:
        image = Image.fromarray(swap_red_blue(frame), "RGB")
    out = io.BytesIO()
    if fmt == "jpeg":
        # Chroma subsampling blurs colour edges; keep full chroma at high quality.
        image.save(out, "JPEG", quality=quality, subsampling=0 if quality >= 90 else 2)
    elif fmt == "png":
        image.save(out, "PNG", compress_level=9 - round((quality - 1) * 8 / 99))
    else:
        image.save(out, "WEBP", quality=quality, lossless=quality == 100, method=4)
    return out.getvalue()


def _open_checked(data: bytes, limits: ImageLimits) -> tuple[ImageFormat, ImageFile.ImageFile]:
    """Steps 1-4 of the module docstring; returns the opened, not yet decoded image."""
    if len(data) > limits.max_bytes:
        raise _too_many_bytes(len(data), limits)
    fmt = sniff_format(data)
    if fmt is None:
        raise UnsupportedMedia(
            f"unsupported image type: found {describe_content(data)}; "
            "allowed are JPEG, PNG, WebP, BMP and TIFF"
        )
    check_single_container(data, fmt)
    header_size = _header_size(data, fmt)
    if header_size is not None:  # PNG/WebP: refuse before Pillow (libwebp allocates at open)
        _check_pixels(*header_size, limits)
    try:
        image = Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[fmt]])
    except MemoryError:
        raise
    except Exception as exc:
        raise CorruptMedia(f"{fmt.upper()} header is damaged: {_reason(exc)}") from exc
    assert isinstance(image, ImageFile.ImageFile)  # Image.open returns ImageFile subclasses
    _check_pixels(*image.size, limits)
    return fmt, image


def _check_pixels(width: int, height: int, limits: ImageLimits) -> None:
    if width < 1 or height < 1:
        raise CorruptMedia(f"image header declares an empty size {width}x{height}")
    if width * height > limits.max_pixels:
        raise MediaTooLarge(
            f"image is {width}x{height} = {width * height} pixels, over the limit of "
            f"{limits.max_pixels} pixels (max_pixels)",
            limit_name="max_pixels",
            limit=limits.max_pixels,
            actual=width * height,
        )


def _too_many_bytes(actual: int, limits: ImageLimits) -> MediaTooLarge:
    return MediaTooLarge(
        f"file is {actual} bytes, over the limit of {limits.max_bytes} bytes (max_bytes)",
        limit_name="max_bytes",
        limit=limits.max_bytes,
        actual=actual,
    )


def _header_size(data: bytes, fmt: ImageFormat) -> tuple[int, int] | None:
    """(width, height) read straight from a PNG IHDR or a WebP VP8/VP8L/VP8X header."""
    if fmt == "png":
        if data[12:16] != b"IHDR" or len(data) < 24:
            raise CorruptMedia("PNG data does not start with an IHDR chunk (damaged)")
        width, height = struct.unpack_from(">II", data, 16)
        return int(width), int(height)
    if fmt != "webp":
        return None
    kind = data[12:16]
    if kind == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    if kind == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack_from("<HH", data, 26)
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise CorruptMedia("WebP data has no VP8, VP8L or VP8X header (damaged)")


def _orientation(image: Image.Image, header_only: bool = False) -> int:
    """The EXIF orientation tag (1 = upright). header_only reads what the header parse found:
    Pillow's PNG getexif() decodes the whole image to look for an eXIf chunk after IDAT."""
    try:
        if header_only:
            raw = image.info.get("exif")
            exif = Image.Exif()
            if isinstance(raw, bytes):
                exif.load(raw)
        else:
            exif = image.getexif()
        value = exif.get(0x0112, 1)
    except Exception:
        return 1  # unreadable EXIF is ignored, as load_image does
    return value if isinstance(value, int) else 1


def _reason(exc: BaseException) -> str:
    """One line from a library exception, for the error detail."""
    if isinstance(exc, UnidentifiedImageError):  # its text names a BytesIO object
        return "the decoder cannot read its header"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
