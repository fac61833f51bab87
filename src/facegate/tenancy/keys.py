"""API keys: ``fg_<id>_<secret><checksum>``.

- ``id``: 12 base62 characters, the public lookup handle (primary key of ``api_keys``).
- ``secret``: 32 random bytes in 43 base62 characters; only its sha256 is stored, so the
  key is shown exactly once, at creation.
- ``checksum``: 6 base62 characters of CRC32 over everything before it, so a mistyped or
  truncated key is refused without touching the database (and secret scanners can
  recognise real keys).

Why sha256 and not bcrypt/argon2: slow hashes protect low-entropy human passwords. A
256-bit random secret cannot be brute-forced from its hash, and a slow hash would cost
tens of milliseconds of CPU on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import zlib
from dataclasses import dataclass

PREFIX = "fg"
ID_LENGTH = 12
SECRET_BYTES = 32
SECRET_LENGTH = 43  # 62**43 > 2**256
CHECKSUM_LENGTH = 6
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_TOKEN_RE = re.compile(
    rf"^{PREFIX}_([0-9A-Za-z]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_LENGTH}}})"
    rf"([0-9A-Za-z]{{{CHECKSUM_LENGTH}}})$"
)


def base62(number: int, width: int) -> str:
    digits: list[str] = []
    while number:
        number, remainder = divmod(number, 62)
        digits.append(_ALPHABET[remainder])
    return "".join(reversed(digits)).rjust(width, "0")


def checksum(body: str) -> str:
    return base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented secret with the stored hash."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)


@dataclass(frozen=True)
class GeneratedKey:
    """A fresh key: ``token`` goes to the user once, ``secret_hash`` to the database."""

    key_id: str
    token: str
    secret_hash: str


@dataclass(frozen=True)
class ParsedKey:
    key_id: str
    secret: str


def generate_key() -> GeneratedKey:
    key_id = "".join(secrets.choice(_ALPHABET) for _ in range(ID_LENGTH))
    secret = base62(int.from_bytes(secrets.token_bytes(SECRET_BYTES), "big"), SECRET_LENGTH)
    body = f"{PREFIX}_{key_id}_{secret}"
    return GeneratedKey(key_id=key_id, token=body + checksum(body), secret_hash=hash_secret(secret))


def looks_like_key(token: str) -> bool:
    return token.startswith(f"{PREFIX}_")


def parse_key(token: str) -> ParsedKey | None:
    """The id and secret of a well-formed key, or None (wrong shape or bad checksum)."""
    match = _TOKEN_RE.match(token)
    if match is None:
        return None
    key_id, secret, check = match.groups()
    expected = checksum(f"{PREFIX}_{key_id}_{secret}")
    if not hmac.compare_digest(expected, check):
        return None
    return ParsedKey(key_id=key_id, secret=secret)
