"""Reading the marks back from a file: the C2PA manifest (with c2pa's own reader and
validation) and the watermark (from the pixels of an image, or of sampled video frames).
Nothing here knows about tenants or jobs; ``verify.py`` looks the marks up."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import av
import av.error
import c2pa
import numpy as np

from facegate.engine.modelstore.store import sha256_file
from facegate.engine.types import Frame
from facegate.engine.watermark import candidate_views, markable, watermark_scores
from facegate.provenance.keys import InstallationKeys
from facegate.provenance.manifest import ASSET_ASSERTION, JOB_ASSERTION, SIDECAR_MIME
from facegate.provenance.payload import LENGTH, Payload, decode_any

ManifestState = Literal["absent", "valid", "tampered"]
VIDEO_SAMPLE_FRAMES = 24  # frames read from a video (spread over its first minute)
VIDEO_SAMPLE_SECONDS = 60.0
_KEEP_SIDE = 640
REMOTE_NOT_FETCHED = "facegate.manifest.remote.not_fetched"


@dataclass(frozen=True)
class ManifestFinding:
    """What the manifest says. ``valid``: c2pa validated the signature and the binding to
    the file; ``tampered``: a manifest is there but the file or the manifest was changed
    after signing (or the signature is broken)."""

    state: ManifestState
    signed_by_this_installation: bool = False
    reference: str | None = None
    claim_generator: str | None = None
    digital_source_type: str | None = None
    failures: list[str] = field(default_factory=list)
    #: the consent attestation ids of the job's sources, when it had any
    consent: list[str] = field(default_factory=list)


def _context(keys: InstallationKeys) -> c2pa.Context:
    # This installation's CA is the trust anchor: "Trusted" means signed by this installation.
    # Never fetch a remote manifest: a public upload's XMP (dcterms:provenance) names the URL,
    # and c2pa fetches it by default, so anyone could make the service GET any address.
    return c2pa.Context.from_dict(
        {
            "trust": {"trust_anchors": keys.ca_pem.decode()},
            "verify": {"verify_trust": True, "remote_manifest_fetch": False},
        }
    )


def _assertion(manifest: dict[str, Any], label: str) -> dict[str, Any] | None:
    for assertion in manifest.get("assertions") or []:
        if str(assertion.get("label", "")).startswith(label):
            data = assertion.get("data")
            return data if isinstance(data, dict) else None
    return None


def _finding(reader: c2pa.Reader, *, asset_sha256: str | None = None) -> ManifestFinding:
    store = json.loads(reader.json())
    manifest: dict[str, Any] = store["manifests"][store["active_manifest"]]
    results = store.get("validation_results", {}).get("activeManifest", {})
    failures = [str(item.get("code")) for item in results.get("failure", [])]
    successes = {str(item.get("code")) for item in results.get("success", [])}
    actions = (_assertion(manifest, "c2pa.actions") or {}).get("actions") or [{}]
    job = _assertion(manifest, JOB_ASSERTION) or {}
    generator = (manifest.get("claim_generator_info") or [{}])[0]
    if asset_sha256 is None:
        state: ManifestState = (
            "valid" if reader.get_validation_state() in ("Valid", "Trusted") else "tampered"
        )
        trusted = reader.get_validation_state() == "Trusted"
    else:
        # A sidecar (WebM): c2pa checks the claim's signature; the binding to the file is
        # the SHA-256 the signed claim asserts, checked here.
        asserted = (_assertion(manifest, ASSET_ASSERTION) or {}).get("sha256")
        signed = "claimSignature.validated" in successes and not any(
            code.startswith(("claimSignature", "signingCredential.invalid", "assertion.hashedURI"))
            for code in failures
        )
        state = "valid" if signed and asserted == asset_sha256 else "tampered"
        if asserted != asset_sha256:
            failures = [*failures, "facegate.asset.sha256.mismatch"]
        trusted = signed and "signingCredential.trusted" in successes
    return ManifestFinding(
        state=state,
        signed_by_this_installation=trusted and state == "valid",
        reference=job.get("reference"),
        claim_generator=f"{generator.get('name')}/{generator.get('version')}",
        digital_source_type=actions[0].get("digitalSourceType"),
        failures=failures,
        consent=[str(item) for item in job.get("consent") or []],
    )


def read_manifest(
    keys: InstallationKeys, path: Path, mime: str, sidecar: bytes | None = None
) -> ManifestFinding:
    """The manifest embedded in the file at ``path`` (``mime``), or the sidecar's for it."""
    try:
        if sidecar is not None:
            with c2pa.Reader(SIDECAR_MIME, io.BytesIO(sidecar), context=_context(keys)) as reader:
                return _finding(reader, asset_sha256=sha256_file(path))
        with path.open("rb") as stream:
            reader = c2pa.Reader.try_create(mime, stream, None, _context(keys))
            if reader is None:
                return ManifestFinding(state="absent")
            with reader:
                return _finding(reader)
    except c2pa.C2paError as exc:
        if str(exc).startswith("Remote"):
            # No manifest in the file, only an address of one (never fetched: see _context).
            return ManifestFinding(state="absent", failures=[REMOTE_NOT_FETCHED])
        # A manifest store is there but cannot be parsed or checked: it was damaged.
        return ManifestFinding(state="tampered", failures=[type(exc).__name__.lstrip("_")])


@dataclass(frozen=True)
class WatermarkFinding:
    """``found``: a payload whose MAC verifies under this installation's watermark key."""

    found: bool
    payload: Payload | None = None
    frames_read: int = 0


def read_image_watermark(frame: Frame, key: bytes) -> WatermarkFinding:
    """``key``: the watermark key (``InstallationKeys.mac_key("watermark")``)."""
    if not markable(frame):
        return WatermarkFinding(found=False, frames_read=1)
    payload = decode_any((watermark_scores(view, LENGTH) for view in candidate_views(frame)), key)
    return WatermarkFinding(found=payload is not None, payload=payload, frames_read=1)


def read_video_watermark(
    path: Path, frames_total: int, fps: float, key: bytes, *, decode_frames: int = 1800
) -> WatermarkFinding:
    """Soft bits averaged over frames sampled from the first minute: every frame carries
    the same payload, so the average reads through what re-encoding did to single frames.
    At most ``decode_frames`` frames are decoded, whatever the file (:func:`sample_frames`)."""
    window = max(1, min(frames_total, round(fps * VIDEO_SAMPLE_SECONDS)))
    targets = [window * i / VIDEO_SAMPLE_FRAMES / fps for i in range(VIDEO_SAMPLE_FRAMES)]
    sampled = [frame for frame in sample_frames(path, targets, decode_frames) if markable(frame)]
    if not sampled:
        return WatermarkFinding(found=False, frames_read=0)
    views_of = [candidate_views(frame) for frame in sampled]
    averaged = (
        np.mean([watermark_scores(view, LENGTH) for view in views], axis=0)
        for views in zip(*views_of, strict=True)
    )
    payload = decode_any(averaged, key)
    return WatermarkFinding(found=payload is not None, payload=payload, frames_read=len(sampled))


def sample_frames(path: Path, seconds: list[float], budget: int) -> list[Frame]:
    """Frames near each of ``seconds``, reduced to ``_KEEP_SIDE``, decoding at most
    ``budget`` frames in all. Each sample seeks to the keyframe at or before its time and
    takes the first frame not taken yet: one decode per sample where keyframes are dense,
    a few more where they are sparse (then samples bunch after a keyframe), never more than
    the budget — so a long, high-rate or keyframe-less file costs what a short one does."""
    sampled: list[Frame] = []
    taken: set[int] = set()
    decoded = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        start = stream.start_time or 0
        try:
            for at in seconds:
                if decoded >= budget:
                    break
                if base is not None:
                    container.seek(start + int(at / base), stream=stream, backward=True)
                for frame in container.decode(stream):
                    decoded += 1
                    key = frame.pts if frame.pts is not None else -decoded
                    if key not in taken:
                        taken.add(key)
                        sampled.append(_reduced_frame(frame))
                        break
                    if decoded >= budget:
                        break
        except av.error.FFmpegError:
            pass  # a damaged tail: the samples read so far are the answer
    return sampled


def _reduced_frame(frame: av.VideoFrame) -> Frame:
    """A decoded frame as BGR, scaled by FFmpeg to at most ``_KEEP_SIDE`` px on its longer
    side (cheaper than converting the full frame and resizing it)."""
    scale = _KEEP_SIDE / max(frame.width, frame.height)
    if scale >= 1:
        return np.asarray(frame.to_ndarray(format="bgr24"), np.uint8)
    width, height = max(1, round(frame.width * scale)), max(1, round(frame.height * scale))
    return np.asarray(
        frame.reformat(
            width=width, height=height, format="bgr24", interpolation="AREA"
        ).to_ndarray(),
        np.uint8,
    )
