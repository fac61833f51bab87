"""The watermark payload: check bits, Chase correction of the least certain bits, and the
pixels round trip through what shared copies go through."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.watermark import candidate_views, embed_watermark, watermark_scores
from facegate.provenance.payload import (
    CHASE_BITS,
    LENGTH,
    Payload,
    decode_any,
    decode_scores,
    encode_payload,
)


def soft(bits: np.ndarray, certainty: float = 0.4) -> np.ndarray:
    return np.where(bits == 1, 0.5 + certainty, 0.5 - certainty)


KEY = bytes(range(32))


def test_the_payload_round_trips_and_its_check_bits_catch_errors() -> None:
    bits = encode_payload(KEY, 123_456)
    assert len(bits) == LENGTH
    assert decode_scores(soft(bits), KEY) == Payload(123_456)
    rng = np.random.default_rng(1)
    wrong = bits.copy()
    flipped = rng.choice(LENGTH, CHASE_BITS, replace=False)
    wrong[flipped] ^= 1
    scores = soft(wrong)
    scores[flipped] = np.where(wrong[flipped] == 1, 0.55, 0.45)  # read, but without conviction
    assert decode_scores(scores, KEY) == Payload(123_456)
    scores[flipped] = soft(wrong[flipped])  # the same errors read with conviction: no payload
    assert decode_scores(scores, KEY) is None


def test_random_readings_decode_to_nothing() -> None:
    rng = np.random.default_rng(7)
    found = [decode_scores(rng.uniform(0.3, 0.7, LENGTH), KEY) for _ in range(300)]
    assert found.count(None) == len(found)


def read(frame: np.ndarray) -> Payload | None:
    return decode_any((watermark_scores(view, LENGTH) for view in candidate_views(frame)), KEY)


def jpeg(frame: np.ndarray, quality: int) -> np.ndarray:
    encoded = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])[1]
    return np.asarray(cv2.imdecode(encoded, cv2.IMREAD_COLOR))


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: f,
        lambda f: jpeg(f, 70),
        lambda f: cv2.resize(f, (f.shape[1] // 2, f.shape[0] // 2), interpolation=cv2.INTER_AREA),
        lambda f: f[f.shape[0] // 20 : -f.shape[0] // 20, f.shape[1] // 20 : -f.shape[1] // 20],
        lambda f: cv2.convertScaleAbs(f, alpha=0.9),
    ],
    ids=["saved", "jpeg70", "half", "crop10", "darker10"],
)
def test_the_mark_survives_shared_copies(transform: object) -> None:
    photo = cv2.imread(str(FACES / "woman_a_frontal_blue_wall_02.jpg"))
    marked = jpeg(embed_watermark(photo, encode_payload(KEY, 42)), 95)
    assert cv2.PSNR(photo, marked) > 35
    assert callable(transform)
    assert read(transform(marked)) == Payload(42)
    assert read(photo) is None


def test_the_package_reads_the_vectorised_marks_bit_for_bit() -> None:
    """The vectorised embed is invisible-watermark's dwtDctSvd rule: the package's own
    reader, on the canonical copy, reads every block's bit as written."""
    from facegate.engine import watermark

    photo = cv2.imread(str(FACES / "man_frontal_beard_closeup.jpg"))
    small = cv2.resize(photo, (watermark.CANONICAL, watermark.CANONICAL))
    bits = encode_payload(KEY, 99)
    marked = watermark.apply_delta(small, watermark.watermark_delta(small, bits))
    package = watermark.package_module("dwtDctSvd")
    reader = package.EmbedDwtDctSvd(
        watermarks=[], wmLen=watermark.BLOCKS, scales=[0, watermark.STRENGTH, 0]
    )
    read_bits = np.asarray(reader.decode(marked), dtype=np.uint8)
    written = bits[watermark._block_bits(LENGTH)]
    assert np.array_equal(read_bits, written)


def test_a_video_frames_mark_added_in_place_is_the_same_bytes() -> None:
    """``VideoWatermark(in_place=True)`` (a video job's handed-over frames): the mark goes
    into the frame it is given, no new frame, and every frame is byte for byte what the
    new-frame path gives (the refresh included)."""
    from facegate.engine.watermark import VideoWatermark

    photo = cv2.imread(str(FACES / "woman_a_frontal_blue_wall_02.jpg"))
    bits = encode_payload(KEY, 7)
    fresh, kept = VideoWatermark(bits), VideoWatermark(bits, in_place=True)
    for index in range(VideoWatermark.REFRESH_FRAMES + 2):
        frame = np.roll(photo, 3 * index, axis=1)  # a moving picture: refreshes differ
        expected = fresh(frame, index)
        given = frame.copy()
        out = kept(given, index)
        assert out is given
        assert out.tobytes() == expected.tobytes()
        assert not np.array_equal(expected, frame)
