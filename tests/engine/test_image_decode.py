from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from badmedia import build_png, damaged_png_data, encode_sample, exif_jpeg, sample_rgb
from PIL import Image
from tests.testdata import FACES

from facegate.engine.errors import InvalidOptions
from facegate.engine.image import (
    ImageLimits,
    encode_image,
    load_image,
    load_image_file,
    probe_image,
)

LIMITS = ImageLimits()
PHOTOS = sorted(p for p in FACES.glob("*") if p.suffix.lower() in {".jpg", ".jpeg", ".png"})


def encode_pil(image: Image.Image, fmt: str, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def test_every_test_photo_loads() -> None:
    assert len(PHOTOS) >= 19
    for path in PHOTOS:
        loaded = load_image_file(path, LIMITS)
        frame = loaded.frame
        assert frame.dtype == np.uint8
        assert frame.flags["C_CONTIGUOUS"]
        assert frame.shape == (loaded.height, loaded.width, 3)
        with Image.open(path) as reference:
            assert reference.size == (loaded.width, loaded.height)
            # BGR order: channel 2 of the frame is the red channel of the file.
            red = np.asarray(reference.convert("RGB"))[..., 0]
        if not loaded.is_grayscale:
            assert np.array_equal(frame[..., 2], red)
    gray = load_image_file(FACES / "man_profile_grayscale_occluded.png", LIMITS)
    assert gray.is_grayscale


def test_probe_reads_the_header_only() -> None:
    info = probe_image(damaged_png_data().data, LIMITS)  # its pixel data is broken
    assert (info.format, info.width, info.height) == ("png", 256, 192)


@pytest.mark.parametrize(("orientation", "top_is_red"), [(1, None), (6, True), (8, False)])
def test_exif_orientation_is_applied(orientation: int, top_is_red: bool | None) -> None:
    data = exif_jpeg(orientation)
    loaded = load_image(data, LIMITS)
    info = probe_image(data, LIMITS)
    if top_is_red is None:
        assert (loaded.width, loaded.height) == (40, 20)
        assert loaded.frame[10, 5, 2] > 200  # stored left (red) stays left
        return
    # A 90-degree turn: the stored left edge becomes the top (6) or the bottom (8).
    assert (loaded.width, loaded.height) == (20, 40) == (info.width, info.height)
    top_red = bool(loaded.frame[5, 10, 2] > 200 and loaded.frame[5, 10, 0] < 60)
    assert top_red is top_is_red


def test_grayscale_becomes_three_equal_channels() -> None:
    gray = Image.fromarray(np.arange(256, dtype=np.uint8).reshape(16, 16), "L")
    for fmt in ("PNG", "JPEG"):
        loaded = load_image(encode_pil(gray, fmt), LIMITS)
        assert loaded.is_grayscale
        assert loaded.alpha is None
        assert np.array_equal(loaded.frame[..., 0], loaded.frame[..., 1])
        assert np.array_equal(loaded.frame[..., 1], loaded.frame[..., 2])
    assert not load_image(encode_sample("PNG"), LIMITS).is_grayscale


def test_rgba_keeps_alpha_and_composites_over_white() -> None:
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[0, 0] = (255, 0, 0, 255)  # opaque red
    rgba[0, 1] = (0, 0, 255, 0)  # fully transparent blue
    rgba[1, 0] = (255, 0, 0, 128)  # half-transparent red
    rgba[1, 1] = (0, 255, 0, 255)
    loaded = load_image(encode_pil(Image.fromarray(rgba, "RGBA"), "PNG"), LIMITS)
    assert loaded.alpha is not None
    assert loaded.alpha.tolist() == [[255, 0], [128, 255]]
    assert loaded.frame[0, 0].tolist() == [0, 0, 255]  # BGR red
    assert loaded.frame[0, 1].tolist() == [255, 255, 255]  # transparent shows the white
    assert loaded.frame[1, 0].tolist() == [127, 127, 255]  # red half over white


def test_palette_images_convert_with_their_transparency() -> None:
    palette = Image.new("P", (4, 4), 0)
    palette.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    palette.putpixel((1, 1), 1)
    loaded = load_image(encode_pil(palette, "PNG", transparency=0), LIMITS)
    assert loaded.alpha is not None
    assert (loaded.alpha[1, 1], loaded.alpha[0, 0]) == (255, 0)
    assert loaded.frame[1, 1].tolist() == [0, 100, 200]
    gray_palette = Image.new("P", (4, 4), 0)
    gray_palette.putpalette([v for i in range(256) for v in (i, i, i)])
    assert load_image(encode_pil(gray_palette, "PNG"), LIMITS).is_grayscale


def test_16_bit_png_is_scaled_not_clipped() -> None:
    gray16 = (np.arange(256, dtype=np.uint16) * 257).reshape(16, 16)  # 0..65535
    loaded = load_image(encode_pil(Image.fromarray(gray16), "PNG"), LIMITS)
    assert loaded.is_grayscale
    assert loaded.frame[..., 0].ravel().tolist() == list(range(256))
    # 16-bit RGB (Pillow cannot write it): rows of filter byte + big-endian samples.
    samples = np.zeros((2, 3, 3), ">u2")
    samples[0, 0] = (65535, 32768, 0)
    rows = b"".join(b"\x00" + row.tobytes() for row in samples)
    rgb16 = load_image(build_png(3, 2, zlib.compress(rows), bit_depth=16), LIMITS)
    assert rgb16.frame[0, 0].tolist() == [0, 128, 255]


def test_cmyk_jpeg_becomes_rgb() -> None:
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # full magenta + yellow: red
    loaded = load_image(encode_pil(cmyk, "JPEG", quality=95), LIMITS)
    blue, green, red = loaded.frame[4, 4].tolist()
    assert red > 230
    assert max(green, blue) < 30
    assert not loaded.is_grayscale


@pytest.mark.parametrize("fmt", ["BMP", "TIFF", "WEBP"])
def test_other_allowed_formats_load(fmt: str) -> None:
    params = {"lossless": True} if fmt == "WEBP" else {}
    loaded = load_image(encode_sample(fmt, **params), LIMITS)
    expected = np.asarray(sample_rgb())[..., ::-1]
    assert loaded.format == fmt.lower()
    assert np.array_equal(loaded.frame, expected)


@pytest.mark.parametrize("fmt", ["jpeg", "png", "webp"])
def test_encode_round_trip(fmt: str) -> None:
    frame = np.ascontiguousarray(np.asarray(sample_rgb(96, 64))[..., ::-1])
    loaded = load_image(encode_image(frame, fmt, quality=95), LIMITS)
    assert (loaded.format, loaded.frame.shape, loaded.alpha) == (fmt, frame.shape, None)
    error = np.abs(loaded.frame.astype(int) - frame.astype(int)).mean()
    assert error == 0 if fmt == "png" else error < 4
    lossless = load_image(encode_image(frame, fmt, quality=100), LIMITS).frame
    if fmt != "jpeg":
        assert np.array_equal(lossless, frame)


@pytest.mark.parametrize("fmt", ["png", "webp"])
def test_encode_round_trips_alpha(fmt: str) -> None:
    rgba = np.asarray(sample_rgb(32, 16).convert("RGBA")).copy()
    rgba[..., 3] = np.arange(32, dtype=np.uint8)[None, :] * 8
    loaded = load_image(encode_pil(Image.fromarray(rgba, "RGBA"), "PNG"), LIMITS)
    assert loaded.alpha is not None
    again = load_image(encode_image(loaded.frame, fmt, quality=100, alpha=loaded.alpha), LIMITS)
    assert again.alpha is not None
    assert np.array_equal(again.alpha, loaded.alpha)
    # Straight colour is recovered from the composited frame, so compositing again matches.
    assert np.abs(again.frame.astype(int) - loaded.frame.astype(int)).max() <= 1


def test_png_quality_picks_the_compression_level() -> None:
    frame = np.ascontiguousarray(np.asarray(sample_rgb(256, 256))[..., ::-1])
    assert len(encode_image(frame, "png", quality=1)) < len(encode_image(frame, "png", quality=100))


@pytest.mark.parametrize("quality", [0, 101, -5, 1.5, True, "90"])
def test_encode_validates_quality(quality: object) -> None:
    frame = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(InvalidOptions, match="quality"):
        encode_image(frame, "jpeg", quality=quality)  # type: ignore[arg-type]


def test_encode_validates_format_and_arrays() -> None:
    frame = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(InvalidOptions, match="format"):
        encode_image(frame, "gif")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions):
        encode_image(np.zeros((4, 4), np.uint8), "png")
    with pytest.raises(InvalidOptions):
        encode_image(frame.astype(np.float32), "png")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match="alpha"):
        encode_image(frame, "png", alpha=np.zeros((3, 4), np.uint8))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "TIFF"])
def test_exif_orientation_in_other_formats(fmt: str) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode_sample(fmt, sample_rgb(40, 20), exif=exif)
    info = probe_image(data, LIMITS)
    loaded = load_image(data, LIMITS)
    assert (info.width, info.height) == (loaded.width, loaded.height) == (20, 40)
