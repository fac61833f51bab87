"""A perceptual hash of an image (pHash: the signs of the 8x8 lowest frequencies of the
DCT of a 32x32 grey copy against their median), so a re-encoded, resized or slightly
recoloured copy of a reported image hashes within a few bits of it."""

from __future__ import annotations

import cv2
import numpy as np

from facegate.engine.types import Frame

#: Bits (of 64) two hashes of one image may differ by: a JPEG 70 copy differs by 0-4; two
#: different photos by ~32 on average.
SAME_IMAGE_BITS = 10


def phash(frame: Frame) -> str:
    """The 64-bit hash as 16 hex digits."""
    grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if frame.ndim == 3 else frame
    small = cv2.resize(grey, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
    low = cv2.dct(small)[:8, :8].flatten()
    bits = low[1:] > np.median(low[1:])  # the DC term says only how bright it is
    value = 0
    for bit in (False, *bits):
        value = (value << 1) | int(bit)
    return f"{value:016x}"


def distance(a: str, b: str) -> int:
    """Hamming distance of two hashes (bits)."""
    return (int(a, 16) ^ int(b, 16)).bit_count()
