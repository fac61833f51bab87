"""Signed statements of this installation (an erasure receipt): a JSON document signed with
the installation's signing key (``keys.py``, the one that signs C2PA manifests), verifiable
later by anyone holding the installation's CA certificate (``ca.pem``).

The document is ``{"statement": {...}, "signature": {"alg", "value", "chain"}}``: ``value``
is the base64 ECDSA-P256/SHA-256 signature over the statement's canonical JSON (sorted
keys, no spaces, UTF-8), ``chain`` the signing certificate and the CA as PEM. Verification
checks the signature, that the signing certificate was issued by the CA given (not the one
the document carries) and was valid when the statement says it was made. Rotating the
signing certificate keeps receipts verifiable: the CA stays.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from facegate.provenance.keys import InstallationKeys

ALGORITHM = "ES256"


class ReceiptInvalid(ValueError):
    """The document is not a statement this installation signed, or was changed since."""


def canonical(statement: dict[str, Any]) -> bytes:
    return json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def sign_statement(keys: InstallationKeys, statement: dict[str, Any]) -> dict[str, Any]:
    """``statement`` with its signature (see the module's docstring)."""
    key = serialization.load_pem_private_key(keys.key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ReceiptInvalid("the installation's signing key is not an EC key")
    signature = key.sign(canonical(statement), ec.ECDSA(hashes.SHA256()))
    return {
        "statement": statement,
        "signature": {
            "alg": ALGORITHM,
            "value": base64.b64encode(signature).decode("ascii"),
            "chain": keys.chain_pem.decode("ascii"),
        },
    }


def verify_statement(ca_pem: bytes, document: dict[str, Any], *, at: datetime) -> dict[str, Any]:
    """The statement of a signed ``document`` made at ``at``; ReceiptInvalid otherwise."""
    try:
        statement = document["statement"]
        signature = document["signature"]
        if signature["alg"] != ALGORITHM or not isinstance(statement, dict):
            raise ReceiptInvalid(f"not an {ALGORITHM} statement")
        signer = x509.load_pem_x509_certificates(signature["chain"].encode("ascii"))[0]
        value = base64.b64decode(signature["value"], validate=True)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, ReceiptInvalid):
            raise
        raise ReceiptInvalid(f"malformed signed statement: {exc}") from None
    ca = x509.load_pem_x509_certificate(ca_pem)
    try:
        signer.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise ReceiptInvalid("the signing certificate was not issued by this CA") from None
    if not signer.not_valid_before_utc <= at <= signer.not_valid_after_utc:
        raise ReceiptInvalid("the signing certificate was not valid when the statement was made")
    public = signer.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise ReceiptInvalid("the signing certificate does not hold an EC key")
    try:
        public.verify(value, canonical(statement), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ReceiptInvalid("the signature does not match the statement") from None
    return statement
