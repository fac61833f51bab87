"""verify_image: the checks and the decode of load_image, the same answers, no frame."""

from __future__ import annotations

import pytest
from badmedia import BadInput, bad_inputs, encode_sample, exif_jpeg, sample_rgb
from PIL import Image

from facegate.engine.image import ImageLimits, load_image, verify_image

LIMITS = ImageLimits()


@pytest.mark.parametrize("bad", bad_inputs(), ids=lambda bad: bad.name)
def test_refuses_everything_load_refuses_with_the_same_error(bad: BadInput) -> None:
    with pytest.raises(bad.error) as verified:
        verify_image(bad.data, LIMITS)
    with pytest.raises(bad.error) as loaded:
        load_image(bad.data, LIMITS)
    assert type(verified.value) is type(loaded.value)


def test_damaged_pixels_are_found_by_the_decode() -> None:
    damaged = next(bad for bad in bad_inputs() if bad.name == "damaged-png-data")
    verify_image(encode_sample("PNG"), LIMITS)  # the same kind of file, undamaged, passes
    with pytest.raises(damaged.error, match="damaged"):
        verify_image(damaged.data, LIMITS)


def exif_in(fmt: str) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6
    return encode_sample(fmt, sample_rgb(40, 20), exif=exif)


@pytest.mark.parametrize(
    "data",
    [
        encode_sample("JPEG"),
        encode_sample("PNG", sample_rgb(30, 70).convert("RGBA")),
        encode_sample("WEBP"),
        encode_sample("BMP"),
        encode_sample("TIFF"),
        exif_jpeg(6),
        exif_jpeg(3),
        exif_in("PNG"),
        exif_in("TIFF"),
    ],
    ids=["jpeg", "png-rgba", "webp", "bmp", "tiff", "exif6", "exif3", "png-exif6", "tiff-exif6"],
)
def test_format_and_upright_size_match_load_image(data: bytes) -> None:
    info = verify_image(data, LIMITS)
    loaded = load_image(data, LIMITS)
    assert (info.format, info.width, info.height) == (loaded.format, loaded.width, loaded.height)
