"""Standard Webhooks signatures (standardwebhooks.com): ``webhook-signature`` is
``v1,`` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), the key being
the base64 part of a ``whsec_`` secret; several signatures are separated by spaces (a
rotated secret's grace period). :func:`verify` is what a receiver runs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
#: How far a message's timestamp may be from the receiver's clock (replay window).
TOLERANCE_SECONDS = 300


class InvalidSignature(Exception):
    """The message is not signed by the secret, or its timestamp is out of tolerance."""


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret starts with {SECRET_PREFIX!r}")
    return base64.b64decode(secret[len(SECRET_PREFIX) :])


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    secrets_: Sequence[str], message_id: str, body: bytes, *, timestamp: int | None = None
) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every secret given."""
    when = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(when),
        "webhook-signature": " ".join(sign(s, message_id, when, body) for s in secrets_),
        "content-type": "application/json",
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> None:
    """Raise :class:`InvalidSignature` unless one of the message's signatures is by
    ``secret`` and its timestamp is within ``tolerance`` seconds of ``now``."""
    lowered = {key.lower(): value for key, value in headers.items()}
    try:
        message_id = lowered["webhook-id"]
        timestamp = int(lowered["webhook-timestamp"])
        signatures = lowered["webhook-signature"].split()
    except (KeyError, ValueError):
        raise InvalidSignature("missing or malformed webhook headers") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise InvalidSignature("the message timestamp is outside the tolerance")
    expected = sign(secret, message_id, timestamp, body)
    if not any(hmac.compare_digest(expected, given) for given in signatures):
        raise InvalidSignature("no signature matches the secret")
