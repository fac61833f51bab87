"""Face descriptors at rest (GDPR Art. 9: biometric data): AES-256-GCM under a key derived
from the installation's mark key (``InstallationKeys.mac_key("takedown descriptor")``), so
a copy of the database alone does not hold a usable descriptor. Only a case's probe and a
block's descriptor are stored, and only this way; the descriptors of the sources a case
compares against are computed in memory and dropped."""

from __future__ import annotations

import os

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from facegate.engine.types import FloatArray
from facegate.provenance.keys import InstallationKeys

_PURPOSE = "takedown descriptor"
_NONCE = 12


def seal(keys: InstallationKeys, descriptors: list[FloatArray]) -> bytes:
    """One or more 128-d descriptors, encrypted (nonce first)."""
    plain = np.asarray(descriptors, dtype="<f4").tobytes()
    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(keys.mac_key(_PURPOSE)).encrypt(nonce, plain, _PURPOSE.encode())


def unseal(keys: InstallationKeys, sealed: bytes) -> list[FloatArray]:
    """The descriptors :func:`seal` encrypted; [] when they do not open under this key."""
    try:
        plain = AESGCM(keys.mac_key(_PURPOSE)).decrypt(
            sealed[:_NONCE], sealed[_NONCE:], _PURPOSE.encode()
        )
    except (InvalidTag, ValueError):
        return []
    values = np.frombuffer(plain, dtype="<f4").astype(np.float32)
    return [row.copy() for row in values.reshape(-1, 128)]
