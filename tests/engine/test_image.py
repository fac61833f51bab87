from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import pytest
from badmedia import (
    BadInput,
    bad_inputs,
    encode_sample,
    jpeg_with_comment,
    over_max_bytes,
    png_pixel_bomb,
    png_zero_image,
    polyglot_jpeg_zip_in_comment,
    sample_rgb,
    zero_zlib_stream,
)
from PIL import Image, ImageFile

from facegate.engine.errors import (
    CorruptMedia,
    InvalidOptions,
    MediaTooLarge,
    UnsupportedMedia,
)
from facegate.engine.image import (
    ImageLimits,
    load_image,
    load_image_file,
    probe_image,
)

LIMITS = ImageLimits()


def encode_pil(image: Image.Image, fmt: str, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


# --- refused inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", bad_inputs(), ids=lambda bad: bad.name)
def test_bad_input_gets_its_typed_error(bad: BadInput) -> None:
    with pytest.raises(bad.error) as caught:
        load_image(bad.data, LIMITS)
    assert "\n" not in str(caught.value)
    assert str(caught.value) == caught.value.detail


# Damaged pixel data is only found by a full decode; everything else is refused from headers.
HEADER_REFUSED = [bad for bad in bad_inputs() if bad.name != "damaged-png-data"]


@pytest.mark.parametrize("bad", HEADER_REFUSED, ids=lambda bad: bad.name)
def test_probe_refuses_what_load_refuses_before_decoding(bad: BadInput) -> None:
    with pytest.raises(bad.error):
        probe_image(bad.data, LIMITS)


def test_wrong_type_errors_name_what_was_found() -> None:
    found = {}
    for bad in bad_inputs():
        if bad.error is UnsupportedMedia and not bad.name.startswith("polyglot"):
            with pytest.raises(UnsupportedMedia) as caught:
                load_image(bad.data, LIMITS)
            found[bad.name] = str(caught.value)
    assert "GIF image" in found["gif"]
    assert "HTML document" in found["html"]
    assert "SVG image" in found["svg"]
    assert "PDF document" in found["pdf"]
    assert "ZIP archive" in found["zip"]
    assert "text file" in found["text-renamed.jpg"]
    assert "empty file (0 bytes)" in found["zero-bytes"]


def test_over_max_bytes_is_checked_first_and_names_the_limit() -> None:
    limits = ImageLimits(max_bytes=1000, max_pixels=10)
    with pytest.raises(MediaTooLarge) as caught:
        load_image(over_max_bytes(1000).data, limits)
    assert (caught.value.limit_name, caught.value.limit, caught.value.actual) == (
        "max_bytes",
        1000,
        1001,
    )
    assert "max_bytes" in str(caught.value)


def test_pixel_bomb_reports_max_pixels() -> None:
    with pytest.raises(MediaTooLarge) as caught:
        probe_image(png_pixel_bomb().data, LIMITS)
    error = caught.value
    assert (error.limit_name, error.limit, error.actual) == ("max_pixels", 40_000_000, 900_000_000)
    assert "max_pixels" in str(error)
    assert len(png_pixel_bomb().data) < 4_000_000


def test_zero_stream_builder_makes_a_valid_png() -> None:
    # The bomb is only meaningful if its generator writes real, decodable PNGs.
    data = png_zero_image(1500, 1000)  # 4.5 MB of raw rows: several repeated blocks
    assert zlib.decompress(zero_zlib_stream(3 * 2**20 + 17)) == bytes(3 * 2**20 + 17)
    loaded = load_image(data, LIMITS)
    assert (loaded.width, loaded.height) == (1500, 1000)
    assert not loaded.frame.any()


_PEAK_RSS_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from facegate.engine.errors import MediaTooLarge
    from facegate.engine.image import ImageLimits, load_image_file

    def peak_kb():
        with open("/proc/self/status") as status:
            line = next(l for l in status if l.startswith("VmHWM:"))
        return int(line.split()[1])

    # ru_maxrss survives fork + exec, so a child of a large pytest process would start at
    # the parent's size; resetting the kernel's high-water mark measures this process only.
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    limits = ImageLimits(max_pixels=int(sys.argv[2]))
    before = peak_kb()
    try:
        loaded = load_image_file(sys.argv[1], limits)
        outcome = f"{loaded.width}x{loaded.height}"
    except MediaTooLarge as error:
        outcome = error.limit_name
    after = peak_kb()
    print(json.dumps({"outcome": outcome, "before_kb": before, "after_kb": after}))
    """
)


def measure_peak_rss(path: Path, max_pixels: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_SCRIPT, str(path), str(max_pixels)],
        capture_output=True,
        check=True,
        text=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_pixel_bomb_is_refused_without_allocating_its_pixels(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_pixel_bomb().data)
    refused = measure_peak_rss(bomb, 40_000_000)
    assert refused["outcome"] == "max_pixels"
    # 30000 x 30000 x 3 bytes would be 2.7 GB; the refusal must not come near it.
    assert int(refused["after_kb"]) < 400_000  # type: ignore[call-overload]
    assert int(refused["after_kb"]) - int(refused["before_kb"]) < 50_000  # type: ignore[call-overload]

    # Control: the same measurement does see a decode (6000 x 6000 x 3 = 108 MB of pixels).
    decoded = tmp_path / "decoded.png"
    decoded.write_bytes(png_zero_image(6000, 6000))
    allowed = measure_peak_rss(decoded, 40_000_000)
    assert allowed["outcome"] == "6000x6000"
    assert int(allowed["after_kb"]) - int(allowed["before_kb"]) > 100_000  # type: ignore[call-overload]


def test_polyglot_with_zip_inside_really_is_a_zip() -> None:
    # The refused file is a genuine polyglot: a ZIP reader opens it.
    data = polyglot_jpeg_zip_in_comment().data
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["payload.html"]


def test_padding_after_end_marker_and_mpo_pictures_are_accepted() -> None:
    jpeg = encode_sample("JPEG")
    for data in (jpeg + bytes(300), jpeg + b"\xff" * 10, jpeg + encode_sample("JPEG")):
        assert load_image(data, LIMITS).format == "jpeg"
    assert load_image(encode_sample("PNG") + bytes(16), LIMITS).format == "png"


def test_harmless_metadata_is_not_taken_for_a_polyglot() -> None:
    xmp = (
        b'http://ns.adobe.com/xap/1.0/\x00<?xpacket begin=""?><x:xmpmeta xmlns:x="adobe:ns:meta/"/>'
    )
    assert load_image(jpeg_with_comment(xmp), LIMITS).format == "jpeg"


def test_png_without_iend_is_truncated() -> None:
    png = encode_sample("PNG")
    with pytest.raises(CorruptMedia, match="IEND"):
        load_image(png[: png.rindex(b"IEND") - 4], LIMITS)


def test_truncated_images_stay_errors() -> None:
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_limits_are_validated() -> None:
    for bad in ({"max_bytes": 0}, {"max_pixels": -1}, {"max_pixels": 1.5}, {"max_bytes": True}):
        with pytest.raises(InvalidOptions):
            ImageLimits(**bad)  # type: ignore[arg-type]


def test_limit_is_per_call() -> None:
    data = encode_sample("PNG", sample_rgb(100, 100))
    with pytest.raises(MediaTooLarge):
        load_image(data, ImageLimits(max_pixels=9_999))
    assert load_image(data, ImageLimits(max_pixels=10_000)).width == 100


def test_load_image_file_reads_a_bounded_prefix(tmp_path: Path) -> None:
    path = tmp_path / "big.jpg"
    path.write_bytes(over_max_bytes(5000).data + bytes(10_000))
    with pytest.raises(MediaTooLarge) as caught:
        load_image_file(path, ImageLimits(max_bytes=5000))
    assert caught.value.actual == 15_001
    good = tmp_path / "good.png"
    good.write_bytes(encode_sample("PNG"))
    assert load_image_file(good, LIMITS).format == "png"
