"""C2PA manifests with c2pa-python (the native c2pa-rs library ships in its wheel; signing is
offline: no timestamp authority, no network).

Every result gets one manifest: a ``c2pa.created`` action whose IPTC digital source type is
``compositeWithTrainedAlgorithmicMedia``, the claim generator ``facegate/<version>``, the
processors the job ran, and an opaque job reference (``urn:facegate:<installation>:<ref>``):
no tenant, no file name, nothing personal. JPEG, PNG, WebP and MP4 carry it embedded. WebM
is a format c2pa cannot embed into: its manifest store is written beside the result (a
sidecar) and bound to the file by the SHA-256 it asserts (see :func:`sign_sidecar`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import c2pa

from facegate import __version__
from facegate.engine.modelstore.store import sha256_file
from facegate.provenance.errors import ProvenanceUnavailable
from facegate.provenance.keys import InstallationKeys

DIGITAL_SOURCE_TYPE = (
    "http://cv.iptc.org/newscodes/digitalsourcetype/compositeWithTrainedAlgorithmicMedia"
)
JOB_ASSERTION = "org.facegate.job"
ASSET_ASSERTION = "org.facegate.asset"  # sidecars only: the hash that binds them to the file
#: formats whose files carry the manifest themselves
EMBEDDED_FORMATS: dict[str, str] = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "mp4": "video/mp4",
}
SIDECAR_FORMATS: dict[str, str] = {"webm": "video/webm"}
SIDECAR_MIME = "application/c2pa"

# Thumbnails off: the manifest is a few KB instead of a second copy of the picture.
_CONTEXT_SETTINGS: dict[str, Any] = {"builder": {"thumbnail": {"enabled": False}}}


def reference_urn(installation_id: int, reference: str) -> str:
    return f"urn:facegate:{installation_id:04x}:{reference}"


def manifest_definition(
    reference_urn: str,
    processors: list[str],
    *,
    sidecar_sha256: str | None = None,
    consent: Sequence[str] = (),
) -> dict[str, Any]:
    """The manifest of one result (the assertions docs/provenance.md lists). ``consent``: the
    ids of the consent attestations of the job's sources (opaque, like the reference)."""
    job: dict[str, Any] = {"reference": reference_urn}
    if consent:
        job["consent"] = list(consent)
    assertions: list[dict[str, Any]] = [
        {
            "label": "c2pa.actions.v2",
            "data": {
                "actions": [
                    {
                        "action": "c2pa.created",
                        "digitalSourceType": DIGITAL_SOURCE_TYPE,
                        "softwareAgent": {"name": "facegate", "version": __version__},
                        "parameters": {"processors": processors},
                    }
                ]
            },
        },
        {"label": JOB_ASSERTION, "data": job},
    ]
    if sidecar_sha256 is not None:
        assertions.append(
            {"label": ASSET_ASSERTION, "data": {"sha256": sidecar_sha256, "format": "video/webm"}}
        )
    return {
        "claim_generator_info": [{"name": "facegate", "version": __version__}],
        "title": "facegate result",
        "assertions": assertions,
    }


def _signer(keys: InstallationKeys) -> c2pa.Signer:
    info = c2pa.C2paSignerInfo(c2pa.C2paSigningAlg.ES256, keys.chain_pem, keys.key_pem, None)
    return c2pa.Signer.from_info(info)


def _sign(
    keys: InstallationKeys,
    definition: dict[str, Any],
    mime: str,
    source: BinaryIO,
    dest: BinaryIO,
) -> bytes:
    context = c2pa.Context.from_dict(_CONTEXT_SETTINGS)
    try:
        with _signer(keys) as signer, c2pa.Builder(definition, context=context) as builder:
            manifest: bytes = builder.sign(signer, mime, source, dest)
    except c2pa.C2paError as exc:
        raise ProvenanceUnavailable(f"signing the {mime} result failed: {exc}") from None
    return manifest


def sign_bytes(keys: InstallationKeys, data: bytes, fmt: str, definition: dict[str, Any]) -> bytes:
    """The image ``data`` with its manifest embedded."""
    dest = io.BytesIO()
    _sign(keys, definition, EMBEDDED_FORMATS[fmt], io.BytesIO(data), dest)
    return dest.getvalue()


def sign_file(keys: InstallationKeys, path: Path, fmt: str, definition: dict[str, Any]) -> None:
    """Embed the manifest into the file at ``path`` (a video: streamed, never read whole);
    written beside it and renamed over it, so a failure leaves the unsigned file as it was."""
    signed = path.with_name(f".signed-{path.name}")
    try:
        with path.open("rb") as source, signed.open("w+b") as dest:
            _sign(keys, definition, EMBEDDED_FORMATS[fmt], source, dest)
        signed.replace(path)
    finally:
        signed.unlink(missing_ok=True)


def sign_sidecar(
    keys: InstallationKeys,
    reference_urn: str,
    processors: list[str],
    path: Path,
    consent: Sequence[str] = (),
) -> bytes:
    """The manifest store of a file c2pa cannot embed into (WebM): a standalone C2PA manifest
    store whose signed claim asserts the file's SHA-256 (``org.facegate.asset``). c2pa's own
    binding check does not apply to it (it has no WebM parser); facegate's verify checks the
    claim's signature with c2pa and the hash itself."""
    definition = manifest_definition(
        reference_urn, processors, sidecar_sha256=sha256_file(path), consent=consent
    )
    # c2pa binds a manifest store to the bytes it signs; the claim's own hash assertion
    # is the binding that matters for a sidecar, so the store signs a fixed stand-in.
    return _sign(keys, definition, SIDECAR_MIME, io.BytesIO(b"facegate sidecar"), io.BytesIO())
