"""Fuzzing `load_image`: whatever the bytes, the only exceptions that leave it are the engine's
typed errors (never a Pillow, numpy or struct exception)."""

from __future__ import annotations

import functools

from badmedia import encode_sample, exif_jpeg, sample_rgb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from facegate.engine.errors import EngineError
from facegate.engine.image import ImageLimits, LoadedImage, load_image, probe_image

# Small limits: a mutated header may declare any size, and the fuzz must stay cheap.
LIMITS = ImageLimits(max_bytes=64 * 1024, max_pixels=250_000)
MAGICS = [b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"II*\x00", b"MM\x00*", b"RIFF\x20\0\0\0WEBPVP8L"]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def seeds() -> tuple[bytes, ...]:
    small = sample_rgb(24, 16)
    return (
        encode_sample("JPEG", small),
        encode_sample("JPEG", small, progressive=True),
        exif_jpeg(6),
        encode_sample("PNG", small),
        encode_sample("PNG", small.convert("RGBA")),
        encode_sample("PNG", small.convert("P")),
        encode_sample("WEBP", small),
        encode_sample("WEBP", small.convert("RGBA"), lossless=True),
        encode_sample("BMP", small),
        encode_sample("TIFF", small),
        encode_sample("TIFF", small, compression="tiff_deflate"),
    )


def decode_or_typed_error(data: bytes) -> None:
    try:
        loaded = load_image(data, LIMITS)
    except EngineError:
        pass
    else:
        assert isinstance(loaded, LoadedImage)
        assert loaded.frame.shape == (loaded.height, loaded.width, 3)
        assert loaded.width * loaded.height <= LIMITS.max_pixels
    try:
        probe_image(data, LIMITS)
    except EngineError:
        pass


@st.composite
def mutated_image(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds())))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=32))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 64))]
    return bytes(data)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_raise_only_typed_errors(data: bytes) -> None:
    decode_or_typed_error(data)


@FUZZ
@given(st.sampled_from(MAGICS), st.binary())
def test_random_bytes_behind_real_magic_raise_only_typed_errors(magic: bytes, rest: bytes) -> None:
    decode_or_typed_error(magic + rest)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_image())
def test_mutated_images_raise_only_typed_errors(data: bytes) -> None:
    decode_or_typed_error(data)


def test_seeds_decode() -> None:
    # The mutations start from valid files of every allowed format.
    formats = {load_image(seed, LIMITS).format for seed in seeds()}
    assert formats == {"jpeg", "png", "webp", "bmp", "tiff"}
