"""The 64 bits a watermark carries: a random job serial (24) + a keyed MAC of it (40).

The MAC is HMAC-SHA256 under the installation's watermark key (``InstallationKeys.mac_key``),
truncated to 40 bits: without the key no payload verifies, so a mark cannot be forged from
the method (open source) or from marks read off other pictures, and the serial is drawn at
random (``MarkRepository.issue``), so a serial says nothing about how many jobs ran or when.
The payload names no installation: one whose MAC verifies under this installation's key was
made by it; any other reading, another installation's mark included, is no mark.

Reading is soft: each bit comes with the share of blocks that voted for it, and when the
bits as read fail the MAC, the ``CHASE_BITS`` least certain ones are flipped in every
combination (Chase decoding) until one passes. A random picture passes for one combination
with probability 2^-40, so with 2^10 combinations over six views a false find is ~6e-9 per
unmarked picture: what the old payload's CRC-24 and 16-bit installation id gave for "names
this installation" (a find on top must name a serial that was issued).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

SERIAL_BITS = 24
MAC_BITS = 40
LENGTH = SERIAL_BITS + MAC_BITS
CHASE_BITS = 10
WATERMARK = "watermark"  # the purpose of the mark key the MAC is made under (mac_key)
_MAC_MASK = (1 << MAC_BITS) - 1


@dataclass(frozen=True)
class Payload:
    serial: int


def payload_mac(key: bytes, serial: int) -> int:
    """The 40-bit tag of ``serial`` under the watermark key."""
    digest = hmac.digest(key, serial.to_bytes(SERIAL_BITS // 8, "big"), "sha256")
    return int.from_bytes(digest[: MAC_BITS // 8], "big")


def encode_payload(key: bytes, serial: int) -> npt.NDArray[np.uint8]:
    """The bits to embed (most significant first): ``serial`` (below 2^24), then its tag."""
    if not 0 <= serial < 1 << SERIAL_BITS:
        raise ValueError(f"a serial is {SERIAL_BITS} bits")
    word = (serial << MAC_BITS) | payload_mac(key, serial)
    return np.array([(word >> (LENGTH - 1 - i)) & 1 for i in range(LENGTH)], dtype=np.uint8)


def _word(bits: npt.NDArray[np.uint8]) -> int:
    return int("".join(str(int(b)) for b in bits), 2)


# Trials by number of flips: fewest first (the likeliest correction).
_TRIALS = sorted(range(1 << CHASE_BITS), key=lambda mask: (bin(mask).count("1"), mask))


def decode_scores(scores: npt.NDArray[np.float64], key: bytes) -> Payload | None:
    """The payload whose MAC verifies nearest to the soft bits read, or None."""
    word = _word((scores > 0.5).astype(np.uint8))
    doubt = [int(i) for i in np.argsort(np.abs(scores - 0.5), kind="stable")[:CHASE_BITS]]
    # flipped[mask]: the XOR of the flips ``mask`` selects (built from the mask less its
    # lowest bit, so each of the 1024 costs one XOR)
    flipped = [0] * (1 << CHASE_BITS)
    for mask in range(1, 1 << CHASE_BITS):
        lowest = mask & -mask
        flipped[mask] = flipped[mask ^ lowest] ^ (
            1 << (LENGTH - 1 - doubt[lowest.bit_length() - 1])
        )
    for mask in _TRIALS:
        trial = word ^ flipped[mask]
        serial = trial >> MAC_BITS
        if hmac.compare_digest(
            (trial & _MAC_MASK).to_bytes(5, "big"), payload_mac(key, serial).to_bytes(5, "big")
        ):
            return Payload(serial=serial)
    return None


def decode_any(views: Iterable[npt.NDArray[np.float64]], key: bytes) -> Payload | None:
    """The first view (soft bits of one candidate reading) that decodes."""
    for scores in views:
        found = decode_scores(scores, key)
        if found is not None:
            return found
    return None
